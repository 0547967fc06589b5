package cli

import (
	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// The functions below export, for fairway's web console (package console/view), the pieces of
// `fairway why`'s explanation that it shows outside the Why page: a list of waiting workloads
// says why each waits and what would unblock it in the same words as the CLI, from the same
// code, without building a WhySnapshot for every row.

// Hint is what would unblock work waiting for the scheduler's reason code: the "To unblock"
// line of `fairway why`; "" for no code.
func Hint(code string) string { return hintFor(code) }

// WaitReason is the scheduler's reason code and message for waiting work, as `fairway why`
// reads them: the PodGroup's Unschedulable condition when pg has one, else the pod's
// PodScheduled condition. Either argument may be nil.
func WaitReason(pg *fairwayv1.PodGroup, pod *corev1.Pod) (code, message string) {
	if pg != nil {
		if c := unschedulable(pg); c != nil {
			return c.Reason, c.Message
		}
	}
	if pod != nil {
		return podReason(pod)
	}
	return "", ""
}

// BorrowHint is added to the hint of a waiting pod that asked to borrow idle GPUs for its
// share ("" for any other pod), as `fairway why` adds it.
func BorrowHint(p *corev1.Pod) string {
	if asksToBorrow(p) {
		return borrowHint
	}
	return ""
}

// IsFairwayPod reports whether fairway schedules the pod and it is not one of fairway's own GPU
// reservation pods.
func IsFairwayPod(p *corev1.Pod) bool { return isFairwayPod(p) }

// GPUSummary is what pods hold or ask of GPUs as the CLI prints it ("8", "3×0.25", "2+4×0.5",
// "-" for none) and as an amount in GPUs (shares by memory count 0).
func GPUSummary(pods []*corev1.Pod) (string, float64) { return gpuSummary(pods) }

// Terminated reports whether the pod has ended (Succeeded or Failed).
func Terminated(p *corev1.Pod) bool { return terminated(p) }
