package snapshot

import "github.com/fairway-sched/fairway/api/v1alpha1"

// Keys the scheduler runtime and the snapshot agree on beyond those of package v1alpha1.
const (
	// ReservationSlotAnnotation is written by the scheduler runtime on a reservation pod: the
	// index of the GPU slot (as the engine numbers a node's GPUs) whose fractional pods the
	// reservation holds a GPU for. It differs from fairway.dev/gpu-index, which the gpu-agent
	// writes on the same pod with the index of the physical GPU the kubelet gave it.
	ReservationSlotAnnotation = v1alpha1.Prefix + "gpu-slot"

	// SchedulingProblemAnnotation is set by the scheduler runtime on its own cached copy of a pod
	// (never on the API object) when it knows the pod cannot be placed whatever the cluster looks
	// like, for a reason the pod spec alone does not show (a PersistentVolumeClaim that is not
	// bound, for example). The value is the human-readable reason; the pod's gang is reported
	// with ReasonUnsupported and that message.
	SchedulingProblemAnnotation = "internal.fairway.dev/scheduling-problem"
)
