package runtime

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/reserve"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// reservedNodes is the loop's side of node reservations (package reserve): which nodes carry
// fairway's reservation taint, as the node informer says, and which should, as the engine's
// holds say. It is the loop's: one goroutine, no lock.
type reservedNodes struct {
	r *reserve.Reserver
	// have are the nodes that carry the taint.
	have map[string]bool
	// want are the nodes to reserve, with the taint's value; next is the scratch map of the
	// next cycle.
	want, next map[string]string
	sync       []string
	// off: Options.NoNodeReservations.
	off bool
}

func newReservedNodes(r *reserve.Reserver) *reservedNodes {
	return &reservedNodes{r: r, have: map[string]bool{}, want: map[string]string{}, next: map[string]string{}}
}

// observe records whether node name (nil when gone) carries the taint.
func (rn *reservedNodes) observe(name string, n *corev1.Node) {
	if _, ok := reserve.Reserved(n); ok {
		rn.have[name] = true
	} else {
		delete(rn.have, name)
	}
}

// value is the taint value of the gang the engine holds node for ("" for none), for the
// evictor.
func (rn *reservedNodes) value(res *engine.Result, node string) string {
	if rn.off {
		return ""
	}
	for _, r := range res.Reserved {
		if r.Node == node {
			return v1alpha1.ReservedTaintValue(r.Gang.Namespace, r.Gang.Name)
		}
	}
	return ""
}

// update makes the cycle's reservations the reserver's: the nodes the engine holds capacity on,
// and tainted nodes where a binding is still in flight (the hold goes with the engine's
// decision; the room is the gang's only once the API server has the binding). It asks for a
// check of the nodes whose taint differs from what they should have.
func (rn *reservedNodes) update(res *engine.Result, snap *snapshot.Snapshot) {
	if rn.off {
		return
	}
	clear(rn.next)
	for _, r := range res.Reserved {
		rn.next[r.Node] = v1alpha1.ReservedTaintValue(r.Gang.Namespace, r.Gang.Name)
	}
	rn.sync = rn.sync[:0]
	for name := range rn.have {
		if _, ok := rn.next[name]; ok {
			continue
		}
		if bindingInFlight(snap.Node(name)) {
			if v, ok := rn.want[name]; ok {
				rn.next[name] = v
				continue
			}
		}
		rn.sync = append(rn.sync, name)
	}
	for name := range rn.next {
		if !rn.have[name] {
			rn.sync = append(rn.sync, name)
		}
	}
	if !maps.Equal(rn.next, rn.want) {
		rn.want, rn.next = rn.next, rn.want
		rn.r.Set(maps.Clone(rn.want), rn.sync...)
	} else if len(rn.sync) > 0 {
		rn.r.Set(maps.Clone(rn.want), rn.sync...)
	}
}

func bindingInFlight(n *snapshot.Node) bool {
	if n == nil {
		return false
	}
	for _, t := range n.Tasks {
		if t.Assumed {
			return true
		}
	}
	return false
}
