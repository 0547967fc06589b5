package engine

// Victim selection, shared by reclaim, preemption and consolidation.
//
// A what-if places the pods a gang needs one at a time on the capacity releasing pods will free
// (placeMode.afterRelease). When a pod fits nowhere, makeRoom looks for the node where evicting
// the fewest pods makes it fit:
//
//  1. Candidates on a node are its bound pods the policy allows (eligible), sorted by the
//     policy's order, most evictable first (reclaim: pods of the queue furthest above its fair
//     share, then lowest priority, then most recently started).
//  2. A candidate is evicted as a unit: alone if its gang keeps at least its minimum without it,
//     otherwise its whole gang (on every node it runs on), so no gang is left partial.
//  3. Units are taken in order while the policy allows each (reclaim: no queue is pushed below
//     its floor) until the pod fits the node; this is simulated on a copy of the node's free
//     resources and GPU slots, not on the snapshot, so scanning every node is cheap.
//  4. The node with the fewest evicted pods wins; ties go to the node whose last needed victim is
//     the most evictable, then to the lowest node ID. Its units are evicted in the Statement and
//     the pod is placed; later pods of the gang see that capacity as freed.
//
// The whole what-if rolls back unless every pod the gang needs was placed.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// victimPolicy says which running pods a what-if may evict, in which order, and what must still
// hold after each eviction.
type victimPolicy struct {
	reason      EvictionReason
	beneficiary *snapshot.Gang
	// verdict says why a bound pod may not be evicted at all in this what-if ("" if it may).
	verdict func(v *snapshot.Task) string
	// allow says why a unit may not be evicted, given what the node under evaluation already
	// frees (acc) ("" if it may); nil allows everything.
	allow func(unit []*snapshot.Task, acc *freedAcc) string
	// compare orders candidates, most evictable first.
	compare func(a, b *snapshot.Task) int
	// message explains the eviction of a pod.
	message func(v *snapshot.Task) string
	// evicted lists the pods this what-if evicted, in order.
	evicted []*snapshot.Task
	// refused holds, per reason, the pods makeRoom could not evict, for the gang's reason.
	refused map[string]map[*snapshot.Task]struct{}
	// quiet are prefixes of refusal reasons not worth telling the user (pods that were never
	// candidates, such as other queues' pods for preemption).
	quiet []string
}

func (p *victimPolicy) refuse(why string, pods ...*snapshot.Task) {
	if p.refused == nil {
		p.refused = map[string]map[*snapshot.Task]struct{}{}
	}
	set := p.refused[why]
	if set == nil {
		set = map[*snapshot.Task]struct{}{}
		p.refused[why] = set
	}
	for _, t := range pods {
		set[t] = struct{}{}
	}
}

func (p *victimPolicy) whyOrNil() string {
	if p == nil {
		return ""
	}
	return p.why()
}

