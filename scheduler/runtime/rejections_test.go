package runtime

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func rejectedPod(name, node, reason string) *corev1.Pod {
	p := testutil.MakePod("team", name).Queue("team").GPU(1).Node(node).Phase(corev1.PodFailed).Obj()
	p.Status.Reason = reason
	p.Status.Message = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 2, capacity: 2"
	return p
}

func gpusOf(n *corev1.Node) int64 {
	q := n.Status.Allocatable[v1alpha1.ResourceGPU]
	return q.Value()
}

// A rejection for GPUs makes the snapshot see the node with no more GPUs than its pods use,
// for a backoff that doubles with each rejection, or until the node's allocatable changes; other
// admission failures cordon the node for the backoff; each pod counts once; other schedulers'
// and non-admission failures count not at all.
func TestRejections(t *testing.T) {
	now := testutil.Epoch
	node := testutil.MakeNode("n1").GPUs(8, "H100").Obj()
	snap := snapshot.New()
	if err := snap.UpsertNode(node); err != nil {
		t.Fatal(err)
	}
	for idx := range 2 {
		if err := snap.UpsertPod(testutil.MakePod("team", fmt.Sprintf("running-%d", idx)).Queue("team").GPU(1).Node("n1").GPUIndex(idx).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	r := newRejections()

	if _, ok := r.observe(rejectedPod("other", "n1", "Error"), node, snap.Node("n1"), now); ok {
		t.Error("a pod failed by its own container was taken for a kubelet rejection")
	}
	foreign := rejectedPod("foreign", "n1", "OutOfnvidia.com/gpu")
	foreign.Spec.SchedulerName = "default-scheduler"
	if _, ok := r.observe(foreign, node, snap.Node("n1"), now); ok {
		t.Error("another scheduler's pod was counted")
	}
	if got := r.adjust(node, now); got != node {
		t.Error("no rejection yet, but the node was changed")
	}

	// Rejections found while the snapshot is rebuilt are old news: seen, not acted on.
	r.quiet = true
	if _, ok := r.observe(rejectedPod("old", "n1", "OutOfnvidia.com/gpu"), node, snap.Node("n1"), now); ok {
		t.Error("a rejection found at start-up was acted on")
	}
	r.quiet = false
	if _, ok := r.observe(rejectedPod("old", "n1", "OutOfnvidia.com/gpu"), node, snap.Node("n1"), now); ok {
		t.Error("a rejection found at start-up was acted on at its next update")
	}

	p := rejectedPod("p1", "n1", "OutOfnvidia.com/gpu")
	rj, ok := r.observe(p, node, snap.Node("n1"), now)
	if !ok || rj.Resource != v1alpha1.ResourceGPU || rj.Backoff != rejectBackoff || rj.Node != "n1" {
		t.Fatalf("observe = %+v, %v; want a GPU rejection on n1 with the first backoff", rj, ok)
	}
	if _, again := r.observe(p, node, snap.Node("n1"), now.Add(time.Second)); again {
		t.Error("the same pod was counted twice")
	}
	if got := gpusOf(r.adjust(node, now.Add(time.Second))); got != 2 {
		t.Errorf("corrected GPUs = %d, want the 2 its pods use", got)
	}
	if gpusOf(node) != 8 {
		t.Error("adjust changed the informer's node object")
	}
	if got := r.expired(now.Add(10*time.Second), nil); len(got) != 0 {
		t.Errorf("expired before the backoff ended: %v", got)
	}
	at := now.Add(rejectBackoff)
	if got := r.expired(at, nil); len(got) != 1 || got[0] != "n1" {
		t.Errorf("expired at the end of the backoff = %v, want [n1]", got)
	}
	if got := r.adjust(node, at); got != node {
		t.Error("the correction outlived its backoff")
	}

	// A second rejection doubles the backoff.
	rj, _ = r.observe(rejectedPod("p2", "n1", "OutOfnvidia.com/gpu"), node, snap.Node("n1"), at)
	if rj.Backoff != 2*rejectBackoff {
		t.Errorf("second backoff = %v, want %v", rj.Backoff, 2*rejectBackoff)
	}
	// The node's own allocatable changes (a GPU dropped out): the kubelet's figure is believed.
	smaller := node.DeepCopy()
	smaller.Status.Allocatable[v1alpha1.ResourceGPU] = resource.MustParse("7")
	if got := gpusOf(r.adjust(smaller, at.Add(time.Second))); got != 7 {
		t.Errorf("after the allocatable changed: GPUs = %d, want 7", got)
	}

	// Any other admission failure cordons the node for the backoff.
	r2 := newRejections()
	if _, ok := r2.observe(rejectedPod("p3", "n1", "UnexpectedAdmissionError"), node, snap.Node("n1"), now); !ok {
		t.Fatal("UnexpectedAdmissionError not taken for a rejection")
	}
	if got := r2.adjust(node, now); !got.Spec.Unschedulable || gpusOf(got) != 8 {
		t.Errorf("after UnexpectedAdmissionError: unschedulable %v, GPUs %d; want cordoned, GPUs untouched", got.Spec.Unschedulable, gpusOf(got))
	}

	// The backoff is capped and forgotten after a quiet spell.
	r3 := newRejections()
	var last Rejection
	for i := range 12 {
		last, _ = r3.observe(rejectedPod(fmt.Sprintf("loop-%d", i), "n1", "OutOfcpu"), node, snap.Node("n1"), now.Add(time.Duration(i)*time.Minute))
	}
	if last.Backoff != maxRejectBackoff {
		t.Errorf("backoff after 12 rejections = %v, want the cap %v", last.Backoff, maxRejectBackoff)
	}
	later := now.Add(11*time.Minute + rejectForget + time.Minute)
	if rj, _ := r3.observe(rejectedPod("fresh", "n1", "OutOfcpu"), node, snap.Node("n1"), later); rj.Backoff != rejectBackoff {
		t.Errorf("backoff after a quiet spell = %v, want %v again", rj.Backoff, rejectBackoff)
	}
}
