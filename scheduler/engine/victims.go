package engine

// Victim selection, shared by reclaim, preemption and consolidation.
//
// A what-if places the pods a gang needs one at a time on the capacity releasing pods will free
// (placeMode.afterRelease). When a pod fits nowhere, makeRoom looks for the node where evicting
// the fewest pods makes it fit:
//
//  1. Candidates on a node are its bound pods the policy's verdict allows, sorted by the
//     policy's order, most evictable first: pods whose eviction violates no PodDisruptionBudget
//     before those whose eviction does (see violatesBudget), then (reclaim) pods of the queue
//     furthest above its fair share, then lowest priority, then most recently started. Gangs
//     whose binding is in flight are never candidates, nor pods of a budget the API server
//     refused an eviction for lately (the runtime's backoff, Budget.BlockedAt).
//  2. A candidate is evicted as a unit: alone if its gang keeps at least its minimum without it,
//     otherwise its whole gang (on every node it runs on), so no gang is left partial.
//  3. Units are taken in order, skipping those that free nothing the pod still lacks on the node
//     and those the policy refuses (reclaim: no queue is pushed below its floor), until the pod
//     fits; this is simulated on a copy of the node's free resources and GPU slots, not on the
//     snapshot.
//  4. Nodes are searched where the preferred victims run (reclaim: the nodes of the queue
//     furthest above its fair share first, then the next queue's if none of those works;
//     preemption: the gang's own queue's), using each queue's index of the nodes with its
//     preemptible pods and their GPUs, which skips nodes that could not free enough (floors
//     included) without looking at their pods. Once a node that works is found, at most
//     maxCompared nodes are looked into, so that the search does not grow with the cluster.
//  5. The node whose victims violate the fewest PodDisruptionBudgets wins, then the one with the
//     fewest evicted pods; ties go to the node whose last needed victim is the most evictable,
//     then to the lowest node ID. Its units are evicted in the Statement
//     and the pod is placed; later pods of the gang see that capacity as freed.
//
// The whole what-if rolls back unless every pod the gang needs was placed.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// victimPolicy says which running pods a what-if may evict, in which order, and what must still
// hold after each eviction.
type victimPolicy struct {
	reason      EvictionReason
	beneficiary *snapshot.Gang
	// level names the bound the floors protect ("fair share", "guaranteed quota"), for messages.
	level string
	// verdict says why the pods of a gang may not be evicted at all in this what-if (kind
	// refuseNone if they may). It must be cheap: it is asked for every pod on every node scanned.
	verdict func(g *snapshot.Gang) refusal
	// allow says why a unit may not be evicted, given what the node under evaluation already
	// frees (acc); nil allows everything.
	allow func(unit []*snapshot.Task, acc *freedAcc) refusal
	// key ranks a candidate; see compareCands.
	key func(v *snapshot.Task) victimKey
	// message explains the eviction of a pod.
	message func(v *snapshot.Task) string
	// quiet lists refusals not worth telling the user (pods that were never candidates, such as
	// other queues' pods for preemption).
	quiet []refusalKind
	// sources are the sets of nodes to search, in order (nodes where the preferred victims run);
	// the search stops at the first set with a node that works. Nil searches every node.
	sources []bitset.Set
	// none explains a search that had nowhere to look (sources empty).
	none string
	// victimQueues, when set, are the only queues whose pods may go: a node can free at most
	// their preemptible GPUs there, which prunes nodes before their pods are looked at.
	victimQueues []*snapshot.Queue
	// headroom, when set, is how much GPU a victim queue may still give (reclaim floors); it
	// tightens the pruning bound.
	headroom func(q *snapshot.Queue) int64

	// dims and bound are the dimensions and the per-queue bound a reclaim's floors protect
	// (checkAncestors reads them); nil for other policies.
	dims  []int
	bound func(q *snapshot.Queue, d int) int64
	// overAncestor is the department checkAncestors found above its bound, nil if none.
	overAncestor *snapshot.Queue
	// move, when set, lets a unit the policy refuses go anyway if it says yes: the unit moves
	// (checkAfter places every moved pod again elsewhere, or the what-if fails), so it frees
	// nothing of its queue's. moveMessage explains such an eviction.
	move        func(unit []*snapshot.Task) bool
	moveMessage func(v *snapshot.Task) string
	// overrideBudgets lets victims go whose PodDisruptionBudget is blocked (they are taken as
	// violating it); such evictions carry the budget they override. Moves keep their budgets.
	overrideBudgets bool
	// spared says there are pods evicted for the beneficiary lately (Snapshot.EvictedFor): their
	// recreated pods are not evicted for it again, so that a plan redone for the same gang (one
	// of its pods bound and lost again, an elastic gang's next pod) takes other pods and no pod
	// goes back and forth for one beneficiary. Set by searchRoom.
	// sparedHit says a search left such a pod alone: a reclaim or preemption what-if that found
	// no room without them runs again with them (reclaimMode.evictAgain, which sets noSpare).
	spared    bool
	sparedHit bool
	noSpare   bool

	// evicted lists the pods this what-if evicted, in order; moved the part of them that move.
	evicted []*snapshot.Task
	moved   []*snapshot.Task
	// violations counts the evicted pods whose eviction violates a PodDisruptionBudget.
	violations int
	// refused counts, per refusal, the pods the latest makeRoom could not evict, for the gang's
	// reason; refusedGangs keeps a refused unit's gang from being counted twice. Counting costs,
	// so a search counts only when tally is set: makeRoom searches again with it when it fails.
	refused      map[refusal]int
	refusedGangs map[*snapshot.Gang]struct{}
	tally        bool
	// exhausted names, for a refuseExhausted, each victim queue and what it may still give.
	exhausted string
}