// why summarises the refusals worth telling: "no eviction makes room: 4 pods would take queue x
// below its fair share of gpu (6)"; "" when there are none.
func (p *victimPolicy) why() string {
	var parts []string
	for why, set := range p.refused {
		quiet := false
		for _, q := range p.quiet {
			quiet = quiet || strings.HasPrefix(why, q)
		}
		if !quiet {
			parts = append(parts, fmt.Sprintf("%d pods %s", len(set), why))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return "no eviction makes room: " + strings.Join(parts, "; ")
}

// freedAcc accumulates, per queue, what the units chosen on one node free.
type freedAcc struct {
	entries []freed
}

type freed struct {
	q       *snapshot.Queue
	base    [snapshot.NumBaseDims]int64
	typeDim int
	typeAmt int64
}

func (f *freedAcc) reset() { f.entries = f.entries[:0] }

func (f *freedAcc) add(unit []*snapshot.Task) {
	for _, t := range unit {
		e := freed{q: t.Gang.Queue, typeDim: -1}
		e.base[snapshot.DimGPU] = t.GPUs.MilliGPU()
		e.base[snapshot.DimCPU] = t.Req.MilliCPU
		e.base[snapshot.DimMemory] = t.Req.Memory
		if t.Node != nil && t.Node.TypeDim >= 0 {
			e.typeDim, e.typeAmt = t.Node.TypeDim, t.GPUs.MilliGPU()
		}
		f.entries = append(f.entries, e)
	}
}

// under sums what the accumulated units free in dimension d within queue a's subtree.
func (f *freedAcc) under(a *snapshot.Queue, d int) int64 {
	var v int64
	for i := range f.entries {
		e := &f.entries[i]
		if !a.IsAncestorOf(e.q) {
			continue
		}
		if d < snapshot.NumBaseDims {
			v += e.base[d]
		} else if e.typeDim == d {
			v += e.typeAmt
		}
	}
	return v
}

// unitAmount sums what a unit frees in dimension d.
func unitAmount(unit []*snapshot.Task, d int) int64 {
	var f freedAcc
	f.add(unit)
	var v int64
	for i := range f.entries {
		e := &f.entries[i]
		if d < snapshot.NumBaseDims {
			v += e.base[d]
		} else if e.typeDim == d {
			v += e.typeAmt
		}
	}
	return v
}

// slotLeft is a GPU slot as a node evaluation sees it, after release and chosen evictions.
type slotLeft struct {
	milli, mem, memCap int64
	owners, sharers    int32
}

// scratch holds buffers reused across node evaluations.
type scratch struct {
	cands []*snapshot.Task
	slots []slotLeft
	units [][]*snapshot.Task
	best  [][]*snapshot.Task
	gangs []*snapshot.Gang
	acc   freedAcc
}

// nodeRoom is a node's free resources after release, minus other gangs' holds, as victims are
// taken off it.
type nodeRoom struct {
	n               *snapshot.Node
	cpu, mem, pods  int64
	floating, resvd int64
	slots           []slotLeft
	scalarFreed     map[string]int64
}

func (c *cycle) roomOf(n *snapshot.Node, g *snapshot.Gang) *nodeRoom {
	held, reserved := heldByOthers(n, g, true)
	r := &nodeRoom{
		n:        n,
		cpu:      n.Allocatable.MilliCPU - n.Used.MilliCPU + n.Releasing.MilliCPU - held.MilliCPU,
		mem:      n.Allocatable.Memory - n.Used.Memory + n.Releasing.Memory - held.Memory,
		pods:     n.Allocatable.Pods - n.Used.Pods + n.Releasing.Pods - held.Pods,
		floating: n.Floating - n.FloatingRel,
		resvd:    reserved,
	}
	c.scratch.slots = c.scratch.slots[:0]
	for i := range n.Slots {
		s := &n.Slots[i]
		c.scratch.slots = append(c.scratch.slots, slotLeft{
			milli: s.UsedMilli - s.RelMilli, mem: s.UsedMemMiB - s.RelMemMiB, memCap: s.MemoryMiB,
			owners: s.Owners - s.RelOwners, sharers: s.Sharers - s.RelSharers,
		})
	}
	r.slots = c.scratch.slots
	return r
}

// free takes a bound pod off the room (if it is on this node).
func (r *nodeRoom) free(t *snapshot.Task) {
	if t.Node != r.n {
		return
	}
	r.cpu += t.Req.MilliCPU
	r.mem += t.Req.Memory
	r.pods++
	for _, p := range t.GPUs.Whole {
		s := &r.slots[p]
		s.milli -= snapshot.MilliPerGPU
		s.mem -= s.memCap
		s.owners--
	}
	r.floating -= t.GPUs.Floating
	if p := t.GPUs.Shared; p >= 0 {
		s := &r.slots[p]
		s.milli -= t.GPUs.Milli
		s.mem -= t.GPUs.MemMiB
		s.sharers--
	}
	for _, sc := range t.Req.Scalars {
		if r.scalarFreed == nil {
			r.scalarFreed = map[string]int64{}
		}
		r.scalarFreed[string(sc.Name)] += sc.Value
	}
}

// fits reports whether the request fits the room.
func (r *nodeRoom) fits(req *snapshot.Request) bool {
	if r.cpu < req.MilliCPU || r.mem < req.Memory || r.pods < 1 {
		return false
	}
	n := r.n
	for _, sc := range req.Scalars {
		free := n.Allocatable.Scalars[sc.Name] - n.Used.Scalars[sc.Name] + n.Releasing.Scalars[sc.Name] + r.scalarFreed[string(sc.Name)]
		if free < sc.Value {
			return false
		}
	}
	for _, p := range req.HostPorts {
		if !n.PortFree(p) {
			return false
		}
	}
	if !req.GPU() {
		return true
	}
	empty := int64(0)
	for i := range r.slots {
		s := &r.slots[i]
		if s.milli == 0 && s.owners == 0 && s.sharers == 0 {
			empty++
		}
	}
	avail := empty - r.floating - r.resvd
	if req.WholeGPUs > 0 {
		return avail >= req.WholeGPUs
	}
	for i := range r.slots {
		s := &r.slots[i]
		m := req.SharedMilli(s.memCap)
		if m < 0 {
			continue
		}
		if s.owners == 0 && s.sharers > 0 && s.milli+m <= snapshot.MilliPerGPU && (s.memCap == 0 || s.mem+req.SharedMemMiB(s.memCap) <= s.memCap) {
			return true
		}
		if avail >= 1 && s.milli == 0 && s.owners == 0 && s.sharers == 0 {
			return true
		}
	}
	return false
}

// unitOf returns the unit a candidate is evicted with: itself if its gang keeps its minimum
// without it (counting the gang's pods already chosen on this node), otherwise every bound pod of
// its gang.
func (c *cycle) unitOf(v *snapshot.Task, chosen []*snapshot.Task) []*snapshot.Task {
	g := v.Gang
	gone := int32(0)
	for _, t := range chosen {
		if t.Gang == g {
			gone++
		}
	}
	if g.Bound-gone-1+g.Succeeded >= g.MinMember {
		return []*snapshot.Task{v}
	}
	var unit []*snapshot.Task
	for _, t := range g.Tasks {
		if t.State == snapshot.TaskBound && !contains(chosen, t) {
			unit = append(unit, t)
		}
	}
	return unit
}

func contains(ts []*snapshot.Task, t *snapshot.Task) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// nodeVictims returns the fewest units, in policy order, whose eviction makes the pod fit the
// node, or ok false when evicting everything allowed is not enough.
func (c *cycle) nodeVictims(n *snapshot.Node, t *snapshot.Task, g *snapshot.Gang, pol *victimPolicy) (units [][]*snapshot.Task, pods int, ok bool) {
	sc := &c.scratch
	sc.cands = sc.cands[:0]
	for _, v := range n.Tasks {
		if v.State != snapshot.TaskBound || v.Assumed || v.Gang == nil || v.Gang == g {
			continue
		}
		if why := pol.verdict(v); why != "" {
			pol.refuse(why, v)
			continue
		}
		sc.cands = append(sc.cands, v)
	}
	if len(sc.cands) == 0 {
		return nil, 0, false
	}
	sortTasks(sc.cands, pol.compare)
	room := c.roomOf(n, g)
	sc.acc.reset()
	sc.units = sc.units[:0]
	var chosen []*snapshot.Task
	for _, v := range sc.cands {
		if contains(chosen, v) {
			continue
		}
		unit := c.unitOf(v, chosen)
		if pol.allow != nil {
			if why := pol.allow(unit, &sc.acc); why != "" {
				pol.refuse(why, unit...)
				continue
			}
		}
		sc.acc.add(unit)
		for _, u := range unit {
			room.free(u)
		}
		chosen = append(chosen, unit...)
		sc.units = append(sc.units, unit)
		if room.fits(&t.Req) {
			return sc.units, len(chosen), true
		}
	}
	return nil, 0, false
}

func sortTasks(ts []*snapshot.Task, cmp func(a, b *snapshot.Task) int) {
	// Insertion sort: candidate lists are a node's pods, short, and this allocates nothing.
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && cmp(ts[j], ts[j-1]) < 0; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// makeRoom evicts, on the best node, the units that make the pod fit, and returns the node and
// GPUs for the pod (see the file comment).
func (c *cycle) makeRoom(t *snapshot.Task, g *snapshot.Gang, restrict bitset.Set, pol *victimPolicy) (*snapshot.Node, snapshot.Assignment, bool) {
	cls := c.snap.ClassNodes(t.Class)
	nodes := c.snap.Nodes()
	need := t.PendingGPU()
	if t.Req.WholeGPUs > 0 {
		need = t.Req.WholeGPUs * snapshot.MilliPerGPU
	}
	var best *snapshot.Node
	bestPods := 0
	var bestLast *snapshot.Task
	all := c.snap.AllNodes()
	for id := bitset.NextAnd(all, cls, restrict, 0); id >= 0; id = bitset.NextAnd(all, cls, restrict, id+1) {
		n := nodes[id]
		if need > 0 {
			if int64(len(n.Slots))*snapshot.MilliPerGPU-(n.UsedMilliGPU-n.RelMilliGPU)+n.PreemptibleMilliGPU < need {
				continue
			}
			if n.TypeDim >= 0 && c.typeOverLimit(g, t, n.TypeDim) {
				continue
			}
		}
		units, pods, ok := c.nodeVictims(n, t, g, pol)
		if !ok {
			continue
		}
		lastUnit := units[len(units)-1]
		last := lastUnit[0]
		if best == nil || pods < bestPods || (pods == bestPods && pol.compare(last, bestLast) < 0) {
			best, bestPods, bestLast = n, pods, last
			c.scratch.best = append(c.scratch.best[:0], units...)
		}
	}
	if best == nil {
		return nil, snapshot.Assignment{}, false
	}
	for _, unit := range c.scratch.best {
		for _, v := range unit {
			if v.State != snapshot.TaskBound {
				continue
			}
			c.stmt.Evict(v, pol.reason, pol.message(v), &pol.beneficiary.Key)
			pol.evicted = append(pol.evicted, v)
		}
	}
	a, f := c.tryNode(best, t, g, true)
	if f != Fits {
		return nil, snapshot.Assignment{}, false // cannot happen: nodeRoom and tryNode agree
	}
	return best, a, true
}
