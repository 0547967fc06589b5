package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// This file holds the placement machinery every step shares: which pods of a gang to place and
// in which order, topology domains, and the node search.

// placeMode says how a what-if places pods.
type placeMode struct {
	// afterRelease sees the capacity releasing pods will free (reclaim and friends); allocation
	// sees only what is free now.
	afterRelease bool
	// victims, when set, may evict pods to make room for a pod that fits nowhere.
	victims *victimPolicy
	// minimalOnly places only the pods the gang needs to start (or one more pod of a running
	// elastic gang), not every pending pod.
	minimalOnly bool
}

// placeFailure is why a gang could not be placed.
type placeFailure struct {
	code ReasonCode
	msg  string
	// capacity is true when more free capacity could help (so reclaim, preemption or
	// consolidation are worth trying); false for limits, quotas and malformed requests.
	capacity bool
	// pod is the key the message names, for reuse of cached failures.
	pod string
	// refusal is the end of msg from the victims the what-if refused ("no eviction makes room:
	// ..." and why the pod still does not fit), "" when it refused none: preemption tells it.
	refusal string
	// nodes is the end of msg that says why the pod does not fit the nodes, when msg also tells
	// what a what-if's victims did; "" otherwise. A later step saying the same is not repeated.
	nodes string
}

// planTasks returns the gang's placeable pending pods in placement order, how many must be
// placed together for the gang to run, and how many of the first pods make up that minimal set
// (sub-group minimums first).
func (c *cycle) planTasks(g *snapshot.Gang) (tasks []*snapshot.Task, need, minimal int) {
	for _, t := range g.Pending {
		if t.Placeable() {
			tasks = append(tasks, t)
		}
	}
	slices.SortFunc(tasks, func(a, b *snapshot.Task) int {
		if c := strings.Compare(a.SubGroup, b.SubGroup); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return naturalCompare(a.Key.Name, b.Key.Name)
	})
	need = max(0, int(g.MinMember-g.Bound-g.Succeeded))
	if len(g.SubGroups) == 0 {
		return tasks, need, min(need, len(tasks))
	}
	ordered := make([]*snapshot.Task, 0, len(tasks))
	taken := make(map[*snapshot.Task]bool)
	for _, sg := range g.SubGroups {
		want := int(sg.MinMember) - c.boundIn(g, sg.Name)
		for _, t := range tasks {
			if want <= 0 {
				break
			}
			if t.SubGroup == sg.Name {
				ordered = append(ordered, t)
				taken[t] = true
				want--
			}
		}
	}
	for _, t := range tasks {
		if len(ordered) >= need {
			break
		}
		if !taken[t] {
			ordered = append(ordered, t)
			taken[t] = true
		}
	}
	minimal = len(ordered)
	for _, t := range tasks {
		if !taken[t] {
			ordered = append(ordered, t)
		}
	}
	return ordered, max(need, minimal), minimal
}

func (c *cycle) boundIn(g *snapshot.Gang, subGroup string) int {
	n := 0
	for _, t := range g.Tasks {
		if t.State == snapshot.TaskBound && t.SubGroup == subGroup {
			n++
		}
	}
	return n
}

// subGroupsMet reports whether every sub-group has at least its minimum bound.
func (c *cycle) subGroupsMet(g *snapshot.Gang) bool {
	for _, sg := range g.SubGroups {
		if c.boundIn(g, sg.Name) < int(sg.MinMember) {
			return false
		}
	}
	return true
}

