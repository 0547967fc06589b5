package v1alpha1

import corev1 "k8s.io/api/core/v1"

// IsInteractive reports whether pod is interactive work: a notebook, or any non-preemptible
// pod other than an inference replica, never a reservation. The gpu-agent tracks the idleness of
// exactly these pods (GPUIdleCondition) and the scheduler lends only their idle GPUs, so both
// read this one rule. Inference replicas are left out: an idle replica is its autoscaler's to
// remove (scale-down frees its GPU at once), and a loan's return would add seconds to the first
// request after a quiet spell. A nil pod is not interactive.
func IsInteractive(pod *corev1.Pod) bool {
	if pod == nil || pod.Labels[ReservationLabel] == "true" {
		return false
	}
	switch WorkloadKind(pod.Annotations[WorkloadKindAnnotation]) {
	case KindNotebook:
		return true
	case KindInference:
		return false
	}
	switch Preemptibility(pod.Labels[PreemptibilityLabel]) {
	case NonPreemptible:
		return true
	case Preemptible:
		return false
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= NonPreemptiblePriority
}
