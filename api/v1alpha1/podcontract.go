package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
		GPUSwapAnnotation, GPUSwapRequestAnnotation,
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

// One reader and one writer per key of the contract that carries a value to parse, so that the
// webhook, the snapshot, the runtime, the agent, the CLI and the simulator read a pod alike
// (a fuzz test round-trips them).

// MinMemberOf reads MinMemberAnnotation: the gang's minimum the webhook wrote, whether it is
// there, and an error naming the annotation when it is not a positive integer.
func MinMemberOf(annotations map[string]string) (int32, bool, error) {
	v, ok := annotations[MinMemberAnnotation]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 1 {
		return 0, true, fmt.Errorf("annotation %s %q must be a positive integer", MinMemberAnnotation, v)
	}
	return int32(n), true, nil
}

// SetMinMember writes MinMemberAnnotation.
func SetMinMember(annotations map[string]string, n int32) {
	annotations[MinMemberAnnotation] = strconv.Itoa(int(n))
}

// PreemptibilityOf reads PreemptibilityLabel: "" when unset, an error naming the label and what
// it allows when it is neither value.
func PreemptibilityOf(labels map[string]string) (Preemptibility, error) {
	v, ok := labels[PreemptibilityLabel]
	if !ok {
		return "", nil
	}
	switch p := Preemptibility(v); p {
	case Preemptible, NonPreemptible:
		return p, nil
	}
	return "", fmt.Errorf("label %s %q must be %q or %q", PreemptibilityLabel, v, Preemptible, NonPreemptible)
}

// PodBinding is what fairway records on a pod it placed on a shared GPU, and on a reservation
// pod: the binding keys that carry values. Only fairway's identities write them (the chart's
// admission policy fairway-owned-pod-keys).
// +kubebuilder:object:generate=false
type PodBinding struct {
	// GPUIndexes is GPUIndexAnnotation: the slot a fractional pod shares (the scheduler's
	// numbering), or for a reservation pod the GPU the kubelet gave it (the agent's); several,
	// comma-separated, for the simulator's whole-GPU pods.
	GPUIndexes []int
	// GPUUUID is GPUUUIDAnnotation, once the agent has reported the GPU.
	GPUUUID string
	// Slot is ReservationSlotAnnotation, the slot a reservation pod holds; -1 when unset.
	Slot int
	// Group is GPUGroupLabel: the reservation a fractional pod shares a GPU through.
	Group string
	// Loan is LoanAnnotation: the pod runs on a GPU an idle interactive pod lent.
	Loan bool
}

// PodBindingOf reads a pod's binding keys. Malformed values are left out (an index that is not
// a non-negative integer, a slot that is not one), each named in the error, so that a reader
// that must go on (the snapshot) keeps what it could read.
func PodBindingOf(labels, annotations map[string]string) (PodBinding, error) {
	b := PodBinding{Slot: -1, GPUUUID: annotations[GPUUUIDAnnotation], Group: labels[GPUGroupLabel], Loan: annotations[LoanAnnotation] == "true"}
	var errs []error
	if v := annotations[GPUIndexAnnotation]; v != "" {
		for f := range strings.SplitSeq(v, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 {
				errs = append(errs, fmt.Errorf("annotation %s %q: GPU indexes are non-negative integers separated by commas", GPUIndexAnnotation, v))
				continue
			}
			b.GPUIndexes = append(b.GPUIndexes, i)
		}
	}
	if v, ok := annotations[ReservationSlotAnnotation]; ok {
		if i, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && i >= 0 {
			b.Slot = i
		} else {
			errs = append(errs, fmt.Errorf("annotation %s %q must be a non-negative integer", ReservationSlotAnnotation, v))
		}
	}
	return b, errors.Join(errs...)
}

// Annotations and Labels are the binding keys b sets (a merge patch's values), the writer of
// PodBindingOf's reading: unset fields are left out.
func (b PodBinding) Annotations() map[string]string {
	out := map[string]string{}
	if len(b.GPUIndexes) > 0 {
		s := make([]string, len(b.GPUIndexes))
		for i, x := range b.GPUIndexes {
			s[i] = strconv.Itoa(x)
		}
		out[GPUIndexAnnotation] = strings.Join(s, ",")
	}
	if b.GPUUUID != "" {
		out[GPUUUIDAnnotation] = b.GPUUUID
	}
	if b.Slot >= 0 {
		out[ReservationSlotAnnotation] = strconv.Itoa(b.Slot)
	}
	if b.Loan {
		out[LoanAnnotation] = "true"
	}
	return out
}

// Labels: see Annotations.
func (b PodBinding) Labels() map[string]string {
	out := map[string]string{}
	if b.Group != "" {
		out[GPUGroupLabel] = b.Group
	}
	return out
}
