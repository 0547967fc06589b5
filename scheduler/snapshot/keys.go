package snapshot

import "github.com/fairway-sched/fairway/api/v1alpha1"

// Keys the scheduler runtime and the snapshot agree on beyond those of package v1alpha1.
const (
	// ReservationSlotAnnotation: see v1alpha1.ReservationSlotAnnotation.
	ReservationSlotAnnotation = v1alpha1.ReservationSlotAnnotation

	// SchedulingProblemAnnotation is set by the scheduler runtime on its own cached copy of a pod
	// (never on the API object) when it knows the pod cannot be placed whatever the cluster looks
	// like, for a reason the pod spec alone does not show (a PersistentVolumeClaim that is not
	// bound, for example). The value is the human-readable reason; the pod's gang is reported
	// with ReasonUnsupported and that message.
	SchedulingProblemAnnotation = "internal.fairway.dev/scheduling-problem"
)
