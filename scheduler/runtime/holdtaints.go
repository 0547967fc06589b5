package runtime

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/holdtaint"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// holdTaints is the loop's side of the hold taint (package holdtaint): which nodes carry it, as
// the node informer says, and which should, as the engine's holds say. It is the loop's: one
// goroutine, no lock.
type holdTaints struct {
	r *holdtaint.Reconciler
	// have are the nodes that carry the taint.
	have map[string]bool
	// retired are the nodes that carry the taint under the key of older versions: each is synced
	// after every cycle until the reconciler has removed it.
	retired map[string]bool
	// want are the nodes to taint, with the taint's value; next is the scratch map of the next
	// cycle.
	want, next map[string]string
	sync       []string
	// off: Options.NoHoldTaints.
	off bool
}

func newHoldTaints(r *holdtaint.Reconciler) *holdTaints {
	return &holdTaints{r: r, have: map[string]bool{}, retired: map[string]bool{}, want: map[string]string{}, next: map[string]string{}}
}

// observe records whether node name (nil when gone) carries the taint, or the retired one.
func (ht *holdTaints) observe(name string, n *corev1.Node) {
	if _, ok := holdtaint.Tainted(n); ok {
		ht.have[name] = true
	} else {
		delete(ht.have, name)
	}
	if holdtaint.Retired(n) {
		ht.retired[name] = true
	} else {
		delete(ht.retired, name)
	}
}

// value is the taint value of the gang the engine holds node for ("" for none), for the
// evictor.
func (ht *holdTaints) value(res *engine.Result, node string) string {
	if ht.off {
		return ""
	}
	for _, h := range res.HeldNodes {
		if h.Node == node {
			return v1alpha1.HoldTaintValue(h.Gang.Namespace, h.Gang.Name)
		}
	}
	return ""
}

// update makes the cycle's held nodes the reconciler's: the nodes the engine holds capacity on,
// and tainted nodes where a binding is still in flight (the hold goes with the engine's
// decision; the room is the gang's only once the API server has the binding). It asks for a
// check of the nodes whose taint differs from what they should have, and of those that carry
// the retired key.
func (ht *holdTaints) update(res *engine.Result, snap *snapshot.Snapshot) {
	if ht.off {
		return
	}
	clear(ht.next)
	for _, h := range res.HeldNodes {
		ht.next[h.Node] = v1alpha1.HoldTaintValue(h.Gang.Namespace, h.Gang.Name)
	}
	ht.sync = ht.sync[:0]
	for name := range ht.have {
		if _, ok := ht.next[name]; ok {
			continue
		}
		if bindingInFlight(snap.Node(name)) {
			if v, ok := ht.want[name]; ok {
				ht.next[name] = v
				continue
			}
		}
		ht.sync = append(ht.sync, name)
	}
	for name := range ht.next {
		if !ht.have[name] {
			ht.sync = append(ht.sync, name)
		}
	}
	for name := range ht.retired {
		ht.sync = append(ht.sync, name) // the work queue drops a node named twice
	}
	if !maps.Equal(ht.next, ht.want) {
		ht.want, ht.next = ht.next, ht.want
		ht.r.Set(maps.Clone(ht.want), ht.sync...)
	} else if len(ht.sync) > 0 {
		ht.r.Set(maps.Clone(ht.want), ht.sync...)
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
