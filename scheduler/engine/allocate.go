package engine

// Allocation places pending gangs on capacity that is free now.
//
// Order. Leaf queues take turns: the next gang comes from the queue that is below its guarantee
// (quota capped by demand) of some resource, and among those, or among the rest, from the queue
// with the lowest dominant share (the largest effective/fair-share ratio across resources), ties
// by name. After each attempt the queue's share is recomputed and it rejoins the line, so a
// queue that just got capacity yields to one that has less. Within a queue, gangs that run below
// their minimum come first (completing a started gang beats evicting it), then gangs go by
// priority (highest first), then age (oldest first), then name.
//
// A gang is placed whole or not at all: the pods it needs to start (its minimum, sub-group
// minimums first) and every other pending pod that also fits, inside one Statement that is
// rolled back if the minimum is not reached. Before that, the gang is checked against its queue's
// limits and the rule that non-preemptible work fits in guaranteed quota; each pod is checked
// again as it is placed (and GPU-type limits per node), so a limit reached halfway fails the
// gang instead of placing part of it.
//
// Backfill. A gang that does not fit is skipped, not waited for: smaller gangs behind it may use
// the free capacity. To keep a large gang from waiting forever, once it has waited longer than
// Options.StarvationThreshold the capacity it needs is held for it (holdForStarving): nodes are
// chosen as if empty, most free GPUs first, and other gangs see those nodes' free capacity
// minus what is held, so nothing new lands there and the capacity gathers as running pods end.
//
// Capacity failures are remembered per (constraints, request, queue) for the rest of the step:
// capacity only shrinks while allocating, so an identical gang fails the same way and costs a map
// lookup instead of a node search.

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

type queueTurn struct {
	q     *snapshot.Queue
	gangs []*snapshot.Gang
	next  int
	below bool
	share float64
}

// queueLine is a heap of queue turns (container/heap): the next queue to serve on top.
type queueLine []*queueTurn

func (l queueLine) Len() int { return len(l) }
func (l queueLine) Less(i, j int) bool {
	a, b := l[i], l[j]
	if a.below != b.below {
		return a.below
	}
	if a.share != b.share {
		return a.share < b.share
	}
	return a.q.Name < b.q.Name
}
func (l queueLine) Swap(i, j int) { l[i], l[j] = l[j], l[i] }
func (l *queueLine) Push(x any)   { *l = append(*l, x.(*queueTurn)) }
func (l *queueLine) Pop() any {
	old := *l
	x := old[len(old)-1]
	*l = old[:len(old)-1]
	return x
}

