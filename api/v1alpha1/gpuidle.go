package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GPUIdleObservedFormat is the format of GPUIdleObservedAnnotation: RFC 3339 with the fraction
// of a second, in UTC.
const GPUIdleObservedFormat = time.RFC3339Nano

// FormatGPUIdleObserved is the value of GPUIdleObservedAnnotation for a transition the
// gpu-agent observed at t.
func FormatGPUIdleObserved(t time.Time) string { return t.UTC().Format(GPUIdleObservedFormat) }

// GPUIdleConditionOf returns the pod's GPUIdleCondition, or nil. The gpu-agent writes it, the
// scheduler lends and returns GPUs by it.
func GPUIdleConditionOf(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == GPUIdleCondition {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// GPUIdleObserved returns when the gpu-agent observed the transition the pod's GPUIdleCondition
// records (zero without the condition): the time of GPUIdleObservedAnnotation when it is the
// same second as the condition's lastTransitionTime, else lastTransitionTime itself, which
// keeps only seconds. The agent writes the annotation just before the condition, so an
// annotation of a newer transition than the condition's (its condition not written yet, or
// failed) is told apart by the second and ignored.
func GPUIdleObserved(pod *corev1.Pod) time.Time {
	c := GPUIdleConditionOf(pod)
	if c == nil {
		return time.Time{}
	}
	ltt := c.LastTransitionTime.Time
	if v, ok := pod.Annotations[GPUIdleObservedAnnotation]; ok {
		if t, err := time.Parse(GPUIdleObservedFormat, v); err == nil && t.Truncate(time.Second).Equal(ltt.Truncate(time.Second)) {
			return t
		}
	}
	return ltt
}
