package v1alpha1

import (
	"strings"
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

func TestGPUSwapRoundTrip(t *testing.T) {
	for _, s := range []GPUSwap{
		{State: GPUSwapEligible, Bytes: 40 << 30},
		{State: GPUSwapIneligible, Reason: "an MPS client"},
		{State: GPUSwappedOut, Bytes: 3<<20 + 5, SwapInMillis: 1200, PIDs: []int{4242, 4243}},
		{State: GPUSwapRestoreFailed, Bytes: 1 << 20, Reason: "CUDA_ERROR_OUT_OF_MEMORY", PIDs: []int{7}},
	} {
		got, ok, err := GPUSwapOf(map[string]string{GPUSwapAnnotation: FormatGPUSwap(s)})
		if err != nil || !ok || !got.Equal(s) {
			t.Errorf("GPUSwapOf(FormatGPUSwap(%+v)) = %+v, %v, %v", s, got, ok, err)
		}
	}
	if got := (GPUSwap{State: GPUSwappedOut, Bytes: 3<<20 + 5}).SwappedMiB(); got != 3 {
		t.Errorf("SwappedMiB = %d, want the whole MiB moved, 3", got)
	}
	if got := (GPUSwap{State: GPUSwapEligible, Bytes: 3 << 20}).SwappedMiB(); got != 0 {
		t.Errorf("SwappedMiB of an eligible pod = %d, want 0: nothing moved yet", got)
	}
	for v, want := range map[string]string{
		`{"state":"Gone"}`:                         `state "Gone" must be one of`,
		`{"state":"SwappedOut","bytes":-1}`:        "bytes -1 must not be negative",
		`{"state":"SwappedOut","swapInMillis":-2}`: "swapInMillis -2 must not be negative",
		`{"state":"SwappedOut","pids":[12,0]}`:     "pids: 0 is not a process ID",
		`swapped`:                                  "annotation fairway.dev/gpu-swap",
	} {
		if _, ok, err := GPUSwapOf(map[string]string{GPUSwapAnnotation: v}); !ok || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("GPUSwapOf(%s) = %v, %v; want an error with %q", v, ok, err, want)
		}
	}
	if _, ok, err := GPUSwapOf(nil); ok || err != nil {
		t.Errorf("GPUSwapOf(nil) = %v, %v", ok, err)
	}
}

func TestGPUSwapRequested(t *testing.T) {
	idleAt := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	pod := func(status corev1.ConditionStatus, request string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: GPUIdleCondition, Status: status, LastTransitionTime: metav1.NewTime(idleAt.Truncate(time.Second))}}}}
		p.Annotations = map[string]string{GPUIdleObservedAnnotation: FormatGPUIdleObserved(idleAt)}
		if request != "" {
			p.Annotations[GPUSwapRequestAnnotation] = request
		}
		return p
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"this idle period":       {pod(corev1.ConditionTrue, FormatGPUSwapRequest(idleAt)), true},
		"no request":             {pod(corev1.ConditionTrue, ""), false},
		"an earlier idle period": {pod(corev1.ConditionTrue, FormatGPUSwapRequest(idleAt.Add(-time.Hour))), false},
		"awake":                  {pod(corev1.ConditionFalse, FormatGPUSwapRequest(idleAt)), false},
		"malformed":              {pod(corev1.ConditionTrue, "now"), false},
		"no condition":           {&corev1.Pod{}, false},
	} {
		if got := GPUSwapRequested(tc.pod); got != tc.want {
			t.Errorf("%s: GPUSwapRequested = %v, want %v", name, got, tc.want)
		}
	}
}