// placeGang places the gang's pending pods: at least what it needs to run, all or nothing. It
// returns how many pods it placed; on failure the statement is where it was.
func (c *cycle) placeGang(g *snapshot.Gang, m placeMode) (int, *placeFailure) {
	tasks, need, minimal := c.planTasks(g)
	if len(tasks) == 0 {
		return 0, &placeFailure{code: ReasonWaitingForPods, msg: "no pod of the gang can be placed"}
	}
	if m.minimalOnly {
		tasks = tasks[:max(minimal, 1)]
	}
	level := g.Topology.Required
	required := level != ""
	if !required {
		level = g.Topology.Preferred
	}
	if level == "" {
		return c.placeSets(g, tasks, need, nil, m)
	}
	doms := c.snap.Domains(level)
	var order []int
	if d := runningDomain(g, doms, "", false); d >= 0 {
		order = []int{d}
	} else {
		order = domainOrder(c.snap, doms, c.snap.ClassNodes(tasks[0].Class), c.sumGPU(tasks), c.sumGPU(tasks[:max(minimal, 1)]), m.afterRelease)
	}
	var last *placeFailure
	for _, d := range order {
		placed, fail := c.placeSets(g, tasks, need, doms.Nodes[d], m)
		if fail == nil {
			return placed, nil
		}
		last = fail
	}
	if !required {
		return c.placeSets(g, tasks, need, nil, m)
	}
	msg := fmt.Sprintf("no %s domain can take the %s the gang needs together (%s with enough free GPUs tried)", level, count(max(need, 1), "pod", "pods"), count(len(order), "domain", "domains"))
	if all := TightestDomains(c.snap, doms, c.snap.ClassNodes(tasks[0].Class), 0, m.afterRelease); len(order) == 0 && len(all) > 0 {
		largest := all[len(all)-1]
		they := "they need"
		if max(need, 1) == 1 {
			they = "it needs"
		}
		msg = fmt.Sprintf("no %s domain can take the %s the gang needs together: %s %s and the most any domain has free is %s (%s)",
			level, count(max(need, 1), "pod", "pods"), they, gpus(c.sumGPU(tasks[:max(minimal, 1)])),
			snapshot.FormatAmount(snapshot.DimGPU, c.domainFree(doms, largest, tasks[0].Class, m.afterRelease)), doms.Values[largest])
	}
	if len(doms.Values) == 0 {
		msg = fmt.Sprintf("no node has the topology label %s the gang requires", level)
	}
	f := &placeFailure{code: ReasonTopology, msg: msg, capacity: len(doms.Values) > 0}
	if last != nil {
		f.msg += "; in the tightest one: " + last.msg
		f.refusal, f.nodes = last.refusal, last.nodes
	}
	return 0, f
}

// domainFree is the GPU capacity free in one domain on nodes of the class.
func (c *cycle) domainFree(doms *snapshot.Domains, d int, cls *snapshot.FilterClass, afterRelease bool) int64 {
	var free int64
	nodes := c.snap.Nodes()
	set := c.snap.ClassNodes(cls)
	for id := bitset.NextAnd(doms.Nodes[d], set, nil, 0); id >= 0; id = bitset.NextAnd(doms.Nodes[d], set, nil, id+1) {
		free += freeMilliGPU(nodes[id], afterRelease)
	}
	return free
}

// freeMilliGPU is the GPU capacity of a node that no pod uses and no hold keeps, counting what
// releasing pods free when afterRelease is set (the what-ifs of reclaim and preemption).
func freeMilliGPU(n *snapshot.Node, afterRelease bool) int64 {
	used := n.UsedMilliGPU
	if afterRelease {
		used -= n.RelMilliGPU
	}
	return int64(len(n.Slots))*snapshot.MilliPerGPU - used - n.HeldWhole*snapshot.MilliPerGPU
}