// gangOrder sorts gangs that run below their minimum first (they have started: completing them
// beats evicting them as stale, which matters most after a scheduler restart interrupted the
// binding of a gang), then by priority (highest first), then age, then key.
func gangOrder(a, b *snapshot.Gang) int {
	if as, bs := a.Stale(), b.Stale(); as != bs {
		if as {
			return -1
		}
		return 1
	}
	if a.Priority != b.Priority {
		return cmp.Compare(b.Priority, a.Priority)
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}

func (c *cycle) allocate() {
	var line queueLine
	for _, q := range c.snap.Queues() {
		if len(q.PendingGangs) == 0 {
			continue
		}
		gangs := slices.Clone(q.PendingGangs)
		slices.SortFunc(gangs, gangOrder)
		if q.NotReadyReason != "" {
			for _, g := range gangs {
				c.setReason(g, ReasonQueueNotReady, q.NotReady)
			}
			continue
		}
		line = append(line, &queueTurn{q: q, gangs: gangs, below: belowGuarantee(q), share: dominantShare(q)})
	}
	// Gangs that capacity is held for go first: what reclaim or preemption freed for them is
	// theirs until they bind (as kube-scheduler's nominated node), and a victim's recreated pod
	// must not take it back, a share of a GPU included, which a hold does not pin.
	var first map[*snapshot.Gang]bool
	for _, g := range slices.SortedFunc(slices.Values(c.snap.HeldGangs()), gangOrder) {
		if len(g.Pending) > 0 && g.Queue.NotReadyReason == "" {
			if first == nil {
				first = map[*snapshot.Gang]bool{}
			}
			first[g] = true
			c.tryAllocate(g)
		}
	}
	heap.Init(&line)
	for line.Len() > 0 {
		turn := line[0]
		g := turn.gangs[turn.next]
		turn.next++
		if !first[g] {
			c.tryAllocate(g)
		}
		if turn.next == len(turn.gangs) {
			heap.Pop(&line)
			continue
		}
		turn.below, turn.share = belowGuarantee(turn.q), dominantShare(turn.q)
		heap.Fix(&line, 0)
	}
}

func (c *cycle) tryAllocate(g *snapshot.Gang) {
	if f := c.precheck(g); f != nil {
		c.setReason(g, f.code, f.msg)
		if f.code == ReasonQueueLimit {
			c.limited[g] = true
		}
		return
	}
	key, cacheable := c.failKeyOf(g)
	if cacheable {
		if f, ok := c.failCache[key]; ok {
			// The message names the pod that failed first; name this gang's instead.
			f.msg = strings.ReplaceAll(f.msg, f.pod, firstPending(g))
			c.failed(g, f)
			return
		}
	}
	_, f := c.placeGang(g, placeMode{})
	if f != nil {
		if cacheable && f.capacity {
			f.pod = firstPending(g)
			c.failCache[key] = *f
		}
		c.failed(g, *f)
		return
	}
	if len(g.Holds()) > 0 {
		// Capacity held for the gang and not used by it is free again for the others: failures
		// remembered before may no longer hold.
		clear(c.failCache)
	}
	c.stmt.ClearHolds(g)
	c.commit()
	c.placed[g] = true
	g.WaitingSince = time.Time{}
	g.BudgetWaitSince = time.Time{}
}

// firstPending is the key of the pod placement tries first, as named in failure messages.
func firstPending(g *snapshot.Gang) string {
	first := g.Pending[0]
	for _, t := range g.Pending {
		if t.Created.Before(first.Created) || t.Created.Equal(first.Created) && t.Key.Name < first.Key.Name {
			first = t
		}
	}
	return first.Key.String()
}

// failed records a failed attempt; capacity failures go on to reclaim and friends.
func (c *cycle) failed(g *snapshot.Gang, f placeFailure) {
	c.setReason(g, f.code, f.msg)
	if f.capacity {
		c.unplaced = append(c.unplaced, g)
		if g.WaitingSince.IsZero() {
			g.WaitingSince = c.now
		}
	}
}

// precheck finds what keeps a gang from being placed whatever the cluster looks like: its
// queue, its pods' problems, missing pods, limits and quotas.
func (c *cycle) precheck(g *snapshot.Gang) *placeFailure {
	if g.Queue.NotReadyReason != "" {
		return &placeFailure{code: ReasonQueueNotReady, msg: g.Queue.NotReady}
	}
	if g.Foreign != "" {
		return &placeFailure{code: ReasonForeignQueue, msg: g.Foreign}
	}
	placeable, gated := 0, 0
	for _, t := range g.Pending {
		switch {
		case t.Problem != nil:
			code := ReasonInvalidRequest
			switch t.Problem.Code {
			case snapshot.ProblemUnsupported:
				code = ReasonUnsupported
			case snapshot.ProblemVolume:
				code = ReasonVolume
			case snapshot.ProblemNotAdmitted:
				code = ReasonNotAdmitted
			}
			return &placeFailure{code: code, msg: fmt.Sprintf("pod %s: %s", t.Key, t.Problem.Message)}
		case t.Gated:
			gated++
		default:
			placeable++
		}
	}
	need := int(g.MinMember - g.Bound - g.Succeeded)
	if placeable == 0 && gated > 0 {
		return &placeFailure{code: ReasonSchedulingGated, msg: count(gated, "pod waits", "pods wait") + " for their scheduling gates to be removed"}
	}
	if placeable < need {
		return &placeFailure{code: ReasonWaitingForPods, msg: fmt.Sprintf("the gang needs %s to start and only %s (%d running, %d succeeded, %d pending, %d gated)",
			count(int(g.MinMember), "pod", "pods"), count(int(g.Bound+g.Succeeded)+placeable+gated, "exists", "exist"), g.Bound, g.Succeeded, placeable, gated)}
	}
	if f := c.missingSubGroup(g); f != nil {
		return f
	}
	tasks, _, minimal := c.planTasks(g)
	if f := c.gangOverLimit(g, tasks[:max(minimal, 1)]); f != nil {
		return f
	}
	return nil
}

// missingSubGroup says which sub-group lacks the pods its minimum needs (a Ray cluster whose
// head is not created yet): no capacity helps such a gang, so it waits as WaitingForPods rather
// than as a placement failure that reclaim or preemption would try to fix.
func (c *cycle) missingSubGroup(g *snapshot.Gang) *placeFailure {
	for _, sg := range g.SubGroups {
		have := c.boundIn(g, sg.Name)
		for _, t := range g.Pending {
			if t.SubGroup == sg.Name && t.Placeable() {
				have++
			}
		}
		if have < int(sg.MinMember) {
			return &placeFailure{code: ReasonWaitingForPods, msg: fmt.Sprintf("sub-group %s has %d of the %s the gang needs of it to start (bound or pending)",
				sg.Name, have, count(int(sg.MinMember), "pod", "pods"))}
		}
	}
	return nil
}

// failKey identifies gangs that fail the same way for lack of capacity.
type failKey struct {
	class            *snapshot.FilterClass
	queue            *snapshot.Queue
	cpu, mem         int64
	whole, frac, gpm int64
	count, need      int
	topo             snapshot.Topology
}

// failKeyOf returns the gang's key when failures may be cached for it: a fresh gang of identical
// pods without sub-groups or holds.
func (c *cycle) failKeyOf(g *snapshot.Gang) (failKey, bool) {
	if g.Bound > 0 || len(g.Holds()) > 0 || len(g.SubGroups) > 0 || len(g.Pending) == 0 {
		return failKey{}, false
	}
	first := g.Pending[0]
	for _, t := range g.Pending {
		if !t.Placeable() || !sameRequest(first, t) {
			return failKey{}, false
		}
	}
	r := &first.Req
	return failKey{
		class: first.Class, queue: g.Queue, cpu: r.MilliCPU, mem: r.Memory, whole: r.WholeGPUs,
		frac: r.FractionMilli, gpm: r.GPUMemoryMiB, count: len(g.Pending), need: int(g.MinMember - g.Succeeded), topo: g.Topology,
	}, true
}

// holdForStarving holds capacity for gangs that have waited longer than the starvation
// threshold and would stay within their queue's fair share.
func (c *cycle) holdForStarving() {
	th := c.e.opts.StarvationThreshold
	if th < 0 {
		return
	}
	for _, g := range c.unplaced {
		if c.placed[g] || len(g.Pending) == 0 || g.WaitingSince.IsZero() || c.now.Sub(g.WaitingSince) < th {
			continue
		}
		if len(g.Holds()) > 0 {
			c.snap.ExtendHolds(g, c.now.Add(c.e.opts.HoldTTL))
			c.setReason(g, ReasonStarvationHold, fmt.Sprintf("waiting since %s; capacity is held on %s until running pods there end; %s",
				g.WaitingSince.UTC().Format("15:04:05"), holdNodes(g), c.reasons[g].Message))
			continue
		}
		tasks, _, minimal := c.planTasks(g)
		set := tasks[:max(minimal, 1)]
		if !c.fitsFairShare(g, set) {
			continue
		}
		if nodes := c.planHolds(g, set); nodes != "" {
			c.setReason(g, ReasonStarvationHold, fmt.Sprintf("waited since %s, longer than %s: capacity is now held on %s until running pods there end; %s",
				g.WaitingSince.UTC().Format("15:04:05"), th, nodes, c.reasons[g].Message))
		}
	}
}

// fitsFairShare reports whether the set alone fits in the fair share of the gang's queue and
// of each of its ancestors: only then may capacity be held for it. What the queue's other pods
// hold does not count; they end in time, and the hold is what lets the gang have its turn.
func (c *cycle) fitsFairShare(g *snapshot.Gang, set []*snapshot.Task) bool {
	for d := 0; d < snapshot.NumBaseDims; d++ {
		var amt int64
		for _, t := range set {
			amt += podAmount(t, d)
		}
		if amt == 0 {
			continue
		}
		for a := g.Queue; a != nil; a = a.Parent {
			if amt > a.FairShare.At(d) {
				return false
			}
		}
	}
	return true
}

// planHolds chooses nodes for the set as if they were empty (most free GPUs first, respecting the
// pods' constraints and other gangs' holds) and holds the capacity there. It returns the held
// node names, or "" when even empty nodes cannot take the set.
func (c *cycle) planHolds(g *snapshot.Gang, set []*snapshot.Task) string {
	type plan struct {
		n              *snapshot.Node
		cpu, mem, pods int64
		whole, milli   int64
	}
	var restricts []bitset.Set
	if lvl := g.Topology.Required; lvl != "" {
		doms := c.snap.Domains(lvl)
		for _, d := range TightestDomains(c.snap, doms, c.snap.ClassNodes(set[0].Class), 0, false) {
			restricts = append(restricts, doms.Nodes[d])
		}
		slices.Reverse(restricts) // most free capacity first: it gathers soonest
	} else {
		restricts = []bitset.Set{nil}
	}
	nodes := c.snap.Nodes()
	for _, restrict := range restricts {
		var plans []*plan
		byNode := map[int]*plan{}
		ok := true
		for _, t := range set {
			cls := c.snap.ClassNodes(t.Class)
			var chosen *plan
			for k := c.snap.MaxFreeGPUs(); k >= 0 && chosen == nil; k-- {
				set := c.snap.NodesWithFreeGPUs(k)
				for id := bitset.NextAnd(set, cls, restrict, 0); id >= 0; id = bitset.NextAnd(set, cls, restrict, id+1) {
					n := nodes[id]
					p := byNode[id]
					if p == nil {
						p = &plan{n: n}
					}
					held, heldWhole := heldByOthers(n, g, true)
					r := &t.Req
					if c.noShares(n, r) || policyFit(n, t, g) != Fits {
						continue
					}
					whole := r.WholeGPUs
					if r.Shared() {
						whole = 1
					}
					if n.Allocatable.MilliCPU-held.MilliCPU-p.cpu < r.MilliCPU || n.Allocatable.Memory-held.Memory-p.mem < r.Memory ||
						n.Allocatable.Pods-held.Pods-p.pods < 1 || int64(len(n.Slots))-heldWhole-p.whole < whole {
						continue
					}
					p.cpu += r.MilliCPU
					p.mem += r.Memory
					p.pods++
					p.whole += whole
					p.milli += t.PendingGPU()
					if byNode[id] == nil {
						byNode[id] = p
						plans = append(plans, p)
					}
					chosen = p
					break
				}
			}
			if chosen == nil {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, p := range plans {
			c.stmt.Hold(g, snapshot.Hold{Node: p.n, MilliCPU: p.cpu, Memory: p.mem, Pods: p.pods, WholeGPUs: p.whole,
				MilliGPU: p.milli, Expires: c.now.Add(c.e.opts.HoldTTL)})
		}
		c.commit()
		return holdNodes(g)
	}
	return ""
}

func holdNodes(g *snapshot.Gang) string {
	var names []string
	for _, h := range g.Holds() {
		if !slices.Contains(names, h.Node.Name) {
			names = append(names, h.Node.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
