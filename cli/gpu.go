package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// podGPU is what one pod holds (or asks) of GPUs, read from its spec and from the annotations
// the webhook and the scheduler write.
type podGPU struct {
	// Whole is the pod's nvidia.com/gpu count.
	Whole int64
	// Milli is a fractional share in thousandths of a GPU (fairway.dev/gpu-fraction or its
	// alias, read by gpurequest.Parse).
	Milli int64
	// MemoryMiB is a share by GPU memory (fairway.dev/gpu-memory or its alias).
	MemoryMiB int64
	// Slot is the scheduler's GPU slot on the node (fairway.dev/gpu-index on a fractional pod),
	// -1 when not placed.
	Slot int
	// UUID is the physical GPU of a placed fractional pod (fairway.dev/gpu-uuid).
	UUID string
}

func (g podGPU) shared() bool { return g.Milli > 0 || g.MemoryMiB > 0 }

// queueOf is the queue the pod's labels name (see v1alpha1.QueueOf), "" for none.
func queueOf(p *corev1.Pod) string {
	_, q, _ := fairwayv1.QueueOf(p.Labels)
	return q
}

// isLoan reports whether the scheduler placed the pod on loan on an idle notebook's GPU.
func isLoan(p *corev1.Pod) bool { return p.Annotations[fairwayv1.LoanAnnotation] == "true" }

// gpuOf reads a pod's GPUs.
func gpuOf(p *corev1.Pod) podGPU {
	g := podGPU{Slot: -1}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		q, ok := c.Resources.Limits[fairwayv1.ResourceGPU]
		if !ok {
			q = c.Resources.Requests[fairwayv1.ResourceGPU]
		}
		g.Whole += q.Value()
	}
	a := p.Annotations
	// The scheduler's reading: a share it refuses is none, as it places none.
	if share, err := gpurequest.Parse(a); err == nil {
		g.Milli, g.MemoryMiB = share.Milli, share.MemoryMiB
	}
	if g.shared() {
		if b, _ := fairwayv1.PodBindingOf(p.Labels, a); len(b.GPUIndexes) == 1 {
			g.Slot = b.GPUIndexes[0]
		}
		g.UUID = a[fairwayv1.GPUUUIDAnnotation]
	}
	return g
}

// share prints a fractional share: "0.25" or "20000MiB".
func (g podGPU) share() string {
	if g.Milli > 0 {
		return decimal(float64(g.Milli) / 1000)
	}
	if g.MemoryMiB > 0 {
		return fmt.Sprintf("%dMiB", g.MemoryMiB)
	}
	return ""
}

// gpuSummary prints what a set of pods holds: "8" whole GPUs, "3×0.25" shares, or both joined
// with "+" ("2+4×0.5"); "-" for none.
func gpuSummary(pods []*corev1.Pod) (string, float64) {
	// The console sums every workload's pods at every change: a few shares, counted in a
	// slice in the order first seen, and no formatting beyond the result.
	type count struct {
		share string
		n     int
	}
	var whole int64
	var room [4]count
	shares := room[:0]
	var total float64
	for _, p := range pods {
		g := gpuOf(p)
		whole += g.Whole
		total += float64(g.Whole) + float64(g.Milli)/1000
		if s := g.share(); s != "" {
			if i := slices.IndexFunc(shares, func(c count) bool { return c.share == s }); i >= 0 {
				shares[i].n++
			} else {
				shares = append(shares, count{s, 1})
			}
		}
	}
	switch {
	case len(shares) > 0:
	case whole > 0:
		return strconv.FormatInt(whole, 10), total // small numbers are not allocated
	default:
		return "-", 0
	}
	var b strings.Builder
	if whole > 0 {
		b.WriteString(strconv.FormatInt(whole, 10))
	}
	for _, c := range shares {
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(c.n))
		b.WriteString("×")
		b.WriteString(c.share)
	}
	return b.String(), total
}

// isReservation reports whether the pod holds a shared GPU for the kubelet.
func isReservation(p *corev1.Pod) bool { return p.Labels[fairwayv1.ReservationLabel] == "true" }

// isFairwayPod reports whether fairway schedules the pod (and it is not one of its own
// reservation pods).
func isFairwayPod(p *corev1.Pod) bool {
	return p.Spec.SchedulerName == fairwayv1.SchedulerName && !isReservation(p)
}

func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