// refusalKind is why a pod may not be evicted.
type refusalKind uint8

const (
	refuseNone refusalKind = iota
	refuseNonPreemptible
	refuseOwnQueue
	refuseOtherQueue
	refuseQueueNotOver
	refuseReclaimRuntime
	refusePreemptRuntime
	refusePriority
	refuseNeedsPlacement
	refuseNotRecreated
	refuseFloor
	refuseUseless
	refuseExhausted
	// refuseBudget: the API server refused to evict a pod of the PodDisruptionBudget lately
	// (refusal.budget), and the runtime backs off before it asks again.
	refuseBudget
	// refuseEvictedBefore: the pod was evicted (or moved) for the same gang lately
	// (victimPolicy.spared).
	refuseEvictedBefore
	// refuseMoveBudget: the policy lets the pods go only as a move (refusal.base says why), and
	// a move keeps their PodDisruptionBudgets: refusal.budget allows no disruption now, or the
	// API server refused one lately. No budget timeout overrides it.
	refuseMoveBudget
)

// refusal is a refusal kind with what it is about; comparable, so it keys the tally.
type refusal struct {
	kind refusalKind
	// base is why the policy refused the pods a refuseMoveBudget would have moved (q and d are
	// its queue and dimension).
	base refusalKind
	q    *snapshot.Queue
	d    int
	prio int32
	// budget is the PodDisruptionBudget of a refuseBudget or refuseMoveBudget.
	budget *snapshot.Budget
}

// exhaustedDetail names the queues a search could take from and the GPUs each may still give,
// against what the roomiest node lacks for the pod: "queue a may give 1 GPU, queue b 0; the pod
// needs 2 GPU more than any node has free". Built only for a reason (a tally pass).
func exhaustedDetail(queues []*snapshot.Queue, heads []int64, lack int64) string {
	var b strings.Builder
	for i, q := range queues {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more queues", len(queues)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "queue %s %s GPU", q.Name, snapshot.FormatAmount(snapshot.DimGPU, heads[i]))
	}
	fmt.Fprintf(&b, " above it, and the pod needs %s GPU more than any node has free", snapshot.FormatAmount(snapshot.DimGPU, lack))
	return b.String()
}

