package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

func writeAll(t *testing.T, w *usage.ConditionWriter) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pods still wait for a write", w.Pending())
		}
		time.Sleep(time.Millisecond)
	}
}

// The writer annotates the pod (observation time, resident memory when it turns idle), then
// sets GPUIdle, leaving the kubelet's conditions alone; only the latest of several transitions
// asked for before it ran is written; a pod that is gone ends its writes.
func TestConditionWriter(t *testing.T) {
	nb := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb", UID: "uid-nb"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	c := fake.NewClientBuilder().WithObjects(nb).WithStatusSubresource(&corev1.Pod{}).Build()
	w := usage.NewConditionWriter(c, testr.New(t))
	at := time.Date(2026, 3, 1, 8, 0, 0, 123456000, time.UTC)
	w.Set(nb, usage.Transition{Idle: false, Reason: "GPUUtilization", At: at.Add(-time.Minute)})
	w.Set(nb, usage.Transition{Idle: true, Reason: "GPUIdle", Message: "quiet for 5m", At: at, IdleMemoryMiB: 1024, IdleMemoryKnown: true})
	w.Set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gone", UID: "uid-gone"}}, usage.Transition{Idle: true, At: at})
	if w.Pending() != 2 {
		t.Fatalf("Pending = %d before Start, want 2", w.Pending())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	writeAll(t, w)

	var p corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(nb), &p); err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "1024" {
		t.Errorf("idle memory annotation = %q, want 1024", got)
	}
	if got := fairwayv1alpha1.GPUIdleObserved(&p); !got.Equal(at) {
		t.Errorf("observed = %v, want %v to the microsecond", got, at)
	}
	cond := fairwayv1alpha1.GPUIdleConditionOf(&p)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "GPUIdle" || cond.Message != "quiet for 5m" {
		t.Errorf("GPUIdle = %+v, want True GPUIdle", cond)
	}
	if len(p.Status.Conditions) != 2 {
		t.Errorf("conditions = %+v, want Ready kept beside GPUIdle", p.Status.Conditions)
	}

	w.Set(&p, usage.Transition{Idle: false, Reason: "GPUNewProcess", At: at.Add(time.Second)})
	writeAll(t, w)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(nb), &p); err != nil {
		t.Fatal(err)
	}
	if cond := fairwayv1alpha1.GPUIdleConditionOf(&p); cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "GPUNewProcess" {
		t.Errorf("GPUIdle = %+v, want False GPUNewProcess", cond)
	}
}
