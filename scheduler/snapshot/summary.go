package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Summary is a canonical, comparable dump of a snapshot: everything the engine reads, in sorted
// order. Tests compare summaries to prove that a rolled-back what-if left no trace.
type Summary struct {
	Nodes  []NodeSummary
	Queues []QueueSummary
	Gangs  []GangSummary
	Tasks  []TaskSummary
}

// NodeSummary is one node's usage.
type NodeSummary struct {
	Name                             string
	Used, Releasing, Held            NodeResources
	HeldWhole, Floating, FloatRel    int64
	Slots                            []GPUSlot
	UsedMilliGPU, RelMilliGPU        int64
	PreemptibleMilliGPU              int64
	FreeWhole, FreeWholeAfterRelease int64
}

// QueueSummary is one queue's totals.
type QueueSummary struct {
	Name     string
	NotReady string
	Totals   Totals
	Own      Totals
	Pending  []string
}

// GangSummary is one gang's counters.
type GangSummary struct {
	Key                         string
	Queue                       string
	Bound, Releasing, Succeeded int32
	Pending                     []string
	Holds                       []string
}

// TaskSummary is one pod's state.
type TaskSummary struct {
	Key     string
	State   string
	Assumed bool
	Evicted bool
	Node    string
	GPUs    string
}

