//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestKubeletRejection plays a kubelet that refuses pods fairway bound (phase Failed, reason
// OutOfnvidia.com/gpu, written through the status subresource as a kubelet writes it) on three
// fake 8-GPU nodes, and shows that fairway learns from it: a ReplicaSet's replacement is placed
// on another node, a bare pod is told it was rejected and will not come back, and a controller
// that keeps making pods only the rejecting node could take does not get them bound there in a
// loop.
func TestKubeletRejection(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(3)}})
	ensureSchedFixtures(t, c)
	startSched(t, c, bin, "fairway-scheduler", true)
	ctx := t.Context()
	const ns = "rejects"
	newNamespace(t, c, ns)
	schedQueue(t, c, ns, "", ns)
	defer deleteNamespace(t, c, ns, ns)
	k := startKubeletStandIn(t, c, ns)

	// 1. A ReplicaSet's pod is rejected where it was bound; its replacement runs elsewhere.
	var firstUID atomic.Value // the first pod of the ReplicaSet bound, the only one rejected
	k.setRule(func(p *corev1.Pod) bool {
		if p.Labels["app"] != "train" {
			return false
		}
		firstUID.CompareAndSwap(nil, p.UID)
		return firstUID.Load() == p.UID
	})
	mustCreate(t, c, replicaSet(schedPod(ns, "train", ns).GPUs(8).Priority(fairwayv1.PriorityClassTraining).OnNodes("h100-0", "h100-1"), 1))
	var rejectedOn string
	var first types.UID
	eventually(t, 60*time.Second, "the ReplicaSet's replacement running on the other node", func(ctx context.Context) (bool, error) {
		if v := firstUID.Load(); v != nil {
			first = v.(types.UID)
		}
		rejectedOn = k.rejectedNode(first)
		if rejectedOn == "" {
			return false, fmt.Errorf("no pod of the ReplicaSet rejected yet")
		}
		for _, p := range podsIn(t, c, ctx, ns, map[string]string{"app": "train"}) {
			if p.UID != first && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				if p.Spec.NodeName == rejectedOn {
					return false, fmt.Errorf("replacement %s bound to %s, the node that rejected the first pod", p.Name, rejectedOn)
				}
				return true, nil
			}
		}
		return false, fmt.Errorf("the first pod was rejected on %s; no replacement runs yet", rejectedOn)
	})
	if n := k.bindsTo(rejectedOn, "train"); n != 1 {
		t.Errorf("%d pods of the ReplicaSet were bound to %s, which rejected the first; want 1", n, rejectedOn)
	}

	// 2. A bare pod rejected is told why, and that nothing brings it back.
	k.setRule(func(p *corev1.Pod) bool { return p.Name == "notebook" })
	mustCreate(t, c, schedPod(ns, "notebook", ns).GPUs(1).OnNodes("h100-2").Obj())
	eventually(t, 30*time.Second, "the KubeletRejected event on the bare pod", func(ctx context.Context) (bool, error) {
		for _, note := range eventsFor(t, c, ctx, ns, "KubeletRejected") {
			if strings.Contains(note, "OutOfnvidia.com/gpu") && strings.Contains(note, "h100-2") && strings.Contains(note, "nothing recreates") {
				t.Logf("event: %s", note)
				return true, nil
			}
		}
		return false, nil
	})
	rejectedAt := time.Now()

	// 3. A ReplicaSet whose pods only h100-2 could take, every one of them rejected: fairway
	// binds there again only after the node's backoff (30 s, then 60 s), not in a loop.
	k.setRule(func(p *corev1.Pod) bool { return p.Labels["app"] == "loop" })
	mustCreate(t, c, replicaSet(schedPod(ns, "loop", ns).GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes("h100-2"), 1))
	time.Sleep(time.Until(rejectedAt.Add(50 * time.Second)))
	binds := k.bindsTo("h100-2", "loop")
	pods := podsIn(t, c, ctx, ns, map[string]string{"app": "loop"})
	t.Logf("after 50 s: %d pods of the looping ReplicaSet bound to h100-2, %d pods in all, %d waiting", binds, len(pods), len(pendingPods(pods)))
	if binds < 1 || binds > 2 {
		t.Errorf("%d binds to h100-2 in the 50 s after it rejected a pod; want 1 or 2 (one after each backoff)", binds)
	}
	if w := pendingPods(pods); len(w) != 1 || reasonOf(&w[0]) == "" {
		t.Errorf("want the ReplicaSet's one replacement waiting with a reason, got %d waiting: %s", len(w), describePods(pods))
	}
}

// kubeletStandIn fails, as the kubelet does at admission, the bound pods its rule picks, and
// remembers which pods were bound to which node.
type kubeletStandIn struct {
	mu       sync.Mutex
	rule     func(*corev1.Pod) bool
	rejected map[types.UID]string
	bindings map[types.UID]corev1.Pod
}

func (k *kubeletStandIn) setRule(f func(*corev1.Pod) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rule = f
}

func (k *kubeletStandIn) rejectedNode(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rejected[uid]
}

// bindsTo counts the pods labelled app=app that were ever bound to node.
func (k *kubeletStandIn) bindsTo(node, app string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, p := range k.bindings {
		if p.Spec.NodeName == node && p.Labels["app"] == app {
			n++
		}
	}
	return n
}

// startKubeletStandIn watches the namespace's pods every 100 ms. A pod is failed once kwok has
// marked it Running (so that kwok's own status write cannot undo the rejection), with the
// status the kubelet writes for a pod its device plugin cannot serve.
func startKubeletStandIn(t *testing.T, c *cluster.Cluster, ns string) *kubeletStandIn {
	k := &kubeletStandIn{rule: func(*corev1.Pod) bool { return false }, rejected: map[types.UID]string{}, bindings: map[types.UID]corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range list.Items {
					k.visit(ctx, c, &list.Items[i])
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return k
}

func (k *kubeletStandIn) visit(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	k.mu.Lock()
	k.bindings[p.UID] = *p
	_, done := k.rejected[p.UID]
	reject := !done && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && k.rule(p)
	k.mu.Unlock()
	if !reject {
		return
	}
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "OutOfnvidia.com/gpu"
	p.Status.Message = fmt.Sprintf("Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: %d, used: 0, capacity: 8", gpusOf(p))
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := c.Clientset().CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return // a conflict: tried again at the next look
	}
	k.mu.Lock()
	k.rejected[p.UID] = p.Spec.NodeName
	k.mu.Unlock()
}