// describeRefusal says what keeps n pods from going, as a sentence whose noun and verb agree
// with n: "1 pod is non-preemptible", "4 pods would take queue x below its fair share of gpu
// (6)". refuseExhausted is about the queues, not the pods: it ignores n.
func (c *cycle) describeRefusal(p *victimPolicy, r refusal, n int) string {
	switch r.kind {
	case refuseNonPreemptible:
		return count(n, "pod is", "pods are") + " non-preemptible"
	case refuseOwnQueue:
		return count(n, "pod is", "pods are") + " the gang's own queue's"
	case refuseOtherQueue:
		return count(n, "pod belongs to another queue", "pods belong to other queues")
	case refuseQueueNotOver:
		return fmt.Sprintf("%s to queue %s, which is not above its %s", count(n, "pod belongs", "pods belong"), r.q.Name, p.level)
	case refuseReclaimRuntime:
		return fmt.Sprintf("%s queue %s's reclaim minimum runtime (%s)", count(n, "pod has not run", "pods have not run"), r.q.Name, r.q.Spec.ReclaimMinRuntime)
	case refusePreemptRuntime:
		return fmt.Sprintf("%s preemption minimum runtime (%s)", count(n, "pod has not run its queue's", "pods have not run their queue's"), r.q.Spec.PreemptMinRuntime)
	case refusePriority:
		return fmt.Sprintf("%s a priority of at least %d", count(n, "pod has", "pods have"), r.prio)
	case refuseNeedsPlacement:
		return count(n, "pod needs", "pods need") + " a topology domain or sub-groups to be placed again"
	case refuseNotRecreated:
		return count(n, "pod would not come back: nothing recreates it without losing its work",
			"pods would not come back: nothing recreates them without losing their work")
	case refuseFloor:
		return fmt.Sprintf("%s would take queue %s below its %s of %s (%s)", count(n, "pod", "pods"), r.q.Name, p.level, c.snap.DimName(r.d), snapshot.FormatAmount(r.d, p.floorOf(r.q, r.d)))
	case refuseUseless:
		return count(n, "pod frees", "pods free") + " nothing the gang needs"
	case refuseExhausted:
		s := "the queues above their " + p.level + " have too little left above it for this pod"
		if p.exhausted != "" {
			s += " (" + p.exhausted + ")"
		}
		return s
	case refuseEvictedBefore:
		return fmt.Sprintf("%s evicted for this gang in the last %s already (no pod is evicted twice for the same gang)", count(n, "pod was", "pods were"), c.e.opts.HoldTTL)
	case refuseBudget:
		return fmt.Sprintf("%s for PodDisruptionBudget %s, which allows no more disruptions now (the API server refused an eviction; retried after %s)",
			count(n, "pod waits", "pods wait"), r.budget.Key, r.budget.BlockedUntil().Format(time.RFC3339))
	case refuseMoveBudget:
		state := "allows no disruption now"
		if r.budget.BlockedAt(c.now) {
			state += " (the API server refused an eviction; retried after " + r.budget.BlockedUntil().Format(time.RFC3339) + ")"
		}
		their := "their"
		if n == 1 {
			their = "its"
		}
		return fmt.Sprintf("%s only move (%s), and %s PodDisruptionBudget %s %s: a move keeps its pods' budgets, which no reclaim.budgetTimeout overrides, so the gang waits until the budget allows a disruption",
			count(n, "pod may", "pods may"), c.describeRefusal(p, refusal{kind: r.base, q: r.q, d: r.d}, n), their, r.budget.Key, state)
	}
	return count(n, "pod", "pods") + " may not be evicted"
}

func (p *victimPolicy) refuse(r refusal, g *snapshot.Gang, pods int, unit bool) {
	if !p.tally {
		return
	}
	if unit {
		if _, seen := p.refusedGangs[g]; seen {
			return
		}
		if p.refusedGangs == nil {
			p.refusedGangs = map[*snapshot.Gang]struct{}{}
		}
		p.refusedGangs[g] = struct{}{}
	}
	if p.refused == nil {
		p.refused = map[refusal]int{}
	}
	p.refused[r] += pods
}

// refuseBudget records, tallying or not, that a blocked PodDisruptionBudget kept a pod of the
// gang from going: searches outside nodeVictims (room under a limit or a department's bound)
// make no tally pass, and the gang's budget wait (noteBudget) must start from them too.
func (p *victimPolicy) refuseBudget(b *snapshot.Budget, g *snapshot.Gang) {
	tally := p.tally
	p.tally = true
	p.refuse(refusal{kind: refuseBudget, budget: b}, g, 1, false)
	p.tally = tally
}

func (p *victimPolicy) resetRefusals() {
	clear(p.refused)
	clear(p.refusedGangs)
	p.exhausted = ""
}

