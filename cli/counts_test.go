package cli

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Counts read as sentences: "1 pod", "2 pods", never "1 pods"; a gang's minimum is shown as
// "(min N)" after what runs, and not at all for a single pod.
func TestCountSentences(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{runningCell(29, 25), "29 (min 25)"},
		{runningCell(0, 4), "0 (min 4)"},
		{runningCell(1, 1), "1"},
		{runningCell(0, 0), "0"},
		{runningText(29, 25), "29 pods running (min 25)"},
		{runningText(1, 1), "1 pod running"},
		{runningText(0, 1), "0 pods running"},
		{runningText(1, 2), "1 pod running (min 2)"},
		{describePlacement(PlacementView{Name: "w", Phase: "Running", Node: "n", GPUs: 1}), "w Running on n, 1 whole GPU"},
		{describePlacement(PlacementView{Name: "w", Phase: "Running", Node: "n", GPUs: 4}), "w Running on n, 4 whole GPUs"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// A gang's wait counts from the creation of its oldest waiting pod, also when the gang ran
// before (LastStartTime set) and its evicted pods wait again: not from its first start.
func TestGangWaitFromPodCreation(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	pod := func(name string, created time.Time, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created)},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	pg := func(phase fairwayv1.PodGroupPhase, started *time.Time, unsched bool) *fairwayv1.PodGroup {
		g := &fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)},
			Spec: fairwayv1.PodGroupSpec{MinMember: 2}, Status: fairwayv1.PodGroupStatus{Phase: phase}}
		if started != nil {
			g.Status.LastStartTime = &metav1.Time{Time: *started}
		}
		if unsched {
			g.Status.Conditions = []metav1.Condition{{Type: fairwayv1.PodGroupConditionUnschedulable, Status: metav1.ConditionTrue, Reason: "NoNodeFits"}}
		}
		return g
	}
	started := t0.Add(5 * time.Second)
	for _, tc := range []struct {
		name string
		pg   *fairwayv1.PodGroup
		pods []*corev1.Pod
		want int64
	}{
		{"pending, pods younger than the PodGroup", pg(fairwayv1.PodGroupPending, nil, false),
			[]*corev1.Pod{pod("a", now.Add(-29*time.Second), ""), pod("b", now.Add(-20*time.Second), "")}, 29},
		{"ran before, evicted pod recreated and waiting", pg(fairwayv1.PodGroupPending, &started, true),
			[]*corev1.Pod{pod("a", t0, "n"), pod("b", now.Add(-29*time.Second), "")}, 29},
		{"running, a pod beyond the minimum waits", pg(fairwayv1.PodGroupRunning, &started, true),
			[]*corev1.Pod{pod("a", t0, "n"), pod("b", t0, "n"), pod("c", now.Add(-10*time.Second), "")}, 10},
		{"pending without pods", pg(fairwayv1.PodGroupPending, nil, false), nil, 3600},
		{"running", pg(fairwayv1.PodGroupRunning, &started, false), []*corev1.Pod{pod("a", t0, "n"), pod("b", t0, "n")}, 5},
	} {
		j := podGroupJob(tc.pg, tc.pods, nil, now)
		if j.WaitSeconds == nil || *j.WaitSeconds != tc.want {
			t.Errorf("%s: wait %v, want %ds", tc.name, j.WaitSeconds, tc.want)
		}
	}

	// `why` on a waiting pod of a gang: its own wait, not the gang's.
	waiting := pod("b", now.Add(-29*time.Second), "")
	waiting.Spec.SchedulerName = fairwayv1.SchedulerName
	waiting.Annotations = map[string]string{fairwayv1.PodGroupAnnotation: "g"}
	old := pod("a", t0, "n")
	old.Annotations = waiting.Annotations
	v := BuildWhy(&WhySnapshot{Pod: waiting, PodGroup: pg(fairwayv1.PodGroupPending, &started, true), Pods: []corev1.Pod{*old, *waiting}}, now)
	if !v.Waiting || v.WaitSeconds == nil || *v.WaitSeconds != 29 {
		t.Errorf("why on a waiting pod: waiting %v, wait %v, want 29s", v.Waiting, v.WaitSeconds)
	}
}
