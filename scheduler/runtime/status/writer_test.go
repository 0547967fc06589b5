package status

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// A round before the next tick is asked for exactly when a PodGroup's gang gets a reason code it
// did not have: a new waiting gang, or a new code. Lone pods, and gangs whose reason only kept
// its code, wait for the tick.
func TestNewReason(t *testing.T) {
	pg := snapshot.GangKey{Namespace: "ns", Name: "big", PodGroup: true}
	lone := snapshot.GangKey{Namespace: "ns", Name: "pod"}
	report := func(reasons map[snapshot.GangKey]engine.ReasonCode) *Report {
		r := &Report{Waiting: map[snapshot.GangKey]*engine.GangReason{}}
		for k, code := range reasons {
			r.Waiting[k] = &engine.GangReason{Gang: k, Code: code, Message: "m"}
		}
		return r
	}
	waiting := report(map[snapshot.GangKey]engine.ReasonCode{pg: engine.ReasonWaitingForPods})
	noFit := report(map[snapshot.GangKey]engine.ReasonCode{pg: engine.ReasonNoNodeFits})
	loneOnly := report(map[snapshot.GangKey]engine.ReasonCode{lone: engine.ReasonNoNodeFits})
	for _, tc := range []struct {
		name       string
		prev, next *Report
		want       bool
	}{
		{"first report with a waiting PodGroup", nil, waiting, true},
		{"a PodGroup starts waiting", report(nil), noFit, true},
		{"its code changes", waiting, noFit, true},
		{"same code again", noFit, noFit, false},
		{"the gang no longer waits", noFit, report(nil), false},
		{"a lone pod starts waiting", report(nil), loneOnly, false},
	} {
		if got := newReason(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: newReason = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A round writes every waiting pod although a new cycle's report comes after each write, as it
// does while the scheduler is busy: the round goes on from the newest report instead of ending.
// Until it did, a busy scheduler told a pod or two why they waited per round, and 400 waiting
// pods of KAI's pending-background scale spec were not all told within two minutes.
func TestWritePodsFollowsNewerReports(t *testing.T) {
	const pods = 50
	old := metav1.NewTime(time.Now().Add(-time.Minute))
	store := k8scache.NewSharedIndexInformer(&k8scache.ListWatch{}, &corev1.Pod{}, 0, k8scache.Indexers{})
	foreign := k8scache.NewSharedIndexInformer(&k8scache.ListWatch{}, &corev1.Pod{}, 0, k8scache.Indexers{})
	var objs []runtime.Object
	report := func() *Report {
		r := &Report{Waiting: map[snapshot.GangKey]*engine.GangReason{}, Pending: map[snapshot.GangKey][]types.NamespacedName{}}
		for i := range pods {
			k := snapshot.GangKey{Namespace: "ns", Name: fmt.Sprintf("p-%d", i)}
			r.Waiting[k] = &engine.GangReason{Gang: k, Code: engine.ReasonQueueLimit, Message: "queue q: gpu limit 0 would be exceeded"}
			r.Pending[k] = []types.NamespacedName{{Namespace: "ns", Name: k.Name}}
		}
		return r
	}
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p-%d", i), UID: types.UID(fmt.Sprint(i)), CreationTimestamp: old}}
		if err := store.GetStore().Add(p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	w := NewWriter(nil, cs, &cache.Informers{Pods: store, ForeignPods: foreign}, Options{})
	patched := map[string]int{}
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patched[a.(k8stesting.PatchAction).GetName()]++
		w.Publish(report()) // a cycle ends after every write
		return true, &corev1.Pod{}, nil
	})
	r := report()
	w.Publish(r)
	if n := w.writePods(t.Context(), r, metav1.Now()); n != pods {
		t.Errorf("one round wrote %d pods' conditions, want all %d", n, pods)
	}
	for name, times := range patched {
		if times != 1 {
			t.Errorf("pod %s was written %d times in one round, want once", name, times)
		}
	}
	if len(patched) != pods {
		t.Errorf("%d pods written, want %d", len(patched), pods)
	}
}