// floorOf is set by policies with floors (reclaim), for messages.
func (p *victimPolicy) floorOf(q *snapshot.Queue, d int) int64 {
	if p.level == "guaranteed quota" {
		return deserved(q, d)
	}
	return q.FairShare.At(d)
}

// why summarises the refusals of the latest makeRoom worth telling: "no eviction makes room: 4
// pods would take queue x below its fair share of gpu (6)"; "" when there are none.
func (c *cycle) why(p *victimPolicy) string {
	if p == nil {
		return ""
	}
	var parts []string
	for r, n := range p.refused {
		if !slices.Contains(p.quiet, r.kind) {
			parts = append(parts, c.describeRefusal(p, r, n))
		}
	}
	if len(parts) == 0 {
		if p.sources != nil && len(p.sources) == 0 {
			return p.none
		}
		return ""
	}
	slices.Sort(parts)
	return "no eviction makes room: " + strings.Join(parts, "; ")
}

// victimKey ranks a candidate: one whose eviction violates no PodDisruptionBudget first (as
// kube-scheduler prefers), then a higher share (its queue further above its fair share), then a
// recreatable pod before one whose eviction loses it for good, then a lower priority, fewer GPUs,
// a later start.
type victimKey struct {
	share float64
	prio  int32
	// violates is true when evicting the pod would break a PodDisruptionBudget; lost is true for
	// a pod nothing recreates (Task.Recreatable false). Declared here, where they fill padding.
	violates bool
	lost     bool
	gpu      int64
	start    int64
}

type cand struct {
	t   *snapshot.Task
	key victimKey
}

