package v1alpha1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The pod contract: who may write each of fairway's pod keys. A key fairway trusts to account
// or place a pod is written only by fairway's own identities; the chart's
// ValidatingAdmissionPolicy fairway-owned-pod-keys refuses anyone else's change, in the API
// server, whoever the user is (docs/isolation.md, "Keys a tenant cannot write").
//
//   - User keys (the documented knobs and their Run:ai/KAI aliases) are set by the pod's author
//     at creation. Those that decide the pod's queue, gang, preemptibility or GPU share
//     (ImmutablePodLabels, ImmutablePodAnnotations) do not change after admission.
//   - Admission keys are what the webhook decides (AdmissionPodLabels, AdmissionPodAnnotations):
//     the webhook overwrites whatever the author wrote, and nobody changes them afterwards.
//   - Binding keys are what the scheduler and the gpu-agent decide at and after binding
//     (BindingPodLabels, BindingPodAnnotations): nobody else sets them, at creation or later.
//     A tenant who could write them could put its share on a GPU another team holds (gpu-index),
//     take its pod out of its queue's usage (loan), or pass a pod asking for eight GPUs off as a
//     reservation that is charged nothing.
var (
	AdmissionPodLabels      = []string{ManagedLabel, FrameworkLabel}
	AdmissionPodAnnotations = []string{
		PodGroupAnnotation, MinMemberAnnotation, SubGroupAnnotation, SubGroupsAnnotation,
		WorkloadKindAnnotation, RecreatableAnnotation,
		// The webhook names the ConfigMap a fractional pod's container reads its GPU from.
		GPUConfigMapAnnotation,
		// The webhook's seal on what it admitted.
		AdmittedAnnotation,
	}
	BindingPodLabels      = []string{ReservationLabel, GPUGroupLabel}
	BindingPodAnnotations = []string{
		GPUIndexAnnotation, GPUUUIDAnnotation, ReservationSlotAnnotation, LoanAnnotation, IdleGPUMemoryAnnotation, GPUIdleObservedAnnotation,
	}
)

// PodKeyClass says who may write a pod key.
type PodKeyClass string

const (
	// ClassUser is set by the pod's author.
	ClassUser PodKeyClass = "user"
	// ClassAdmission is written by fairway's webhook at admission.
	ClassAdmission PodKeyClass = "admission"
	// ClassBinding is written by fairway's scheduler or gpu-agent at or after binding.
	ClassBinding PodKeyClass = "binding"
)

// ClassOfPodLabel and ClassOfPodAnnotation classify a key of PodLabelKeys, PodAnnotationKeys or
// their aliases; "" for a key fairway does not read on pods.
func ClassOfPodLabel(key string) PodKeyClass {
	return classOf(key, PodLabelKeys, AliasLabelKeys, AdmissionPodLabels, BindingPodLabels)
}

// ClassOfPodAnnotation: see ClassOfPodLabel.
func ClassOfPodAnnotation(key string) PodKeyClass {
	return classOf(key, PodAnnotationKeys, AliasAnnotationKeys, AdmissionPodAnnotations, BindingPodAnnotations)
}

func classOf(key string, known, aliases, admission, binding []string) PodKeyClass {
	switch {
	case slices.Contains(admission, key):
		return ClassAdmission
	case slices.Contains(binding, key):
		return ClassBinding
	case slices.Contains(known, key) || slices.Contains(aliases, key):
		return ClassUser
	}
	return ""
}

// IsReservationPod reports whether pod is one of the scheduler's reservation pods, which hold a
// shared GPU for the kubelet and are charged to no queue. Only pods of fairway's own namespace
// (fairwayNamespace) count: tenants cannot create pods there, and the chart's admission policy
// lets only the scheduler create a pod with ReservationLabel at all. A pod elsewhere that carries
// the label is an ordinary pod, charged for what it asks.
func IsReservationPod(pod *corev1.Pod, fairwayNamespace string) bool {
	return pod != nil && pod.Namespace == fairwayNamespace && fairwayNamespace != "" && pod.Labels[ReservationLabel] == "true"
}
