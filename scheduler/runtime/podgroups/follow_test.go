package podgroups

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// served is a Serving over queue -> namespaces.
type served map[string][]string

func (s served) Serves(queue, ns string) bool { return slices.Contains(s[queue], ns) }

func (s served) QueuesServing(ns string) []string {
	var out []string
	for q, nss := range s {
		if slices.Contains(nss, ns) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// TestFollow: ml moved from queue training to queue research. The gang's PodGroup (queue
// training, class fairway-training) follows once none of its pods runs, to the queue its newest
// pod names, else to the one queue serving ml; it stays while a pod still runs under training,
// while training still serves ml, and when it cannot tell which of several queues to take.
func TestFollow(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ml"},
		Spec: v1alpha1.PodGroupSpec{Queue: "training", PriorityClassName: "fairway-training", MinMember: 2}}
	moved := served{"training": {"other"}, "research": {"ml"}}
	pod := func(name, queue string, ago time.Duration) *testutil.PodWrapper {
		return testutil.MakePod("ml", name).Queue(queue).PodGroup("llm").Created(testutil.Epoch.Add(-ago))
	}
	withClass := func(p *corev1.Pod, class string) *corev1.Pod { p.Spec.PriorityClassName = class; return p }
	finished := pod("old-0", "training", time.Hour).Node("n1").Obj()
	finished.Status.Phase = corev1.PodSucceeded
	terminating := pod("old-1", "training", time.Hour).Node("n1").Obj()
	terminating.DeletionTimestamp = &metav1.Time{Time: testutil.Epoch}

	for name, tc := range map[string]struct {
		serving   served
		pods      []*corev1.Pod
		queue     string
		class     string
		wantMoved bool
	}{
		"recreated pods name the new queue": {serving: moved, wantMoved: true, queue: "research", class: "fairway-inference",
			pods: []*corev1.Pod{withClass(pod("new-0", "research", time.Minute).Obj(), "fairway-inference"), pod("old-0", "training", time.Hour).Obj()}},
		"no pod yet: the one queue serving the namespace, at once": {serving: moved, wantMoved: true, queue: "research", class: "fairway-training"},
		"pending pods of the old queue only": {serving: moved, wantMoved: true, queue: "research", class: "fairway-training",
			pods: []*corev1.Pod{pod("old-0", "training", time.Hour).Obj()}},
		"finished pods do not hold it": {serving: moved, wantMoved: true, queue: "research", class: "fairway-training",
			pods: []*corev1.Pod{finished}},
		"a pod still runs under the old queue": {serving: moved,
			pods: []*corev1.Pod{pod("new-0", "research", time.Minute).Obj(), pod("old-1", "training", time.Hour).Node("n1").Obj()}},
		"a terminating pod still runs": {serving: moved, pods: []*corev1.Pod{pod("new-0", "research", time.Minute).Obj(), terminating}},
		"the old queue still serves the namespace": {serving: served{"training": {"ml"}, "research": {"ml"}},
			pods: []*corev1.Pod{pod("new-0", "research", time.Minute).Obj()}},
		"several queues serve it, no pod names one": {serving: served{"research": {"ml"}, "inference": {"ml"}}},
		"several queues serve it, the newest pod names one": {serving: served{"research": {"ml"}, "inference": {"ml"}}, wantMoved: true,
			queue: "inference", pods: []*corev1.Pod{pod("new-1", "inference", time.Second).Obj(), pod("new-0", "research", time.Minute).Obj()}},
		"the old queue is deleted": {serving: served{"research": {"ml"}}, wantMoved: true, queue: "research", class: "fairway-training"},
		"no queue serves it":       {serving: served{"training": {"other"}}},
	} {
		t.Run(name, func(t *testing.T) {
			q, class, ok := Follow(pg, tc.pods, tc.serving)
			if ok != tc.wantMoved || q != tc.queue || class != tc.class {
				t.Errorf("Follow = %q, %q, %v; want %q, %q, %v", q, class, ok, tc.queue, tc.class, tc.wantMoved)
			}
		})
	}
}
