package status

import (
	"fmt"
	"slices"
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

// waitingPods is a writer over n lone pods that waited a minute, their reports, and the pods'
// names written (the count of PATCHes per pod); each PATCH calls after(name).
type waitingPods struct {
	w       *Writer
	pods    []*corev1.Pod
	patched map[string]int
	after   func(name string)
}

func newWaitingPods(t *testing.T, n int, opts Options) *waitingPods {
	t.Helper()
	old := metav1.NewTime(time.Now().Add(-time.Minute))
	store := k8scache.NewSharedIndexInformer(&k8scache.ListWatch{}, &corev1.Pod{}, 0, k8scache.Indexers{})
	foreign := k8scache.NewSharedIndexInformer(&k8scache.ListWatch{}, &corev1.Pod{}, 0, k8scache.Indexers{})
	wp := &waitingPods{patched: map[string]int{}, after: func(string) {}}
	var objs []runtime.Object
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p-%d", i), UID: types.UID(fmt.Sprint(i)), CreationTimestamp: old}}
		wp.pods = append(wp.pods, p)
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	wp.w = NewWriter(nil, cs, &cache.Informers{Pods: store, ForeignPods: foreign}, opts)
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		wp.patched[name]++
		wp.after(name)
		return true, &corev1.Pod{}, nil
	})
	for _, p := range wp.pods {
		if err := store.GetStore().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return wp
}

// report says every pod but those in drop waits with code QueueLimit.
func (wp *waitingPods) report(drop ...string) *Report {
	r := &Report{Waiting: map[snapshot.GangKey]*engine.GangReason{}, Pending: map[snapshot.GangKey][]types.NamespacedName{}}
	for _, p := range wp.pods {
		if slices.Contains(drop, p.Name) {
			continue
		}
		k := snapshot.GangKey{Namespace: p.Namespace, Name: p.Name}
		r.Waiting[k] = &engine.GangReason{Gang: k, Code: engine.ReasonQueueLimit, Message: "queue q: gpu limit 0 would be exceeded"}
		r.Pending[k] = []types.NamespacedName{{Namespace: p.Namespace, Name: p.Name}}
	}
	return r
}

// A round writes every waiting pod although a new cycle's report comes after each write, as it
// does while the scheduler is busy. Until it did, a busy scheduler told a pod or two why they
// waited per round, and 400 waiting pods of KAI's pending-background scale spec were not all
// told within two minutes.
func TestWritePodsFollowsNewerReports(t *testing.T) {
	const pods = 50
	wp := newWaitingPods(t, pods, Options{})
	wp.after = func(string) { wp.w.Publish(wp.report()) } // a cycle ends after every write
	r := wp.report()
	wp.w.Publish(r)
	if n := wp.w.writePods(t.Context(), r, metav1.Now()); n != pods {
		t.Errorf("one round wrote %d pods' conditions, want all %d", n, pods)
	}
	for name, times := range wp.patched {
		if times != 1 {
			t.Errorf("pod %s was written %d times in one round, want once", name, times)
		}
	}
	if len(wp.patched) != pods {
		t.Errorf("%d pods written, want %d", len(wp.patched), pods)
	}
}

// A pod a newer cycle no longer says waits (it may have bound it) is not written: a condition
// written after its binding would say it waits.
func TestWritePodsSkipsPodsNoLongerWaiting(t *testing.T) {
	wp := newWaitingPods(t, 10, Options{})
	// p-9 was told another message already: it is written last, after the newer report.
	wp.pods[9].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "QueueLimit: an older message"}}
	wp.after = func(string) { wp.w.Publish(wp.report("p-9")) }
	r := wp.report()
	wp.w.Publish(r)
	if n := wp.w.writePods(t.Context(), r, metav1.Now()); n != 9 {
		t.Errorf("one round wrote %d pods' conditions, want 9", n)
	}
	if wp.patched["p-9"] != 0 {
		t.Error("p-9 was written after a newer report said it no longer waits")
	}
}

// A round with a budget smaller than the pods to write tells the pods fairway has not told why
// first: a tenant's many waiting pods whose messages change cannot keep another team's new pod
// from its reason.
func TestWritePodsTellsNewPodsFirst(t *testing.T) {
	const pods, budget = 300, 10
	wp := newWaitingPods(t, pods, Options{MaxPodWrites: budget})
	for _, p := range wp.pods[1:] {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "QueueLimit: an older message"}}
	}
	wp.pods[1].Status.Conditions[0].Message = "NoNodeFits: another code"
	r := wp.report()
	wp.w.Publish(r)
	if n := wp.w.writePods(t.Context(), r, metav1.Now()); n != budget {
		t.Errorf("one round wrote %d pods' conditions, want the budget, %d", n, budget)
	}
	if wp.patched["p-0"] != 1 {
		t.Error("p-0, never told why it waits, was not written in the first round")
	}
	if wp.patched["p-1"] != 1 {
		t.Error("p-1, told another code, was not written before pods told another message")
	}
}
