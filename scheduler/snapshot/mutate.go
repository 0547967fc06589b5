package snapshot

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The primitives below are how the engine changes the snapshot. Each has an exact inverse
// (Assume/Unassume, SetReleasing on/off, AddHold/PopHold), which is what lets the engine's
// Statement try a placement and roll it back without a trace.

// Assume places a pending pod on a node with the given GPU assignment, as if bound at now. The
// caller has checked that it fits.
func (s *Snapshot) Assume(t *Task, n *Node, a Assignment, now time.Time) {
	g := t.Gang
	s.account(t, -1)
	if !t.shadow {
		s.unlinkPending(t)
	}
	t.State, t.Assumed, t.Node, t.NodeName, t.GPUs, t.Started = TaskBound, true, n, n.Name, a, now
	g.Bound++
	g.Assumed++
	if now.After(g.LastStart) {
		g.LastStart = now
	}
	n.attach(t)
	s.victimRef(t, 1)
	s.assumeClaims(t, a.DRA, 1)
	s.reindex(n)
	s.account(t, 1)
	s.syncGang(g)
}

// Unassume takes an assumed pod off its node and makes it pending again: the inverse of Assume.
func (s *Snapshot) Unassume(t *Task) {
	g := t.Gang
	n := t.Node
	s.account(t, -1)
	s.victimRef(t, -1)
	n.detach(t)
	s.assumeClaims(t, t.GPUs.DRA, -1)
	s.reindex(n)
	if t.Assumed {
		g.Assumed--
	}
	t.State, t.Assumed, t.Node, t.NodeName, t.GPUs, t.Started = TaskPending, false, nil, "", Assignment{Shared: -1}, time.Time{}
	g.Bound--
	if !t.shadow {
		t.pendPos = len(g.Pending)
		g.Pending = append(g.Pending, t)
	}
	g.LastStart = time.Time{}
	for _, o := range g.Tasks {
		if o.State != TaskPending && o.Started.After(g.LastStart) {
			g.LastStart = o.Started
		}
	}
	s.account(t, 1)
	s.syncGang(g)
}

// SetReleasing marks a bound pod as being evicted by the engine (on), or takes the mark back
// (off). A releasing pod keeps its node's resources until it is deleted, but reclaim counts them
// as already freed.
func (s *Snapshot) SetReleasing(t *Task, on bool) {
	if (on && t.State != TaskBound) || (!on && t.State != TaskReleasing) {
		return
	}
	g := t.Gang
	n := t.Node
	s.account(t, -1)
	if on {
		s.victimRef(t, -1)
		if n != nil {
			n.release(t, 1)
		}
		t.State, t.Evicted = TaskReleasing, true
		chargeBudgets(t, 1)
		if g != nil {
			g.Bound--
			g.Releasing++
		}
	} else {
		if n != nil {
			n.release(t, -1)
		}
		chargeBudgets(t, -1)
		t.State, t.Evicted = TaskBound, false
		if g != nil {
			g.Bound++
			g.Releasing--
		}
		s.victimRef(t, 1)
	}
	if n != nil {
		s.reindex(n)
	}
	s.account(t, 1)
	if g != nil {
		s.syncGang(g)
	}
}

// Forget undoes the assumption of a pod whose binding the runtime failed to apply: the pod is
// pending again and its node's resources are free.
func (s *Snapshot) Forget(key types.NamespacedName) error {
	t := s.tasks[key]
	if t == nil {
		return fmt.Errorf("forget %s: %w", key, ErrNotFound)
	}
	if !t.Assumed || t.State != TaskBound {
		return fmt.Errorf("forget %s: %w", key, ErrNotAssumed)
	}
	s.Unassume(t)
	return nil
}

// CancelEviction takes back the engine's eviction of a pod (the runtime could not evict it): the
// pod counts as bound again.
func (s *Snapshot) CancelEviction(key types.NamespacedName) error {
	t := s.tasks[key]
	if t == nil {
		return fmt.Errorf("cancel eviction of %s: %w", key, ErrNotFound)
	}
	if !t.Evicted || t.State != TaskReleasing {
		return fmt.Errorf("cancel eviction of %s: %w", key, ErrNotEvicted)
	}
	s.SetReleasing(t, false)
	s.forgetEviction(key)
	return nil
}

// Shadow returns a pending copy of a bound pod that belongs to no list of the snapshot: the
// engine assumes shadows to check that evicted pods could be placed again elsewhere, then
// unassumes them. A shadow must not outlive the what-if that made it.
func (s *Snapshot) Shadow(t *Task) *Task {
	c := &Task{
		Key: t.Key, UID: t.UID, Gang: t.Gang, SubGroup: t.SubGroup, Req: t.Req, Class: t.Class,
		Priority: t.Priority, Created: t.Created, State: TaskPending, GPUs: Assignment{Shared: -1}, Recreatable: t.Recreatable,
		Grace: t.Grace, Budgets: t.Budgets,
		shadow: true, nodePos: -1, pendPos: -1, gangPos: -1,
	}
	c.pendGPU = c.pendingGPUEstimate(s.refGPUMemMiB)
	return c
}

