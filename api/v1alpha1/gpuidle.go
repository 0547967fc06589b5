package v1alpha1

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// gpuIdleObservedPrefix starts the suffix GPUIdleMessage appends.
const gpuIdleObservedPrefix = " (observed "

// GPUIdleMessage is the message of a GPUIdleCondition: the agent's words, then the time it
// observed the transition to the microsecond, "GPU utilization 40% above 5% (observed
// 2025-01-02T15:04:05.123456Z)". The condition's lastTransitionTime holds the same time rounded
// down to the second; the scheduler times how fast a lent GPU goes back from the exact one.
func GPUIdleMessage(message string, observed time.Time) string {
	return message + gpuIdleObservedPrefix + observed.UTC().Format("2006-01-02T15:04:05.000000Z07:00") + ")"
}

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

// GPUIdleObserved returns when the gpu-agent observed the transition a GPUIdleCondition records:
// the time its message ends with (GPUIdleMessage), else its lastTransitionTime.
func GPUIdleObserved(c *corev1.PodCondition) time.Time {
	if c == nil {
		return time.Time{}
	}
	if i := strings.LastIndex(c.Message, gpuIdleObservedPrefix); i >= 0 && strings.HasSuffix(c.Message, ")") {
		if t, err := time.Parse(time.RFC3339Nano, c.Message[i+len(gpuIdleObservedPrefix):len(c.Message)-1]); err == nil {
			return t
		}
	}
	return c.LastTransitionTime.Time
}
