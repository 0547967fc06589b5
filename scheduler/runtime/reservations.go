package runtime

import (
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// releaseRetry is how long a release asked of the reservation manager is given before it is
// asked again (the manager refuses one that an Acquire overtook, and a deletion may fail).
const releaseRetry = 5 * time.Second

// reservations keeps the reservation pods of fairway's namespace (the loop feeds it every pod
// change there) and asks the reservation manager to release those that hold a GPU slot no
// fractional pod uses any more. It is the loop's: one goroutine, no lock.
type reservations struct {
	gpu *gpushare.Manager
	log logr.Logger

	// byName are the reservation pods, by name.
	byName map[string]reservation
	// releasing are the reservations whose release was asked, and when.
	releasing map[types.UID]time.Time
}

type reservation struct {
	uid         types.UID
	slot        gpushare.SlotKey
	terminating bool
}

func newReservations(gpu *gpushare.Manager, log logr.Logger) *reservations {
	return &reservations{gpu: gpu, log: log, byName: map[string]reservation{}, releasing: map[types.UID]time.Time{}}
}

// track records (or forgets, when p is nil or no reservation) the pod name of fairway's namespace.
func (rs *reservations) track(name string, p *corev1.Pod) {
	if p == nil || p.Labels[v1alpha1.ReservationLabel] != "true" {
		delete(rs.byName, name)
		return
	}
	slot := -1
	if v, ok := p.Annotations[snapshot.ReservationSlotAnnotation]; ok {
		if i, err := strconv.Atoi(v); err == nil && i >= 0 {
			slot = i
		}
	}
	rs.byName[name] = reservation{uid: p.UID, slot: gpushare.SlotKey{Node: p.Spec.NodeName, Slot: slot}, terminating: p.DeletionTimestamp != nil}
}

// release asks for the deletion of reservations that hold a slot no fractional pod of snap uses
// any more (bound, assumed or leaving), and of reservations on nodes that are gone. The manager
// refuses a release that an Acquire overtook.
func (rs *reservations) release(snap *snapshot.Snapshot, now time.Time) {
	for name, r := range rs.byName {
		if r.terminating {
			continue
		}
		n := snap.Node(r.slot.Node)
		if n != nil && r.slot.Slot >= 0 {
			if s := n.Slot(r.slot.Slot); s != nil && (s.Sharers > 0 || s.Loans > 0) {
				continue
			}
		}
		if at, ok := rs.releasing[r.uid]; ok && now.Sub(at) < releaseRetry {
			continue
		}
		rs.releasing[r.uid] = now
		if v := rs.log.V(2); v.Enabled() {
			var st any
			if n != nil && r.slot.Slot >= 0 {
				if s := n.Slot(r.slot.Slot); s != nil {
					st = *s
				}
			}
			v.Info("Releasing a GPU reservation", "node", r.slot.Node, "slot", r.slot.Slot, "uid", r.uid, "nodeKnown", n != nil, "gpu", st)
		}
		rs.gpu.RequestRelease(r.slot, name, r.uid, rs.gpu.Generation(r.slot))
	}
	for uid, at := range rs.releasing {
		if now.Sub(at) > time.Minute {
			delete(rs.releasing, uid)
		}
	}
}
