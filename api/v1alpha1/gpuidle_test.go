package v1alpha1

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGPUIdleObserved(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	pod := func(ltt time.Time, observed string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: GPUIdleCondition, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(ltt)}}}}
		if observed != "" {
			p.Annotations = map[string]string{GPUIdleObservedAnnotation: observed}
		}
		return p
	}
	if got := FormatGPUIdleObserved(at.In(time.FixedZone("x", 3600))); got != "2026-01-02T03:04:05.123456Z" {
		t.Errorf("FormatGPUIdleObserved = %q", got)
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want time.Time
	}{
		"no condition":   {&corev1.Pod{}, time.Time{}},
		"annotation":     {pod(at.Truncate(time.Second), FormatGPUIdleObserved(at)), at},
		"no annotation":  {pod(at.Truncate(time.Second), ""), at.Truncate(time.Second)},
		"malformed":      {pod(at.Truncate(time.Second), "yesterday"), at.Truncate(time.Second)},
		"not RFC 3339":   {pod(at.Truncate(time.Second), at.Format(time.RFC1123)), at.Truncate(time.Second)},
		"newer than ltt": {pod(at.Add(-3*time.Second).Truncate(time.Second), FormatGPUIdleObserved(at)), at.Add(-3 * time.Second).Truncate(time.Second)},
		"exact ltt":      {pod(at, FormatGPUIdleObserved(at)), at},
	} {
		if got := GPUIdleObserved(tc.pod); !got.Equal(tc.want) {
			t.Errorf("%s: GPUIdleObserved = %s, want %s", name, got, tc.want)
		}
	}
}