// naturalCompare orders names with numbers in numeric order: worker-2 before worker-10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		ad, bd := digitsPrefix(a), digitsPrefix(b)
		if ad > 0 && bd > 0 {
			an, bn := strings.TrimLeft(a[:ad], "0"), strings.TrimLeft(b[:bd], "0")
			if len(an) != len(bn) {
				return cmp.Compare(len(an), len(bn))
			}
			if c := strings.Compare(an, bn); c != 0 {
				return c
			}
			a, b = a[ad:], b[bd:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func (c *cycle) sumGPU(tasks []*snapshot.Task) int64 {
	var sum int64
	for _, t := range tasks {
		sum += t.PendingGPU()
	}
	return sum
}

// placeSets places tasks within restrict (nil: anywhere), giving sub-groups with a topology
// constraint one domain each. All or nothing: on failure it rolls back.
func (c *cycle) placeSets(g *snapshot.Gang, tasks []*snapshot.Task, need int, restrict bitset.Set, m placeMode) (int, *placeFailure) {
	cp := c.stmt.Checkpoint()
	placed := 0
	var firstFail *placeFailure
	rest := tasks
	for _, sg := range g.SubGroups {
		if sg.Topology.Required == "" {
			continue
		}
		var mine []*snapshot.Task
		mine, rest = split(rest, sg.Name)
		if len(mine) == 0 {
			continue
		}
		sgNeed := max(0, int(sg.MinMember)-c.boundIn(g, sg.Name))
		doms := c.snap.Domains(sg.Topology.Required)
		var order []int
		if d := runningDomain(g, doms, sg.Name, true); d >= 0 {
			order = []int{d}
		} else {
			order = domainOrder(c.snap, doms, and(c.snap.ClassNodes(mine[0].Class), restrict), c.sumGPU(mine), c.sumGPU(mine[:max(min(sgNeed, len(mine)), 1)]), m.afterRelease)
		}
		done := false
		for _, d := range order {
			cp2 := c.stmt.Checkpoint()
			n, ff := c.placeTasks(g, mine, sgNeed, and(restrict, doms.Nodes[d]), m)
			if n >= max(sgNeed, 1) {
				placed += n
				done = true
				break
			}
			if firstFail == nil {
				firstFail = ff
			}
			c.stmt.Rollback(cp2)
		}
		if !done {
			c.stmt.Rollback(cp)
			return 0, &placeFailure{code: ReasonTopology, capacity: true,
				msg: fmt.Sprintf("sub-group %s: no %s domain can take its %s together", sg.Name, sg.Topology.Required, count(max(sgNeed, 1), "pod", "pods"))}
		}
	}
	n, ff := c.placeTasks(g, rest, max(0, need-placed), restrict, m)
	placed += n
	if firstFail == nil {
		firstFail = ff
	}
	if placed == 0 || placed < need || !c.subGroupsMet(g) {
		f := gangFailure(firstFail, need, placed)
		if placed >= need && placed > 0 {
			f = subGroupFailure(c.unmetSubGroup(g), firstFail)
		}
		c.stmt.Rollback(cp)
		return 0, f
	}
	return placed, nil
}

// unmetSubGroup is the first sub-group with fewer than its minimum bound.
func (c *cycle) unmetSubGroup(g *snapshot.Gang) snapshot.SubGroup {
	for _, sg := range g.SubGroups {
		if c.boundIn(g, sg.Name) < int(sg.MinMember) {
			return sg
		}
	}
	return snapshot.SubGroup{}
}

// subGroupFailure says that enough pods fit but not those of a sub-group the gang cannot start
// without (a Ray head), followed by the first failure of the placement.
func subGroupFailure(sg snapshot.SubGroup, f *placeFailure) *placeFailure {
	out := placeFailure{code: ReasonNoNodeFits, capacity: true}
	if f != nil {
		out = *f
	}
	if sg.MinMember == 1 {
		out.msg = fmt.Sprintf("the gang cannot start without the pod of its sub-group %s and it does not fit", sg.Name)
	} else {
		out.msg = fmt.Sprintf("the gang cannot start without %d pods of its sub-group %s and they do not fit", sg.MinMember, sg.Name)
	}
	if f != nil {
		out.msg += "; " + f.msg
	}
	return &out
}

func split(tasks []*snapshot.Task, subGroup string) (mine, rest []*snapshot.Task) {
	for _, t := range tasks {
		if t.SubGroup == subGroup {
			mine = append(mine, t)
		} else {
			rest = append(rest, t)
		}
	}
	return mine, rest
}

// placeTasks places as many of the tasks as fit, in order, and returns how many it placed and
// why the first task that did not fit failed (explained at that moment, before any rollback).
// It stops early once need can no longer be reached. It does not roll back.
func (c *cycle) placeTasks(g *snapshot.Gang, tasks []*snapshot.Task, need int, restrict bitset.Set, m placeMode) (int, *placeFailure) {
	placed := 0
	var first *placeFailure
	var lastFail *snapshot.Task
	// A gang that holds capacity (nominated earlier) looks there first: a new what-if must not
	// leave capacity already being freed for it, which a victim's recreated pod would take back.
	var held bitset.Set
	if m.afterRelease && len(g.Holds()) > 0 {
		held = c.scratch.heldNodes
		held.Clear()
		for _, h := range g.Holds() {
			held.Add(h.Node.ID)
		}
		c.scratch.heldNodes = held
		if restrict != nil {
			held = and(held, restrict)
		}
	}
	for i, t := range tasks {
		if placed+len(tasks)-i < need {
			break
		}
		if lastFail != nil && sameRequest(lastFail, t) {
			continue // capacity only shrinks while a gang is placed: an identical pod fails too
		}
		if f := c.podOverLimit(g, t); f != nil {
			if first == nil {
				first = f
			}
			lastFail = t
			continue
		}
		var n *snapshot.Node
		var a snapshot.Assignment
		ok := false
		if held != nil {
			n, a, ok = c.findNode(t, g, held, true)
		}
		if !ok {
			n, a, ok = c.findNode(t, g, restrict, m.afterRelease)
		}
		if !ok && m.victims != nil {
			n, a, ok = c.makeRoom(t, g, restrict, m.victims)
		}
		if !ok {
			if first == nil {
				first = &placeFailure{code: whyCode(m.victims), msg: c.explain(t, g, restrict, m.afterRelease), capacity: true}
				if why := c.why(m.victims); why != "" {
					first.nodes = first.msg
					first.msg = why + "; " + first.msg
					if why != m.victims.none { // else the policy had nowhere to look
						first.refusal = first.msg
					}
				}
			}
			lastFail = t
			continue
		}
		c.stmt.Allocate(t, n, a)
		placed++
	}
	return placed, first
}

// sameRequest reports whether two pods ask for the same thing under the same constraints.
func sameRequest(a, b *snapshot.Task) bool {
	return a.Class == b.Class && a.Req.MilliCPU == b.Req.MilliCPU && a.Req.Memory == b.Req.Memory &&
		a.Req.WholeGPUs == b.Req.WholeGPUs && a.Req.FractionMilli == b.Req.FractionMilli &&
		a.Req.GPUMemoryMiB == b.Req.GPUMemoryMiB && len(a.Req.Scalars) == 0 && len(b.Req.Scalars) == 0 &&
		len(a.Req.HostPorts) == 0 && len(b.Req.HostPorts) == 0 && !a.Req.DRA && !b.Req.DRA
}

// gangFailure wraps the first pod's failure with the gang's count. placed counts the pods placed
// before placement gave up, not the most that could fit: placement stops as soon as the minimum
// is out of reach, so the message must not claim more.
func gangFailure(f *placeFailure, need, placed int) *placeFailure {
	if f == nil {
		return &placeFailure{code: ReasonNoNodeFits, capacity: true, msg: "the gang's sub-group minimums cannot be met"}
	}
	out := *f
	if need > 1 {
		out.msg = fmt.Sprintf("the gang needs %d pods placed together and they do not all fit (%d placed before one failed); %s", need, placed, f.msg)
	}
	return &out
}

// findNode returns the node (and GPUs) a pod goes to, following the placement strategy:
// bin-packing takes the node with the fewest free GPUs that fits, spreading the most; fractions
// go to nodes that already share a GPU with room first; pods without GPUs go to nodes without
// GPUs first. Candidates are walked as set bits of the node indexes, so a search costs a few
// word operations per 64 nodes that cannot fit.
func (c *cycle) findNode(t *snapshot.Task, g *snapshot.Gang, restrict bitset.Set, afterRelease bool) (*snapshot.Node, snapshot.Assignment, bool) {
	cls := c.snap.ClassNodes(t.Class)
	if afterRelease {
		return c.findNodeAfterRelease(t, g, and(cls, restrict))
	}
	nodes := c.snap.Nodes()
	try := func(set bitset.Set) (*snapshot.Node, snapshot.Assignment, bool) {
		for id := bitset.NextAnd(set, cls, restrict, 0); id >= 0; id = bitset.NextAnd(set, cls, restrict, id+1) {
			n := nodes[id]
			if a, f := c.tryNode(n, t, g, false); f == Fits {
				return n, a, true
			}
		}
		return nil, snapshot.Assignment{}, false
	}
	switch c.e.opts.Placement {
	case FirstFit:
		return try(c.snap.AllNodes())
	case BinPack:
		if t.Req.GPUMemoryMiB == 0 {
			if m := c.e.fragModelFor(c.snap); m != nil {
				return c.findNodeFrag(m, t, g, cls, restrict)
			}
		}
	}
	spread := c.e.opts.Placement == Spread
	buckets := func(from int) (*snapshot.Node, snapshot.Assignment, bool) {
		maxK := c.snap.MaxFreeGPUs()
		if spread {
			for k := maxK; k >= from; k-- {
				if n, a, ok := try(c.snap.NodesWithFreeGPUs(k)); ok {
					return n, a, ok
				}
			}
			return nil, snapshot.Assignment{}, false
		}
		for k := from; k <= maxK; k++ {
			if n, a, ok := try(c.snap.NodesWithFreeGPUs(k)); ok {
				return n, a, ok
			}
		}
		return nil, snapshot.Assignment{}, false
	}
	switch r := &t.Req; {
	case r.WholeGPUs > 0:
		return buckets(int(r.WholeGPUs))
	case r.Shared():
		if n, a, ok := try(c.snap.NodesWithSharedRoom()); ok {
			return n, a, ok
		}
		return buckets(1)
	default:
		if n, a, ok := try(c.snap.CPUOnlyNodes()); ok {
			return n, a, ok
		}
		return buckets(0)
	}
}

// findNodeAfterRelease is findNode's what-if form: it sees releasing pods as gone and scores
// the candidates by their free GPUs after release. A node can take the pod only if pods are
// leaving it or it could take it now, so for GPU pods only the nodes with pods leaving and the
// free-GPU index's candidates are searched.
func (c *cycle) findNodeAfterRelease(t *snapshot.Task, g *snapshot.Gang, cand bitset.Set) (*snapshot.Node, snapshot.Assignment, bool) {
	nodes := c.snap.Nodes()
	spread := c.e.opts.Placement == Spread
	var best *snapshot.Node
	var bestA snapshot.Assignment
	bestScore := int64(0)
	consider := func(id int) bool {
		n := nodes[id]
		a, f := c.tryNode(n, t, g, true)
		if f != Fits {
			return false
		}
		score := n.FreeWholeSlotsAfterRelease()
		if spread {
			score = -score
		}
		if best == nil || score < bestScore || (score == bestScore && n.ID < best.ID) {
			best, bestA, bestScore = n, a, score
			return !spread && score == t.Req.WholeGPUs // exact fit: nothing packs tighter
		}
		return false
	}
	walk := func(set bitset.Set) bool {
		for id := bitset.NextAnd(set, cand, nil, 0); id >= 0; id = bitset.NextAnd(set, cand, nil, id+1) {
			if consider(id) {
				return true
			}
		}
		return false
	}
	if !t.Req.GPU() {
		walk(c.snap.AllNodes())
		return best, bestA, best != nil
	}
	if walk(c.snap.NodesReleasing()) {
		return best, bestA, true
	}
	from := int(t.Req.WholeGPUs)
	if t.Req.Shared() {
		walk(c.snap.NodesWithSharedRoom())
		from = 1
	}
	for k := from; k <= c.snap.MaxFreeGPUs(); k++ {
		if walk(c.snap.NodesWithFreeGPUs(k)) {
			break
		}
	}
	return best, bestA, best != nil
}

// tryNode checks one node for one pod of gang g and picks its GPUs.
func (c *cycle) tryNode(n *snapshot.Node, t *snapshot.Task, g *snapshot.Gang, afterRelease bool) (snapshot.Assignment, FitFailure) {
	if f := policyFit(n, t, g); f != Fits {
		return snapshot.Assignment{}, f
	}
	if t.Req.GPU() && n.TypeDim >= 0 && !t.IsShadow() && c.typeOverLimit(g, t, n.TypeDim) {
		return snapshot.Assignment{}, FailGPUType
	}
	if f := FitsNode(n, &t.Req, g, afterRelease); f != Fits {
		return snapshot.Assignment{}, f
	}
	if c.noShares(n, &t.Req) {
		return snapshot.Assignment{}, FailNoInventory
	}
	if f := draKindFit(n, &t.Req); f != Fits {
		return snapshot.Assignment{}, f
	}
	_, heldWhole := heldByOthers(n, g, afterRelease)
	var pinned uint64
	if n.HeldWhole > 0 || n.Held.Pods > 0 {
		pinned = n.PinnedByOthers(g)
	}
	a, f := pickGPUs(n, &t.Req, afterRelease, heldWhole, pinned)
	if f == Fits && t.Req.DRA {
		f = c.draPick(n, t, &a, afterRelease)
	}
	if f == Fits && (t.Req.GPUMemoryMiB > 0 || (t.Req.DRA && a.Shared >= 0)) && !t.IsShadow() {
		// A GPU-memory request costs more of a smaller GPU than its estimate, and a claim for a
		// partition of a GPU may get a larger one than its estimate (the smallest): check the
		// limits with what it takes here.
		if actual := a.MilliGPU(); actual > t.PendingGPU() {
			if c.chainOverLimit(g, snapshot.DimGPU, actual, "") != nil || (n.TypeDim >= 0 && c.chainOverLimit(g, n.TypeDim, actual, "") != nil) {
				return snapshot.Assignment{}, FailGPUType
			}
		}
	}
	return a, f
}

// classFit is what FilterClass.Matches says of each node for class cl, by node ID (FitOK for
// IDs of no node), computed once a cycle (cycle.classFits).
func (c *cycle) classFit(cl *snapshot.FilterClass) []snapshot.FitCode {
	if codes, ok := c.classFits[cl]; ok {
		return codes
	}
	nodes := c.snap.Nodes()
	codes := make([]snapshot.FitCode, len(nodes))
	for _, n := range nodes {
		if n != nil {
			codes[n.ID], _ = cl.Matches(n)
		}
	}
	if c.classFits == nil {
		c.classFits = map[*snapshot.FilterClass][]snapshot.FitCode{}
	}
	c.classFits[cl] = codes
	return codes
}

// explain says why no node fits a pod: "0/12 nodes fit pod ns/p (8 GPU, 1 CPU, 1Gi memory): 6
// not enough free GPUs, 4 untolerated taint (dedicated=infer:NoSchedule), ...".
func (c *cycle) explain(t *snapshot.Task, g *snapshot.Gang, restrict bitset.Set, afterRelease bool) string {
	var counts [numFitFailures]int
	held := 0
	example := ""
	total := 0
	fits := c.classFit(t.Class)
	for _, n := range c.snap.Nodes() {
		if n == nil {
			continue
		}
		total++
		f := Fits
		switch fits[n.ID] {
		case snapshot.FitUnschedulable:
			f = FailCordoned
		case snapshot.FitTaint:
			f = FailTaint
			if example == "" {
				_, example = t.Class.Matches(n)
			}
		case snapshot.FitAffinity:
			f = FailAffinity
		}
		if f == Fits && restrict != nil && !restrict.Has(n.ID) {
			f = FailDomain
		}
		if f == Fits {
			_, f = c.tryNode(n, t, g, afterRelease)
			if f != Fits && f != FailGPUType && f != FailPolicyGPUType && f != FailPolicyCPUOnGPU && (n.HeldWhole > 0 || n.Held.Pods > 0) && c.fitsIgnoringHolds(n, t, afterRelease) {
				held++
				continue
			}
		}
		counts[f]++
	}
	// "on 4 nodes: not enough free GPUs (1 needed)", most nodes first.
	type part struct {
		nodes int
		text  string
	}
	var parts []part
	for f := FitFailure(1); f < numFitFailures; f++ {
		if counts[f] == 0 {
			continue
		}
		p := "on " + count(counts[f], "node", "nodes") + ": " + f.String()
		if f == FailTaint && example != "" {
			p += " (" + example + ")"
		}
		if pol := g.Queue.Policy(t.Kind); pol != nil {
			switch f {
			case FailPolicyGPUType:
				p += fmt.Sprintf(" (%s allows %s)", pol.Describe(v1alpha1.RuleGPUTypes), pol.GPUTypesText())
			case FailPolicyCPUOnGPU:
				p += " (set " + v1alpha1.RuleCPUOnGPUNodes + " in the policy to allow it)"
			}
		}
		if f == FailTooFewGPUs || f == FailGPUs {
			p += fmt.Sprintf(" (%d needed)", t.Req.WholeGPUs)
		}
		parts = append(parts, part{counts[f], p})
	}
	if held > 0 {
		parts = append(parts, part{held, "on " + count(held, "node", "nodes") + ": capacity held for other gangs"})
	}
	slices.SortStableFunc(parts, func(a, b part) int { return cmp.Compare(b.nodes, a.nodes) })
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.text
	}
	when := ""
	if afterRelease {
		when = " even after evictions in progress"
	}
	return fmt.Sprintf("0/%d nodes fit pod %s (%s)%s: %s", total, t.Key, t.Req.String(), when, strings.Join(texts, ", "))
}

func (c *cycle) fitsIgnoringHolds(n *snapshot.Node, t *snapshot.Task, afterRelease bool) bool {
	if fitsNode(n, &t.Req, snapshot.NodeResources{}, afterRelease) != Fits {
		return false
	}
	_, f := PickGPUs(n, &t.Req, afterRelease, 0)
	return f == Fits && !c.noShares(n, &t.Req)
}

// noShares reports whether a fractional request may not go to the node because it publishes no
// GPU inventory (Options.SharesNeedInventory).
func (c *cycle) noShares(n *snapshot.Node, r *snapshot.Request) bool {
	return c.e.opts.SharesNeedInventory && r.Shared() && !r.DRA && !n.Inventory
}

// policyFit applies the policy of the gang's queue for the pod's kind to one node: a GPU pod
// goes only to the GPU types the policy allows, and a pod without GPUs goes to GPU nodes only
// when the policy lets it (v1alpha1.QueuePolicy). Reservations and shadows follow their gang's
// pods, which were checked.
func policyFit(n *snapshot.Node, t *snapshot.Task, g *snapshot.Gang) FitFailure {
	pol := g.Queue.Policy(t.Kind)
	if pol == nil || t.IsShadow() || t.Req.Reservation {
		return Fits
	}
	if t.Req.GPU() {
		// A node without GPUs is refused for that, not for its (absent) type.
		if len(n.Slots) > 0 && !pol.AllowsGPUType(n.GPUType) {
			return FailPolicyGPUType
		}
	} else if !pol.CPUOnGPUNodes && len(n.Slots) > 0 {
		return FailPolicyCPUOnGPU
	}
	return Fits
}