// Summary returns the snapshot's canonical dump.
func (s *Snapshot) Summary() Summary {
	var out Summary
	for _, n := range s.nodes {
		if n == nil {
			continue
		}
		out.Nodes = append(out.Nodes, NodeSummary{
			Name: n.Name, Used: n.Used, Releasing: n.Releasing, Held: n.Held, HeldWhole: n.HeldWhole,
			Floating: n.Floating, FloatRel: n.FloatingRel, Slots: slices.Clone(n.Slots),
			UsedMilliGPU: n.UsedMilliGPU, RelMilliGPU: n.RelMilliGPU, PreemptibleMilliGPU: n.PreemptibleMilliGPU,
			FreeWhole: n.FreeWholeSlots(), FreeWholeAfterRelease: n.FreeWholeSlotsAfterRelease(),
		})
	}
	slices.SortFunc(out.Nodes, func(a, b NodeSummary) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range s.queueList {
		qs := QueueSummary{Name: q.Name, NotReady: q.NotReady, Totals: trimTotals(q.Totals), Own: trimTotals(q.own)}
		for _, g := range q.PendingGangs {
			qs.Pending = append(qs.Pending, g.Key.String())
		}
		slices.Sort(qs.Pending)
		out.Queues = append(out.Queues, qs)
	}
	for _, g := range s.gangs {
		gs := GangSummary{Key: g.Key.String(), Bound: g.Bound, Releasing: g.Releasing, Succeeded: g.Succeeded}
		if g.Queue != nil {
			gs.Queue = g.Queue.Name
		}
		for _, t := range g.Pending {
			gs.Pending = append(gs.Pending, t.Key.String())
		}
		slices.Sort(gs.Pending)
		for _, h := range g.holds {
			gs.Holds = append(gs.Holds, fmt.Sprintf("%s cpu=%d mem=%d pods=%d gpus=%d milli=%d", h.Node.Name, h.MilliCPU, h.Memory, h.Pods, h.WholeGPUs, h.MilliGPU))
		}
		out.Gangs = append(out.Gangs, gs)
	}
	slices.SortFunc(out.Gangs, func(a, b GangSummary) int { return strings.Compare(a.Key, b.Key) })
	for _, t := range s.tasks {
		ts := TaskSummary{Key: t.Key.String(), State: t.State.String(), Assumed: t.Assumed, Evicted: t.Evicted, Node: t.NodeName}
		if t.Node != nil {
			ts.GPUs = fmt.Sprintf("%v+%d/%d:%d:%d", t.GPUs.Whole, t.GPUs.Floating, t.GPUs.Shared, t.GPUs.Milli, t.GPUs.MemMiB)
		}
		out.Tasks = append(out.Tasks, ts)
	}
	slices.SortFunc(out.Tasks, func(a, b TaskSummary) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// trimTotals drops trailing zeros so that vectors grown and shrunk back compare equal.
func trimTotals(t Totals) Totals {
	trim := func(a Amounts) Amounts {
		for len(a) > 0 && a[len(a)-1] == 0 {
			a = a[:len(a)-1]
		}
		if len(a) == 0 {
			return nil
		}
		return a.Clone()
	}
	return Totals{Allocated: trim(t.Allocated), AllocatedNP: trim(t.AllocatedNP), Releasing: trim(t.Releasing),
		Pending: trim(t.Pending), Held: trim(t.Held), PendingPods: t.PendingPods, Loaned: trim(t.Loaned)}
}

// Verify recomputes every aggregate from the pods and holds and reports where the incremental
// bookkeeping disagrees. It is O(pods) and meant for tests.
func (s *Snapshot) Verify() error {
	var errs []error
	for _, n := range s.nodes {
		if n != nil {
			errs = append(errs, s.verifyNode(n)...)
		}
	}
	errs = append(errs, s.verifyQueueTotals()...)
	errs = append(errs, s.verifyVictimIndex()...)
	errs = append(errs, s.verifyGangs()...)
	errs = append(errs, s.verifyBudgets()...)
	return errors.Join(errs...)
}

// samePins reports whether counts (by slot position) count exactly the positions listed.
func samePins(counts, positions []int32) bool {
	want := make([]int32, len(counts))
	for _, p := range positions {
		if int(p) >= len(want) {
			return false
		}
		want[p]++
	}
	return slices.Equal(counts, want)
}

// verifyNode recomputes n's usage, holds, pins and free-GPU index from its tasks and holds.
func (s *Snapshot) verifyNode(n *Node) []error {
	var errs []error
	fresh := &Node{ID: n.ID, Name: n.Name, Slots: slices.Clone(n.Slots)}
	for i := range fresh.Slots {
		g := &fresh.Slots[i]
		*g = GPUSlot{Index: g.Index, UUID: g.UUID, MemoryMiB: g.MemoryMiB}
	}
	for _, t := range n.Tasks {
		saved := t.nodePos
		fresh.attach(t)
		t.nodePos = saved
		if t.State == TaskBound && t.Gang != nil && t.Gang.Preemptible && !t.GPUs.Loan {
			fresh.PreemptibleMilliGPU += t.GPUs.MilliGPU()
		}
	}
	fresh.Tasks = nil
	if !equalResources(fresh.Used, n.Used) || !equalResources(fresh.Releasing, n.Releasing) ||
		fresh.UsedMilliGPU != n.UsedMilliGPU || fresh.RelMilliGPU != n.RelMilliGPU ||
		fresh.Floating != n.Floating || fresh.FloatingRel != n.FloatingRel || fresh.Loans != n.Loans ||
		!slices.Equal(fresh.Slots, n.Slots) || fresh.PreemptibleMilliGPU != n.PreemptibleMilliGPU {
		errs = append(errs, fmt.Errorf("node %s: usage %+v/%+v slots %+v, recomputed %+v/%+v slots %+v",
			n.Name, n.Used, n.Releasing, n.Slots, fresh.Used, fresh.Releasing, fresh.Slots))
	}
	var held NodeResources
	var heldWhole int64
	pins := make([]int32, len(n.pins))
	var pinned int32
	for _, g := range n.holds {
		var r NodeResources
		var w int64
		var gpins []int32
		for i := range g.holds {
			if h := &g.holds[i]; h.Node == n {
				r.MilliCPU += h.MilliCPU
				r.Memory += h.Memory
				r.Pods += h.Pods
				w += h.WholeGPUs
				for _, p := range h.Slots {
					if p < 0 {
						continue
					}
					gpins = append(gpins, p)
					if int(p) < len(pins) {
						pins[p]++
						pinned++
					}
				}
			}
		}
		if o := g.on[n]; o == nil || o.res.MilliCPU != r.MilliCPU || o.res.Memory != r.Memory || o.res.Pods != r.Pods ||
			o.whole != w || !samePins(o.pins, gpins) {
			errs = append(errs, fmt.Errorf("node %s: gang %s's sums of its holds here are not %d mCPU, %d bytes, %d pods, %d GPUs pinning %v", n.Name, g.Key, r.MilliCPU, r.Memory, r.Pods, w, gpins))
		}
		held.MilliCPU += r.MilliCPU
		held.Memory += r.Memory
		held.Pods += r.Pods
		heldWhole += w
	}
	if held.MilliCPU != n.Held.MilliCPU || held.Memory != n.Held.Memory || held.Pods != n.Held.Pods || heldWhole != n.HeldWhole {
		errs = append(errs, fmt.Errorf("node %s: held %+v/%d, recomputed %+v/%d", n.Name, n.Held, n.HeldWhole, held, heldWhole))
	}
	if !slices.Equal(pins, n.pins) || pinned != n.pinned {
		errs = append(errs, fmt.Errorf("node %s: pinned slots %v (%d), recomputed %v (%d)", n.Name, n.pins, n.pinned, pins, pinned))
	}
	if want := int(n.FreeWholeSlots()); n.bucket != want || !s.byFree[want].Has(n.ID) {
		errs = append(errs, fmt.Errorf("node %s: indexed with %d free GPUs, has %d", n.Name, n.bucket, want))
	}
	for _, t := range n.Tasks {
		for _, pos := range t.GPUs.Whole {
			if g := &n.Slots[pos]; g.Sharers > 0 && g.Owners-g.RelOwners > 0 && g.Sharers-g.RelSharers > 0 {
				errs = append(errs, fmt.Errorf("node %s: GPU %d is both whole and shared", n.Name, g.Index))
			}
		}
	}
	return errs
}

// verifyQueueTotals recomputes each queue's own totals (its tasks' charges and its gangs' holds)
// and its subtree totals.
func (s *Snapshot) verifyQueueTotals() []error {
	var errs []error
	own := map[*Queue]*Totals{}
	for _, q := range s.queueList {
		own[q] = &Totals{}
	}
	for _, t := range s.tasks {
		if t.Gang == nil || t.Gang.Queue == nil || own[t.Gang.Queue] == nil {
			continue
		}
		saved := t.Gang.Queue.own
		t.Gang.Queue.own = *own[t.Gang.Queue]
		if kinds := chargeKinds(t); kinds != 0 {
			s.applyCharge(&t.Gang.Queue.own, t, kinds, 1)
		}
		*own[t.Gang.Queue] = t.Gang.Queue.own
		t.Gang.Queue.own = saved
	}
	for _, g := range s.gangs {
		if g.Queue == nil {
			continue
		}
		for i := range g.holds {
			saved := g.Queue.own
			g.Queue.own = *own[g.Queue]
			h := g.holds[i]
			tt := &g.Queue.own
			tt.Held.add(DimGPU, h.MilliGPU)
			tt.Held.add(DimCPU, h.MilliCPU)
			tt.Held.add(DimMemory, h.Memory)
			if h.Node.TypeDim >= 0 && h.MilliGPU > 0 {
				tt.Held.add(h.Node.TypeDim, h.MilliGPU)
			}
			*own[g.Queue] = g.Queue.own
			g.Queue.own = saved
		}
	}
	for _, q := range s.queueList {
		if got, want := trimTotals(q.own), trimTotals(*own[q]); fmt.Sprint(got) != fmt.Sprint(want) {
			errs = append(errs, fmt.Errorf("queue %s: own totals %+v, recomputed %+v", q.Name, got, want))
		}
		sub := own[q].clone()
		var walk func(p *Queue)
		walk = func(p *Queue) {
			for _, c := range p.Children {
				sub.addTotals(own[c])
				walk(c)
			}
		}
		walk(q)
		if got, want := trimTotals(q.Totals), trimTotals(sub); fmt.Sprint(got) != fmt.Sprint(want) {
			errs = append(errs, fmt.Errorf("queue %s: totals %+v, recomputed %+v", q.Name, got, want))
		}
	}
	return errs
}

// verifyVictimIndex recomputes the per-queue index of nodes with evictable work.
func (s *Snapshot) verifyVictimIndex() []error {
	var errs []error
	victims := map[*Queue]map[int]int32{}
	victimGPU := map[*Queue]map[int]int64{}
	victimPrio := map[*Queue]map[int32]int32{}
	for _, t := range s.tasks {
		if t.Node != nil && t.Gang != nil && t.State == TaskBound && t.Gang.Preemptible && t.Gang.Queue != nil && !t.GPUs.Loan {
			if victims[t.Gang.Queue] == nil {
				victims[t.Gang.Queue] = map[int]int32{}
				victimGPU[t.Gang.Queue] = map[int]int64{}
			}
			victims[t.Gang.Queue][t.Node.ID]++
			victimGPU[t.Gang.Queue][t.Node.ID] += t.GPUs.MilliGPU()
			if victimPrio[t.Gang.Queue] == nil {
				victimPrio[t.Gang.Queue] = map[int32]int32{}
			}
			victimPrio[t.Gang.Queue][t.Gang.Priority]++
		}
	}
	for _, q := range s.queueList {
		for id, c := range q.victimCount {
			if c != victims[q][id] || (c > 0) != q.victimNodes.Has(id) || q.victimGPU[id] != victimGPU[q][id] {
				errs = append(errs, fmt.Errorf("queue %s: %d evictable pods (%d milli-GPU) indexed on node %d, recomputed %d (%d)",
					q.Name, c, q.victimGPU[id], id, victims[q][id], victimGPU[q][id]))
			}
		}
		if fmt.Sprint(q.victimPrio) != fmt.Sprint(victimPrio[q]) && len(q.victimPrio)+len(victimPrio[q]) > 0 {
			errs = append(errs, fmt.Errorf("queue %s: evictable pods per priority %v, recomputed %v", q.Name, q.victimPrio, victimPrio[q]))
		}
		for id, c := range victims[q] {
			if id >= len(q.victimCount) && c > 0 {
				errs = append(errs, fmt.Errorf("queue %s: %d evictable pods on node %d not indexed", q.Name, c, id))
			}
		}
	}
	return errs
}

// verifyGangs recomputes each gang's counts of assumed, bound, releasing and pending pods and
// its list memberships.
func (s *Snapshot) verifyGangs() []error {
	var errs []error
	for _, g := range s.gangs {
		var bound, rel, assumed int32
		pending := 0
		for _, t := range g.Tasks {
			if t.Assumed {
				assumed++
			}
			switch t.State {
			case TaskBound:
				bound++
			case TaskReleasing:
				rel++
			case TaskPending:
				pending++
			}
		}
		if assumed != g.Assumed {
			errs = append(errs, fmt.Errorf("gang %s: %d assumed pods counted, %d found", g.Key, g.Assumed, assumed))
		}
		if bound != g.Bound || rel != g.Releasing || pending != len(g.Pending) {
			errs = append(errs, fmt.Errorf("gang %s: bound/releasing/pending %d/%d/%d, recomputed %d/%d/%d",
				g.Key, g.Bound, g.Releasing, len(g.Pending), bound, rel, pending))
		}
		if (len(g.Pending) > 0) != (g.queuePos >= 0) {
			errs = append(errs, fmt.Errorf("gang %s: pending list membership wrong", g.Key))
		}
		if g.Stale() != (g.stalePos >= 0) {
			errs = append(errs, fmt.Errorf("gang %s: stale list membership wrong", g.Key))
		}
	}
	return errs
}

// verifyBudgets recomputes the evictions each PodDisruptionBudget does not count yet.
func (s *Snapshot) verifyBudgets() []error {
	var errs []error
	evicting := map[*Budget]int32{}
	for _, t := range s.tasks {
		if t.Evicted && t.State == TaskReleasing {
			for _, b := range t.Budgets {
				evicting[b]++
			}
		}
	}
	for _, b := range s.budgets {
		if b.evicting != evicting[b] {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: %d evictions counted, recomputed %d", b.Key, b.evicting, evicting[b]))
		}
	}
	return errs
}

func equalResources(a, b NodeResources) bool {
	if a.MilliCPU != b.MilliCPU || a.Memory != b.Memory || a.Pods != b.Pods || len(a.Scalars) != len(b.Scalars) {
		return false
	}
	for k, v := range a.Scalars {
		if b.Scalars[k] != v {
			return false
		}
	}
	return true
}
