package snapshot_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A time-sliced node's slots are its physical GPUs: a node of 2 GPUs whose device plugin
// advertises each 4 times (nvidia.com/gpu: 8) has 2 slots, with the inventory's UUIDs.
func TestTimeSlicedNodeCountsPhysicalGPUs(t *testing.T) {
	obj := testutil.MakeNode("n1").GPUs(2, "H100").TimeSliced(4, 81920).Obj()
	if q := obj.Status.Allocatable[v1alpha1.ResourceGPU]; q.Value() != 8 {
		t.Fatalf("builder advertises %s nvidia.com/gpu, want 8", q.String())
	}
	info, err := snapshot.NodeInfoFromNode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.GPUs) != 2 || info.Replicas != 4 {
		t.Fatalf("NodeInfo: %d GPUs, replicas %d; want 2 and 4", len(info.GPUs), info.Replicas)
	}
	s := snapshot.New()
	if err := s.UpsertNode(obj); err != nil {
		t.Fatal(err)
	}
	n := s.Node("n1")
	if len(n.Slots) != 2 || n.Replicas != 4 || n.FreeWholeSlots() != 2 {
		t.Fatalf("slots %d, replicas %d, free %d; want 2, 4, 2", len(n.Slots), n.Replicas, n.FreeWholeSlots())
	}
	for i, g := range n.Slots {
		if g.Index != i || g.UUID != "GPU-n1-"+string(rune('0'+i)) || g.MemoryMiB != 81920 {
			t.Errorf("slot %d = %+v", i, g)
		}
	}

	// Three pods found running with nvidia.com/gpu: 1 each (another scheduler's, or placed before
	// the upgrade): the kubelet gave them replicas; two hold the node's two GPUs and the third,
	// with no GPU left to account it on, floats. No GPU is free for a fourth.
	for _, p := range []*corev1.Pod{
		testutil.MakePod("a", "w0").Queue("a").GPU(1).Node("n1").GPUIndex(0).Obj(),
		testutil.MakePod("a", "w1").Queue("a").GPU(1).Node("n1").GPUIndex(1).Obj(),
		testutil.MakePod("a", "w2").Queue("a").GPU(1).Node("n1").Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	if n.FreeWholeSlots() != 0 || n.Floating != 1 || n.HasSharedRoom() {
		t.Errorf("free %d, floating %d, shared room %v; want 0, 1, false", n.FreeWholeSlots(), n.Floating, n.HasSharedRoom())
	}
}

// The device plugin takes a failed GPU's replicas out of the node's allocatable together: 2
// GPUs × 4 replicas with one unhealthy is allocatable 4, one slot, the healthy GPU.
func TestTimeSlicedNodeWithAnUnhealthyGPU(t *testing.T) {
	obj := testutil.MakeNode("n1").GPUs(2, "H100").TimeSliced(4, 81920).Obj()
	inv := v1alpha1.GPUInventory{Replicas: 4, GPUs: []v1alpha1.GPUDevice{
		{Index: 0, UUID: "GPU-lost", MemoryMiB: 81920},
		{Index: 1, UUID: "GPU-ok", MemoryMiB: 81920, Healthy: true},
	}}
	b, _ := json.Marshal(inv)
	obj.Annotations[v1alpha1.GPUInventoryAnnotation] = string(b)
	for _, alloc := range []int64{4, 8} { // the plugin noticed, or not yet
		obj.Status.Allocatable[v1alpha1.ResourceGPU] = *resource.NewQuantity(alloc, resource.DecimalSI)
		s := snapshot.New()
		if err := s.UpsertNode(obj); err != nil {
			t.Fatal(err)
		}
		n := s.Node("n1")
		if len(n.Slots) != 1 || n.Slots[0].Index != 1 || n.Slots[0].UUID != "GPU-ok" || n.UnhealthyGPUs != 1 {
			t.Errorf("allocatable %d: slots %+v, unhealthy %d; want GPU 1 alone", alloc, n.Slots, n.UnhealthyGPUs)
		}
	}
}

// A node whose agent starts reporting replicas (the device plugin was reconfigured) shrinks to
// its physical GPUs: pods on the GPUs that remain stay there, those on slots that were replicas
// float, and the snapshot stays consistent; the reverse gives the slots back.
func TestNodeBecomesTimeSliced(t *testing.T) {
	s := snapshot.New()
	plain := testutil.MakeNode("n1").GPUs(8, "H100").Inventory(81920).Obj()
	if err := s.UpsertNode(plain); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		testutil.MakePod("a", "whole").Queue("a").GPU(1).Node("n1").GPUIndex(1).Obj(),
		testutil.MakePod("a", "half").Queue("a").Fraction("0.5").Node("n1").GPUIndex(0).Obj(),
		testutil.MakePod("a", "far").Queue("a").GPU(1).Node("n1").GPUIndex(6).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	sliced := testutil.MakeNode("n1").GPUs(2, "H100").TimeSliced(4, 81920).Obj()
	if err := s.UpsertNode(sliced); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	n := s.Node("n1")
	if len(n.Slots) != 2 || n.Slots[1].Owners != 1 || n.Slots[0].Sharers != 1 || n.Floating != 1 {
		t.Errorf("after time-slicing: slots %+v, floating %d", n.Slots, n.Floating)
	}
	if n.FreeWholeSlots() != 0 {
		t.Errorf("free whole GPUs = %d, want 0", n.FreeWholeSlots())
	}
	if err := s.UpsertNode(plain); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if n := s.Node("n1"); len(n.Slots) != 8 || n.Replicas != 0 {
		t.Errorf("back to one device per GPU: %d slots, replicas %d", len(n.Slots), n.Replicas)
	}
}
