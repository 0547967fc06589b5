package usage

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// The status keeps resource-hours: GPU-hours and core-hours with milli precision (the engine's
// milli-GPU and milli-CPU seconds over 3600), memory in byte-hours.

// ToStatus is t as a Queue's status.usage.
func ToStatus(t Totals, halfLife time.Duration) *v1alpha1.QueueUsage {
	return &v1alpha1.QueueUsage{
		HalfLife:     metav1.Duration{Duration: halfLife},
		Used:         hours(t.Used),
		OverQuota:    hours(t.OverQuota),
		Capacity:     hours(t.Capacity),
		ObservedTime: metav1.NewTime(t.At.Truncate(time.Second)),
	}
}

func hours(v [snapshot.NumBaseDims]float64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for d, name := range dims {
		h := int64(math.Round(v[d] / 3600))
		if h <= 0 {
			continue
		}
		if d == snapshot.DimMemory {
			out[corev1.ResourceName(name)] = *resource.NewQuantity(h, resource.DecimalSI)
		} else {
			out[corev1.ResourceName(name)] = *resource.NewMilliQuantity(h, resource.DecimalSI)
		}
	}
	return out
}

// FromStatus reads a Queue's status.usage; false when there is none.
func FromStatus(u *v1alpha1.QueueUsage) (Totals, bool) {
	if u == nil || u.ObservedTime.IsZero() {
		return Totals{}, false
	}
	return Totals{Used: seconds(u.Used), OverQuota: seconds(u.OverQuota), Capacity: seconds(u.Capacity), At: u.ObservedTime.Time}, true
}

func seconds(l corev1.ResourceList) [snapshot.NumBaseDims]float64 {
	var out [snapshot.NumBaseDims]float64
	for d, name := range dims {
		q, ok := l[corev1.ResourceName(name)]
		if !ok {
			continue
		}
		if d == snapshot.DimMemory {
			out[d] = q.AsApproximateFloat64() * 3600
		} else {
			out[d] = float64(q.MilliValue()) * 3600
		}
	}
	return out
}
