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

	// VolumeProblemAnnotation is set by the scheduler runtime on its own cached copy of a pending
	// pod (never on the API object) when one of its PersistentVolumeClaims cannot be used now: it
	// does not exist, waits for its volume, or can never be satisfied. The value is the
	// human-readable reason naming the claim; the pod's gang is reported with ReasonVolume.
	VolumeProblemAnnotation = "internal.fairway.dev/volume-problem"
)