// compareCands orders candidates most evictable first; ties go to the pod key.
func compareCands(a, b cand) int {
	switch {
	case a.key.violates != b.key.violates:
		if b.key.violates {
			return -1
		}
		return 1
	case a.key.share != b.key.share:
		return cmp.Compare(b.key.share, a.key.share)
	case a.key.lost != b.key.lost:
		return boolRank(a.key.lost) - boolRank(b.key.lost)
	case a.key.prio != b.key.prio:
		return cmp.Compare(a.key.prio, b.key.prio)
	case a.key.gpu != b.key.gpu:
		return cmp.Compare(a.key.gpu, b.key.gpu)
	case a.key.start != b.key.start:
		return cmp.Compare(b.key.start, a.key.start)
	}
	if c := strings.Compare(a.t.Key.Namespace, b.t.Key.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.t.Key.Name, b.t.Key.Name)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
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
	var v int64
	for _, t := range unit {
		switch d {
		case snapshot.DimGPU:
			v += t.GPUs.MilliGPU()
		case snapshot.DimCPU:
			v += t.Req.MilliCPU
		case snapshot.DimMemory:
			v += t.Req.Memory
		default:
			if t.Node != nil && t.Node.TypeDim == d {
				v += t.GPUs.MilliGPU()
			}
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
	cands  []cand
	slots  []slotLeft
	chosen []*snapshot.Task
	best   []*snapshot.Task
	// moving are the chosen pods that move rather than go (victimPolicy.move); bestMoving the
	// best node's.
	moving     []*snapshot.Task
	bestMoving []*snapshot.Task
	// heldNodes is the set of the nodes a gang holds, for placement to look there first.
	heldNodes bitset.Set
	acc       freedAcc
	room      nodeRoom
	visited   bitset.Set
	budgets   []budgetUse
}

func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// maxFreeAfterRelease is the most GPU (milli) any node of the class has free once releasing pods
// are gone: the largest free-GPU bucket, or a node with pods leaving.
func (c *cycle) maxFreeAfterRelease(cls, restrict bitset.Set) int64 {
	var best int64
	for k := c.snap.MaxFreeGPUs(); k > 0; k-- {
		if bitset.NextAnd(c.snap.NodesWithFreeGPUs(k), cls, restrict, 0) >= 0 {
			best = int64(k) * snapshot.MilliPerGPU
			break
		}
	}
	nodes := c.snap.Nodes()
	rel := c.snap.NodesReleasing()
	for id := bitset.NextAnd(rel, cls, restrict, 0); id >= 0; id = bitset.NextAnd(rel, cls, restrict, id+1) {
		best = max(best, nodes[id].FreeWholeSlotsAfterRelease()*snapshot.MilliPerGPU)
	}
	// Shared GPUs with room count too, at most one GPU each.
	if bitset.NextAnd(c.snap.NodesWithSharedRoom(), cls, restrict, 0) >= 0 {
		best = max(best, snapshot.MilliPerGPU-1)
	}
	return best
}

// maxCompared bounds how many nodes makeRoom looks into once it has found one that works, so
// that the search costs the same on 4,000 nodes as on 40.
const maxCompared = 8

// nodeRoom is a node's free resources after release, minus other gangs' holds, as victims are
// taken off it.
type nodeRoom struct {
	n                   *snapshot.Node
	noShares            bool
	pinned              uint64
	cpu, mem, pods      int64
	floating, heldWhole int64
	slots               []slotLeft
	scalarFreed         map[string]int64
}

func (c *cycle) roomOf(n *snapshot.Node, g *snapshot.Gang) *nodeRoom {
	held, heldWhole := heldByOthers(n, g, true)
	r := &c.scratch.room
	*r = nodeRoom{
		n:         n,
		noShares:  c.e.opts.SharesNeedInventory && !n.Inventory,
		cpu:       n.Allocatable.MilliCPU - n.Used.MilliCPU + n.Releasing.MilliCPU - held.MilliCPU,
		mem:       n.Allocatable.Memory - n.Used.Memory + n.Releasing.Memory - held.Memory,
		pods:      n.Allocatable.Pods - n.Used.Pods + n.Releasing.Pods - held.Pods,
		floating:  n.Floating - n.FloatingRel,
		heldWhole: heldWhole,
	}
	if n.HeldWhole > 0 || n.Held.Pods > 0 {
		r.pinned = n.PinnedByOthers(g)
	}
	c.scratch.slots = c.scratch.slots[:0]
	for i := range n.Slots {
		s := &n.Slots[i]
		sl := slotLeft{
			milli: s.UsedMilli - s.RelMilli, mem: s.UsedMemMiB - s.RelMemMiB, memCap: s.MemoryMiB,
			owners: s.Owners - s.RelOwners, sharers: s.Sharers - s.RelSharers,
		}
		if s.Claimed > 0 && s.Owners == 0 {
			sl.owners++ // a DRA device a claim holds for no pod of fairway's: no eviction frees it
		}
		c.scratch.slots = append(c.scratch.slots, sl)
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

// helps reports whether evicting the unit frees, on this node, something the request still lacks
// here: evicting a CPU-only pod does not help a pod that lacks a GPU.
func (r *nodeRoom) helps(unit []*snapshot.Task, req *snapshot.Request) bool {
	gpuShort := req.GPU() && !r.gpuFits(req)
	for _, t := range unit {
		if t.Node != r.n {
			continue
		}
		switch {
		case gpuShort && t.GPUs.MilliGPU() > 0,
			r.cpu < req.MilliCPU && t.Req.MilliCPU > 0,
			r.mem < req.Memory && t.Req.Memory > 0,
			r.pods < 1,
			len(req.Scalars) > 0 && len(t.Req.Scalars) > 0:
			return true
		}
	}
	return false
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
	return r.gpuFits(req)
}

// gpuFits reports whether the request's GPUs fit the room.
func (r *nodeRoom) gpuFits(req *snapshot.Request) bool {
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
	avail := empty - r.floating - r.heldWhole
	if req.WholeGPUs > 0 {
		return avail >= req.WholeGPUs
	}
	if r.noShares {
		return false
	}
	for i := range r.slots {
		s := &r.slots[i]
		m := req.SharedMilli(s.memCap)
		if m < 0 || isPinned(r.pinned, i) {
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

// appendUnit appends the unit a candidate is evicted with: itself if its gang keeps its minimum
// without it (counting the gang's pods already chosen), otherwise every bound pod of its gang not
// chosen yet, on whatever node.
func appendUnit(chosen []*snapshot.Task, v *snapshot.Task) []*snapshot.Task {
	g := v.Gang
	gone := int32(0)
	for _, t := range chosen {
		if t.Gang == g {
			gone++
		}
	}
	if g.Bound-gone-1+g.Succeeded >= g.MinMember {
		return append(chosen, v)
	}
	n := len(chosen)
	for _, t := range g.Tasks {
		if t.State == snapshot.TaskBound && !slices.Contains(chosen[:n], t) {
			chosen = append(chosen, t)
		}
	}
	return chosen
}

// spares reports whether the unit holds a pod evicted for the gang lately.
func (c *cycle) spares(g *snapshot.Gang, unit []*snapshot.Task) bool {
	for _, t := range unit {
		if c.snap.EvictedFor(g.Key, t.Key) {
			return true
		}
	}
	return false
}

// nodeVictims finds the fewest units, in policy order, whose eviction makes the pod fit the
// node. It leaves them in c.scratch.chosen and returns how many pods they are and the last
// candidate taken, or ok false when evicting everything allowed is not enough. When beat is set
// (the best node so far needs a single pod), a node whose best candidate does not rank before
// beat cannot win and is skipped before any sorting or simulation.
//
// violations counts the chosen pods whose eviction violates a PodDisruptionBudget.
func (c *cycle) nodeVictims(n *snapshot.Node, t *snapshot.Task, g *snapshot.Gang, pol *victimPolicy, beat *cand) (pods, violations int, last cand, ok bool) {
	sc := &c.scratch
	sc.cands = sc.cands[:0]
	sc.budgets = sc.budgets[:0]
	top := -1
	for _, v := range n.Tasks {
		if v.State != snapshot.TaskBound || v.Gang == nil || v.Gang == g || v.Gang.Assumed > 0 || v.GPUs.Loan {
			// Gangs whose binding is in flight are not victims; neither are loans: evicting one
			// frees no share of its GPU, and it leaves anyway when the GPU's holders wake.
			continue
		}
		if r := pol.verdict(v.Gang); r.kind != refuseNone {
			pol.refuse(r, v.Gang, 1, false)
			continue
		}
		if pol.spared && c.snap.EvictedFor(pol.beneficiary.Key, v.Key) {
			pol.sparedHit = true
			pol.refuse(refusal{kind: refuseEvictedBefore}, v.Gang, 1, false)
			continue
		}
		key := pol.key(v)
		if len(v.Budgets) > 0 {
			if b := blockedBudget(v, c.now); b != nil {
				if !pol.overrideBudgets {
					pol.refuse(refusal{kind: refuseBudget, budget: b}, v.Gang, 1, false)
					continue
				}
				key.violates = true
			} else {
				key.violates = violatesBudget(v, sc.budgets)
			}
		}
		sc.cands = append(sc.cands, cand{t: v, key: key})
		if top < 0 || compareCands(sc.cands[len(sc.cands)-1], sc.cands[top]) < 0 {
			top = len(sc.cands) - 1
		}
	}
	if len(sc.cands) == 0 || (beat != nil && compareCands(sc.cands[top], *beat) >= 0) {
		return 0, 0, cand{}, false
	}
	// Insertion sort: a node's pods are few, and this allocates nothing.
	for i := 1; i < len(sc.cands); i++ {
		for j := i; j > 0 && compareCands(sc.cands[j], sc.cands[j-1]) < 0; j-- {
			sc.cands[j], sc.cands[j-1] = sc.cands[j-1], sc.cands[j]
		}
	}
	room := c.roomOf(n, g)
	sc.acc.reset()
	sc.chosen = sc.chosen[:0]
	sc.moving = sc.moving[:0]
	for _, cd := range sc.cands {
		if slices.Contains(sc.chosen, cd.t) {
			continue
		}
		start := len(sc.chosen)
		sc.chosen = appendUnit(sc.chosen, cd.t)
		unit := sc.chosen[start:]
		if len(unit) > 1 && pol.spared && c.spares(pol.beneficiary, unit) {
			pol.sparedHit = true
			pol.refuse(refusal{kind: refuseEvictedBefore}, cd.t.Gang, len(unit), true)
			sc.chosen = sc.chosen[:start]
			continue
		}
		if !room.helps(unit, &t.Req) {
			sc.chosen = sc.chosen[:start]
			continue
		}
		moving := false
		if pol.allow != nil {
			if r := pol.allow(unit, &sc.acc); r.kind != refuseNone {
				if pol.move == nil || !pol.move(unit) {
					pol.refuse(r, cd.t.Gang, len(unit), true)
					sc.chosen = sc.chosen[:start]
					continue
				}
				// A move keeps its pods' budgets: one the API server would refuse is no move.
				if b := moveBudget(unit, sc.budgets, c.now); b != nil {
					pol.refuse(refusal{kind: refuseMoveBudget, q: r.q, d: r.d, base: r.kind, budget: b}, cd.t.Gang, len(unit), true)
					sc.chosen = sc.chosen[:start]
					continue
				}
				moving = true // it comes back elsewhere: its queue gives nothing up
				sc.moving = append(sc.moving, unit...)
			}
		}
		if !moving {
			sc.acc.add(unit)
		}
		for _, u := range unit {
			room.free(u)
		}
		var v int
		sc.budgets, v = takeBudgets(sc.budgets, unit)
		violations += v
		if room.fits(&t.Req) {
			return len(sc.chosen), violations, cd, true
		}
	}
	return 0, 0, cand{}, false
}

// makeRoom evicts, on the best node, the units that make the pod fit, and returns the node and
// GPUs for the pod (see the file comment). When nothing works it searches again counting why,
// for the gang's reason.
func (c *cycle) makeRoom(t *snapshot.Task, g *snapshot.Gang, restrict bitset.Set, pol *victimPolicy) (*snapshot.Node, snapshot.Assignment, bool) {
	n, a, ok := c.searchRoom(t, g, restrict, pol)
	if !ok {
		pol.tally = true
		pol.resetRefusals()
		c.searchRoom(t, g, restrict, pol)
		pol.tally = false
	}
	return n, a, ok
}

// searchRoom is one search of makeRoom: the nodes of pol's sources (all nodes without), each
// skipped when evicting there could not free what the pod needs, compared by the victims they
// need; the best node's victims are evicted.
func (c *cycle) searchRoom(t *snapshot.Task, g *snapshot.Gang, restrict bitset.Set, pol *victimPolicy) (*snapshot.Node, snapshot.Assignment, bool) {
	pol.spared = !pol.noSpare && c.snap.EvictedForAny(pol.beneficiary.Key)
	cls := c.snap.ClassNodes(t.Class)
	nodes := c.snap.Nodes()
	need := t.PendingGPU()
	if t.Req.WholeGPUs > 0 {
		need = t.Req.WholeGPUs * snapshot.MilliPerGPU
	}
	typeChecked := map[int]bool{}
	var best *snapshot.Node
	bestPods, bestViolations := 0, 0
	var bestLast cand
	compared := 0
	var heads []int64
	if pol.headroom != nil {
		var total int64
		for _, q := range pol.victimQueues {
			h := pol.headroom(q)
			heads = append(heads, h)
			total = satAdd(total, h)
		}
		// No node can take the pod unless the queues can give what the roomiest node lacks.
		if lack := need - c.maxFreeAfterRelease(cls, restrict); need > 0 && total < lack {
			if len(pol.victimQueues) > 0 && pol.tally {
				pol.exhausted = exhaustedDetail(pol.victimQueues, heads, lack)
				pol.refuse(refusal{kind: refuseExhausted}, nil, 0, false)
			}
			return nil, snapshot.Assignment{}, false
		}
	}
	visited := c.scratch.visited
	if n := (len(nodes) + 63) / 64; len(visited) < n {
		visited = make(bitset.Set, n)
	}
	visited.Clear()
	c.scratch.visited = visited
	scan := func(set bitset.Set) {
		for id := bitset.NextAnd(set, cls, restrict, 0); id >= 0 && (best == nil || compared < maxCompared); id = bitset.NextAnd(set, cls, restrict, id+1) {
			if visited.Has(id) {
				continue
			}
			visited.Add(id)
			n := nodes[id]
			if policyFit(n, t, g) != Fits {
				// Evicting pods from a node the pod may not use would free nothing it can take.
				continue
			}
			if need > 0 {
				if int64(len(n.Slots))*snapshot.MilliPerGPU-(n.UsedMilliGPU-n.RelMilliGPU)+evictableOn(n, pol, heads) < need {
					continue
				}
				if n.TypeDim >= 0 {
					over, seen := typeChecked[n.TypeDim]
					if !seen {
						over = c.typeOverLimit(g, t, n.TypeDim)
						typeChecked[n.TypeDim] = over
					}
					if over {
						continue
					}
				}
			}
			var beat *cand
			if best != nil && bestPods == 1 && bestViolations == 0 {
				beat = &bestLast
			}
			compared++
			pods, violations, last, ok := c.nodeVictims(n, t, g, pol, beat)
			if !ok {
				continue
			}
			// Fewest PodDisruptionBudget violations first, as kube-scheduler picks its node.
			if best == nil || violations < bestViolations ||
				(violations == bestViolations && (pods < bestPods || (pods == bestPods && compareCands(last, bestLast) < 0))) {
				best, bestPods, bestViolations, bestLast = n, pods, violations, last
				c.scratch.best = append(c.scratch.best[:0], c.scratch.chosen...)
				c.scratch.bestMoving = append(c.scratch.bestMoving[:0], c.scratch.moving...)
			}
		}
	}
	if pol.sources == nil {
		scan(c.snap.AllNodes())
	}
	for _, set := range pol.sources {
		scan(set)
		if best != nil {
			break
		}
	}
	if best == nil {
		return nil, snapshot.Assignment{}, false
	}
	c.evictBest(pol)
	a, f := c.tryNode(best, t, g, true)
	if f != Fits {
		return nil, snapshot.Assignment{}, false // cannot happen: nodeRoom and tryNode agree
	}
	return best, a, true
}

// evictableOn is the GPU (milli) that pol's victim queues could free on n: each queue's
// preemptible GPU there, capped by what the queue may still give (heads, when set); a lone pod
// larger than that cannot go at all. Without victim queues, every preemptible GPU on n.
func evictableOn(n *snapshot.Node, pol *victimPolicy, heads []int64) int64 {
	if pol.victimQueues == nil {
		return n.PreemptibleMilliGPU
	}
	var evictable int64
	for i, q := range pol.victimQueues {
		on := q.PreemptibleMilliGPUOn(n.ID)
		if heads != nil && on > heads[i] {
			if q.PreemptibleGPUPodsOn(n.ID) == 1 {
				on = 0
			} else {
				on = heads[i]
			}
		}
		evictable += on
	}
	return evictable
}

// evictBest evicts the victims chosen on the best node (c.scratch.best): the movable ones as
// moves, the others through pol.
func (c *cycle) evictBest(pol *victimPolicy) {
	for _, v := range c.scratch.best {
		if v.State != snapshot.TaskBound {
			continue
		}
		if slices.Contains(c.scratch.bestMoving, v) {
			c.stmt.Evict(v, EvictConsolidate, pol.moveMessage(v), &pol.beneficiary.Key)
			pol.moved = append(pol.moved, v)
			pol.evicted = append(pol.evicted, v)
		} else {
			c.evictVictim(v, pol)
		}
	}
}

// lostFormat picks the message format of an eviction: lost, ending with NotRecreatedNote, when
// nothing recreates the pod (its event and DisruptionTarget condition are all its owner will
// see), else format. Choosing between two constant formats costs no allocation.
func lostFormat(v *snapshot.Task, format, lost string) string {
	if v.Recreatable {
		return format
	}
	return lost
}

// notRecreatedSuffix is NotRecreatedNote as a message ending; it holds no formatting verb.
const notRecreatedSuffix = "; " + NotRecreatedNote

// evictVictim evicts a victim the policy chose (not a move), counting it when its eviction
// violates a PodDisruptionBudget; when the policy overrides budgets, the eviction carries the
// budget it goes ahead against and its message names it.
func (c *cycle) evictVictim(v *snapshot.Task, pol *victimPolicy) {
	var b *snapshot.Budget
	if len(v.Budgets) > 0 {
		b = violatedBudget(v, c.now)
	}
	if b != nil {
		pol.violations++
	}
	if b != nil && pol.overrideBudgets {
		c.stmt.EvictOverridingBudget(v, pol.reason, pol.message(v)+"; PodDisruptionBudget "+b.Key.String()+
			" is overridden: the guaranteed quota it delayed is owed for longer than the claimant queue's reclaim.budgetTimeout",
			&pol.beneficiary.Key, b)
	} else {
		c.stmt.Evict(v, pol.reason, pol.message(v), &pol.beneficiary.Key)
	}
	pol.evicted = append(pol.evicted, v)
}
