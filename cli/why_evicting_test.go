package cli_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// `fairway why` on a pod being evicted says so, and says when the pod will not come back
// (v1alpha1.PodRecreatable), which it reads from the pod, not from the eviction's message.
func TestWhyEvictingPod(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	yes := true
	pod := func(owners []metav1.OwnerReference, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-b", OwnerReferences: owners, Annotations: ann,
				Labels: map[string]string{fairwayv1.QueueLabel: "team-b"}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, NodeName: "h100-0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "FairwayReclaim",
				Message: "Reclaimed by team-a/big: reclaimed for gang team-a/big",
			}}},
		}
	}
	rs := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train-7d9f", Controller: &yes}}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		lost     bool
		contains string
	}{
		{name: "bare pod", pod: pod(nil, nil), lost: true, contains: "being evicted (FairwayReclaim) and will not come back"},
		{name: "ReplicaSet pod", pod: pod(rs, nil), contains: "being evicted (FairwayReclaim)"},
		{name: "Ray head", pod: pod(nil, map[string]string{fairwayv1.RecreatableAnnotation: "false"}), lost: true, contains: "will not come back"},
	}
	for _, c := range cases {
		v := cli.BuildWhy(&cli.WhySnapshot{Pod: c.pod, Pods: []corev1.Pod{*c.pod}}, now)
		if len(v.Pods) != 1 || v.Pods[0].Evicting != "FairwayReclaim" || v.Pods[0].NotRecreated != c.lost {
			t.Errorf("%s: placements %+v, want one evicting (FairwayReclaim) with NotRecreated %v", c.name, v.Pods, c.lost)
			continue
		}
		var b strings.Builder
		if err := cli.PrintWhy(&b, v); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.Contains(out, c.contains) || (!c.lost && strings.Contains(out, "will not come back")) {
			t.Errorf("%s: output\n%s\nwant it to contain %q (and \"will not come back\" only for a lost pod)", c.name, out, c.contains)
		}
	}
}