// AddHold holds capacity on a node for a gang (see Hold).
func (s *Snapshot) AddHold(g *Gang, h Hold) {
	g.holds = append(g.holds, h)
	g.hold(&h, 1)
	n := h.Node
	n.Held.MilliCPU += h.MilliCPU
	n.Held.Memory += h.Memory
	n.Held.Pods += h.Pods
	n.HeldWhole += h.WholeGPUs
	n.pin(&h, 1)
	if !slices.Contains(n.holds, g) {
		n.holds = append(n.holds, g)
	}
	n.Version++
	s.chargeHold(g, &h, 1)
	if g.heldPos < 0 {
		g.heldPos = len(s.held)
		s.held = append(s.held, g)
	}
}

// PopHold removes the gang's most recent hold: the inverse of AddHold.
func (s *Snapshot) PopHold(g *Gang) {
	if len(g.holds) == 0 {
		return
	}
	h := g.holds[len(g.holds)-1]
	g.holds = g.holds[:len(g.holds)-1]
	s.unhold(g, &h)
}

// ExtendHolds moves the expiry of every hold of the gang to until.
func (s *Snapshot) ExtendHolds(g *Gang, until time.Time) {
	for i := range g.holds {
		g.holds[i].Expires = until
	}
}

// ClearHolds removes all of a gang's holds.
func (s *Snapshot) ClearHolds(g *Gang) { s.clearHolds(g) }

// ShrinkHolds takes off the gang's holds on the victim's node what the victim would have freed:
// its eviction did not happen (a PodDisruptionBudget refused it, the API failed), and the hold
// counted on it. Kept whole, the hold would keep capacity that never freed, and keep other
// gangs off capacity that did. A hold left empty goes.
func (s *Snapshot) ShrinkHolds(g *Gang, victim *Task) {
	if victim.Node == nil || len(g.holds) == 0 {
		return
	}
	whole := int64(len(victim.GPUs.Whole)) + victim.GPUs.Floating
	if victim.GPUs.Shared >= 0 {
		whole++ // a fraction freed for the gang was held as a whole GPU
	}
	milli, cpu, mem, pods := victim.GPUs.MilliGPU(), victim.Req.MilliCPU, victim.Req.Memory, int64(1)
	saved := slices.Clone(g.holds)
	s.clearHolds(g)
	take := func(have *int64, want *int64) {
		d := min(*have, *want)
		*have -= d
		*want -= d
	}
	for i := range saved {
		h := &saved[i]
		if h.Node == victim.Node {
			take(&h.WholeGPUs, &whole)
			take(&h.MilliGPU, &milli)
			take(&h.MilliCPU, &cpu)
			take(&h.Memory, &mem)
			take(&h.Pods, &pods)
		}
		if h.WholeGPUs > 0 || h.MilliGPU > 0 || h.MilliCPU > 0 || h.Memory > 0 || h.Pods > 0 {
			s.AddHold(g, *h)
		}
	}
}

func (s *Snapshot) clearHolds(g *Gang) {
	for len(g.holds) > 0 {
		s.PopHold(g)
	}
}

func (s *Snapshot) dropHoldsOn(g *Gang, n *Node) {
	kept := g.holds[:0]
	var dropped []Hold
	for _, h := range g.holds {
		if h.Node == n {
			dropped = append(dropped, h)
		} else {
			kept = append(kept, h)
		}
	}
	g.holds = kept
	for i := range dropped {
		s.unhold(g, &dropped[i])
	}
}

func (s *Snapshot) unhold(g *Gang, h *Hold) {
	n := h.Node
	n.Held.MilliCPU -= h.MilliCPU
	n.Held.Memory -= h.Memory
	n.Held.Pods -= h.Pods
	n.HeldWhole -= h.WholeGPUs
	n.pin(h, -1)
	g.hold(h, -1)
	if !g.holdsOn(n) {
		if i := slices.Index(n.holds, g); i >= 0 {
			n.holds = slices.Delete(n.holds, i, i+1)
		}
	}
	n.Version++
	s.chargeHold(g, h, -1)
	if len(g.holds) == 0 && g.heldPos >= 0 {
		s.held = swapRemove(s.held, g, func(g *Gang) *int { return &g.heldPos })
	}
}

func (s *Snapshot) chargeHold(g *Gang, h *Hold, sign int64) {
	if g.Queue == nil {
		return
	}
	apply := func(tt *Totals) {
		tt.Held.add(DimGPU, sign*h.MilliGPU)
		tt.Held.add(DimCPU, sign*h.MilliCPU)
		tt.Held.add(DimMemory, sign*h.Memory)
		if h.Node.TypeDim >= 0 && h.MilliGPU > 0 {
			tt.Held.add(h.Node.TypeDim, sign*h.MilliGPU)
		}
	}
	apply(&g.Queue.own)
	for a := g.Queue; a != nil; a = a.Parent {
		apply(&a.Totals)
	}
}
