package v1alpha1

import corev1 "k8s.io/api/core/v1"

// IsInteractive reports whether pod is interactive work: a notebook, or any non-preemptible
// pod, never a reservation. The gpu-agent tracks the idleness of exactly these pods
// (GPUIdleCondition) and the scheduler lends only their idle GPUs, so both read this one rule.
// A nil pod is not interactive.
func IsInteractive(pod *corev1.Pod) bool {
	if pod == nil || pod.Labels[ReservationLabel] == "true" {
		return false
	}
	if WorkloadKind(pod.Annotations[WorkloadKindAnnotation]) == KindNotebook {
		return true
	}
	switch Preemptibility(pod.Labels[PreemptibilityLabel]) {
	case NonPreemptible:
		return true
	case Preemptible:
		return false
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= NonPreemptiblePriority
}
