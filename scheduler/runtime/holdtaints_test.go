package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/holdtaint"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// The node freed for a gang gets the hold taint (fairway.dev/held) before the first eviction
// there; a taint the snapshot holds nothing for (left by a previous leader) is removed, and so is
// the retired key fairway.dev/reserved an older version left on a node.
func TestHoldTaintBeforeEvictions(t *testing.T) {
	objs := []apiruntime.Object{
		testutil.MakeNode("n1").GPUs(1, "H100").Taint(v1alpha1.HoldTaintKey, "old.gang", corev1.TaintEffectNoSchedule).Obj(),
		testutil.MakeNode("n3").Taint(v1alpha1.RetiredHoldTaintKey, "older.gang", corev1.TaintEffectNoSchedule).Obj(),
		testutil.MakeNode("n2").GPUs(4, "H100").Obj(),
	}
	for i := range 4 {
		p := testutil.MakePod("borrow", fmt.Sprint("b-", i)).Queue("borrow").GPU(1).Created(time.Now().Add(-time.Hour)).Node("n2").Obj()
		p.UID, p.Spec.SchedulerName = types.UID(fmt.Sprint("b-uid-", i)), v1alpha1.SchedulerName
		objs = append(objs, p)
	}
	claim := testutil.MakePod("lend", "claim").Queue("lend").GPU(4).Obj()
	claim.UID, claim.Spec.SchedulerName = "claim-uid", v1alpha1.SchedulerName
	objs = append(objs, claim)
	cs := fake.NewClientset(objs...)
	var mu sync.Mutex
	var order []string // "patch n2", "evict", ...
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		mu.Lock()
		order = append(order, "patch "+a.(k8stesting.PatchAction).GetName())
		mu.Unlock()
		return false, nil, nil
	})
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		if a.GetSubresource() == "eviction" {
			mu.Lock()
			order = append(order, "evict")
			mu.Unlock()
		}
		return false, nil, nil
	})
	rt := startRuntime(t, cs, testutil.MakeQueue("borrow").Obj(), testutil.MakeQueue("lend").GPU("4", 1, "").Obj())
	node := func(name string) *corev1.Node {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, "n2 tainted for lend/claim", func() bool {
		v, ok := holdtaint.Tainted(node("n2"))
		return ok && v == "lend.claim"
	})
	eventually(t, "the stale hold taint of n1 removed", func() bool {
		_, ok := holdtaint.Tainted(node("n1"))
		return !ok
	})
	eventually(t, "the retired key removed from n3", func() bool {
		return !holdtaint.Retired(node("n3")) && len(node("n3").Spec.Taints) == 0
	})
	eventually(t, "an eviction", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range order {
			if o == "evict" {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	for _, o := range order {
		if o == "patch n2" {
			break
		}
		if o == "evict" {
			t.Fatalf("an eviction came before n2 was tainted: %v", order)
		}
	}
	_ = rt
}
