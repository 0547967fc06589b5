package status

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

func TestQueueStatus(t *testing.T) {
	st := &engine.QueueStatus{Name: "team-a", Allocated: engine.Amounts{"gpu": 2500, "memory": 1 << 30}, FairShare: engine.Amounts{"gpu": 4000},
		Requested: engine.Amounts{"gpu": 3500}, AllocatedNonPreemptible: engine.Amounts{}, Borrowed: engine.Amounts{"gpu": 500}, PendingPods: 2}
	got := QueueStatus(&v1alpha1.QueueStatus{}, st, nil, t0)
	if q := got.Allocated["gpu"]; q.Cmp(resource.MustParse("2.5")) != 0 || got.AllocatedNonPreemptible != nil || got.PendingPods != 2 {
		t.Errorf("status %+v", got)
	}
	if c := meta.FindStatusCondition(got.Conditions, QueueConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
	// The same accounting a minute later writes nothing: the status is equal.
	again := QueueStatus(&got, st, nil, t1)
	if !equality.Semantic.DeepEqual(got, again) {
		t.Errorf("unchanged accounting must give an equal status:\n%+v\n%+v", got, again)
	}
	// Not ready: the condition flips, with the engine's reason, and its time moves.
	nr := *st
	nr.NotReadyReason, nr.NotReady = v1alpha1.QueueParentMissing, "parent queue dept does not exist"
	bad := QueueStatus(&got, &nr, []string{"child"}, t1)
	c := meta.FindStatusCondition(bad.Conditions, QueueConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != string(v1alpha1.QueueParentMissing) || c.Message != nr.NotReady ||
		!c.LastTransitionTime.Equal(&t1) || len(bad.ChildQueues) != 1 {
		t.Errorf("not ready: %+v children %v", c, bad.ChildQueues)
	}
}

func pod(node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

func TestPodGroupStatus(t *testing.T) {
	waiting := &engine.GangReason{Code: engine.ReasonNoNodeFits, Message: "the gang needs 4 pods placed together and they do not all fit (2 placed before one failed)"}
	cases := map[string]struct {
		pods      []*corev1.Pod
		reason    *engine.GangReason
		phase     v1alpha1.PodGroupPhase
		scheduled bool
	}{
		"pending":   {[]*corev1.Pod{pod("", corev1.PodPending), pod("", corev1.PodPending)}, waiting, v1alpha1.PodGroupPending, false},
		"scheduled": {[]*corev1.Pod{pod("n1", corev1.PodPending), pod("n1", corev1.PodPending)}, nil, v1alpha1.PodGroupScheduled, true},
		"running":   {[]*corev1.Pod{pod("n1", corev1.PodRunning), pod("n2", corev1.PodRunning)}, nil, v1alpha1.PodGroupRunning, true},
		"succeeded": {[]*corev1.Pod{pod("n1", corev1.PodSucceeded), pod("n2", corev1.PodSucceeded)}, nil, v1alpha1.PodGroupSucceeded, true},
		"failed":    {[]*corev1.Pod{pod("n1", corev1.PodFailed), pod("n2", corev1.PodRunning)}, nil, v1alpha1.PodGroupFailed, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := PodGroupStatus(&v1alpha1.PodGroupStatus{}, 2, tc.pods, tc.reason, t0)
			if got.Phase != tc.phase {
				t.Errorf("phase %s, want %s", got.Phase, tc.phase)
			}
			u := meta.FindStatusCondition(got.Conditions, v1alpha1.PodGroupConditionUnschedulable)
			if (tc.reason != nil) != (u.Status == metav1.ConditionTrue) || (tc.reason != nil && (u.Reason != "NoNodeFits" || u.Message != tc.reason.Message)) {
				t.Errorf("Unschedulable %+v", u)
			}
			if s := meta.FindStatusCondition(got.Conditions, v1alpha1.PodGroupConditionScheduled); (s.Status == metav1.ConditionTrue) != tc.scheduled {
				t.Errorf("Scheduled %+v", s)
			}
			if (got.Phase == v1alpha1.PodGroupRunning) != (got.LastStartTime != nil) {
				t.Errorf("lastStartTime %v in phase %s", got.LastStartTime, got.Phase)
			}
		})
	}
	// Running stays Running: the start time is kept, nothing changes.
	running := []*corev1.Pod{pod("n1", corev1.PodRunning), pod("n2", corev1.PodRunning)}
	first := PodGroupStatus(&v1alpha1.PodGroupStatus{}, 2, running, nil, t0)
	later := PodGroupStatus(&first, 2, running, nil, t1)
	if !equality.Semantic.DeepEqual(first, later) {
		t.Errorf("unchanged gang must give an equal status:\n%+v\n%+v", first, later)
	}
}

func TestPodConditionDiffers(t *testing.T) {
	r := &engine.GangReason{Code: engine.ReasonQueueLimit, Message: "queue a is at its limit of 4 gpu"}
	c := PodUnschedulable(r, t0)
	p := pod("", corev1.PodPending)
	if !PodConditionDiffers(p, c) {
		t.Error("a pod without the condition differs")
	}
	p.Status.Conditions = []corev1.PodCondition{c}
	p.Status.Conditions[0].LastTransitionTime = t1
	if PodConditionDiffers(p, c) {
		t.Error("the same condition at another time does not differ")
	}
	if c.Message != "QueueLimit: queue a is at its limit of 4 gpu" || c.Reason != corev1.PodReasonUnschedulable {
		t.Errorf("condition %+v", c)
	}
}

// The Scheduled condition's message counts pods as a sentence: "1 pod", never "1 pods".
func TestPodGroupScheduledMessageCounts(t *testing.T) {
	pod := func(node string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	for _, tc := range []struct {
		min  int32
		pods []*corev1.Pod
		want string
	}{
		{1, []*corev1.Pod{pod("")}, "0 pods bound, of the gang's minimum of 1"},
		{4, []*corev1.Pod{pod("n"), pod("")}, "1 pod bound, of the gang's minimum of 4"},
		{1, []*corev1.Pod{pod("n")}, "the gang was placed whole (minimum 1 pod)"},
		{2, []*corev1.Pod{pod("n"), pod("n")}, "the gang was placed whole (minimum 2 pods)"},
	} {
		got := PodGroupStatus(&v1alpha1.PodGroupStatus{}, tc.min, tc.pods, nil, t0)
		if c := meta.FindStatusCondition(got.Conditions, v1alpha1.PodGroupConditionScheduled); c == nil || c.Message != tc.want {
			t.Errorf("minimum %d, %d pods: Scheduled %+v, want message %q", tc.min, len(tc.pods), c, tc.want)
		}
	}
}
