package engine

import (
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Fragmentation-aware placement. A GPU left partly used is worth only what future requests can
// still use of it: 0.3 of a GPU is lost to a cluster whose pods ask for halves, and so is a free
// GPU on a node whose CPUs are all taken. The expected fragmentation of a node is, over the
// requests the cluster has seen (Snapshot.Demands, weighted by how many pods asked for each),
// the GPU capacity free on the node that such a request could not use there: all of it when the
// request does not fit the node at all (its node constraints, its CPU, or too few GPUs with room
// for its share), else the free part of each GPU too small for its share. Bin-packing places a
// pod that needs GPUs where its placement increases that expectation least, and among equal
// candidates keeps its former order (the fewest free GPUs first, node order within). This is
// the idea of Weng et al., "Beware of Fragmentation" (USENIX ATC'23), in fairway's terms.
//
// Scores are memoised by node state (which request classes the node can serve, where its free
// CPU falls among the requests' CPU sizes, and its GPUs' free shares), so a cycle costs a map
// lookup per candidate node; the weights are rebuilt when the demand has changed by more than
// a twentieth, which keeps the memo valid across cycles.

// fragTolerance is the free share of a GPU (milli-GPU) below which it counts as full: a
// leftover of a milli-GPU or two is the rounding of shares such as a third, not capacity lost.
const fragTolerance = 5

// fragGroup is the demand for one kind of GPU request, over its CPU sizes.
type fragGroup struct {
	class  *snapshot.FilterClass
	perGPU int64
	gpus   int64
	// cpus are the CPU sizes asked, ascending; cum[i] the weight of requests of at most cpus[i].
	cpus   []int64
	cum    []float64
	weight float64
	// member is the group's bit in a node's membership mask (its class index).
	member int
}

type fragKey struct {
	member  uint64
	cpuRank int32
	n       int32
	free    [8]int16
}

type fragModel struct {
	built   uint64
	pods    int64
	groups  []fragGroup
	classes []*snapshot.FilterClass
	// cpus are all CPU sizes asked, ascending: a node's free CPU matters only by its rank here.
	cpus   []int64
	shares bool
	memo   map[fragKey]float64
	// members caches each node's class membership mask, valid while the node object is the same.
	members map[int]nodeMembers
}

type nodeMembers struct {
	obj  any
	mask uint64
}

// fragModelFor returns the model for the snapshot's demand, rebuilding it when the demand moved
// by more than a twentieth of the pods it was built from; nil when no pod asks for a share (then
// nothing fragments GPUs and bin-packing alone decides) or the classes are too many to track.
func (e *Engine) fragModelFor(snap *snapshot.Snapshot) *fragModel {
	m := e.frag
	if m != nil && m.built == snap.DemandVersion() {
		return m.usable()
	}
	demands := snap.Demands()
	var pods int64
	for _, n := range demands {
		pods += int64(n)
	}
	if m != nil && abs64(pods-m.pods)*20 <= m.pods && len(demands) > 0 {
		m.built = snap.DemandVersion()
		return m.usable()
	}
	m = &fragModel{built: snap.DemandVersion(), pods: pods, memo: make(map[fragKey]float64), members: make(map[int]nodeMembers)}
	e.frag = m
	// Sorted, so that class indexes, float sums and therefore ties come out the same every run
	// (map order is random). Every shape counts: leaving out the rarest 5% of pods, as the
	// paper's simulator does by default, lowered the openb allocation ratios by about 0.6 points.
	type entry struct {
		d snapshot.Demand
		n int32
	}
	entries := make([]entry, 0, len(demands))
	for d, n := range demands {
		entries = append(entries, entry{d, n})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		if c := strings.Compare(a.d.Class.Key(), b.d.Class.Key()); c != 0 {
			return c
		}
		if a.d.PerGPUMilli != b.d.PerGPUMilli {
			return int(a.d.PerGPUMilli - b.d.PerGPUMilli)
		}
		if a.d.GPUs != b.d.GPUs {
			return int(a.d.GPUs - b.d.GPUs)
		}
		return int(a.d.MilliCPU - b.d.MilliCPU)
	})
	type gk struct {
		class       *snapshot.FilterClass
		perGPU, gpu int64
	}
	byGroup := map[gk]map[int64]int32{}
	classIdx := map[*snapshot.FilterClass]int{}
	allCPU := map[int64]bool{}
	var groupOrder []gk
	for _, e := range entries {
		d, n := e.d, e.n
		if d.GPUs == 0 {
			continue // a pod without GPUs can use no GPU anywhere: the same everywhere
		}
		k := gk{d.Class, d.PerGPUMilli, d.GPUs}
		if byGroup[k] == nil {
			byGroup[k] = map[int64]int32{}
			groupOrder = append(groupOrder, k)
		}
		byGroup[k][d.MilliCPU] += n
		allCPU[d.MilliCPU] = true
		if _, ok := classIdx[d.Class]; !ok {
			classIdx[d.Class] = len(m.classes)
			m.classes = append(m.classes, d.Class)
		}
		if d.PerGPUMilli < snapshot.MilliPerGPU {
			m.shares = true
		}
	}
	for _, k := range groupOrder {
		cpus := byGroup[k]
		g := fragGroup{class: k.class, perGPU: k.perGPU, gpus: k.gpu, member: classIdx[k.class]}
		for c := range cpus {
			g.cpus = append(g.cpus, c)
		}
		slices.Sort(g.cpus)
		var sum float64
		for _, c := range g.cpus {
			sum += float64(cpus[c]) / float64(pods)
			g.cum = append(g.cum, sum)
		}
		g.weight = sum
		m.groups = append(m.groups, g)
	}
	// A fixed order keeps float sums, and so ties, the same from run to run.
	slices.SortFunc(m.groups, func(a, b fragGroup) int {
		if a.member != b.member {
			return a.member - b.member
		}
		if a.perGPU != b.perGPU {
			return int(a.perGPU - b.perGPU)
		}
		return int(a.gpus - b.gpus)
	})
	for c := range allCPU {
		m.cpus = append(m.cpus, c)
	}
	slices.Sort(m.cpus)
	return m.usable()
}

func (m *fragModel) usable() *fragModel {
	if m == nil || !m.shares || len(m.classes) > 64 {
		return nil
	}
	return m
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// membership is the mask of the model's classes whose pods may go to node n.
func (m *fragModel) membership(snap *snapshot.Snapshot, n *snapshot.Node) uint64 {
	if c, ok := m.members[n.ID]; ok && c.obj == any(n.Obj) {
		return c.mask
	}
	var mask uint64
	for i, cls := range m.classes {
		if snap.ClassNodes(cls).Has(n.ID) {
			mask |= 1 << i
		}
	}
	m.members[n.ID] = nodeMembers{obj: n.Obj, mask: mask}
	return mask
}

func slotFree(g *snapshot.GPUSlot) int64 {
	if g.Owners > 0 {
		return 0
	}
	if f := snapshot.MilliPerGPU - g.UsedMilli; f >= fragTolerance {
		return f
	}
	return 0
}

// delta is how much placing the pod on n with assignment a raises n's expected fragmentation.
func (m *fragModel) delta(snap *snapshot.Snapshot, n *snapshot.Node, req *snapshot.Request, a snapshot.Assignment, buf []int64) float64 {
	mask := m.membership(snap, n)
	before := buf[:0]
	for i := range n.Slots {
		before = append(before, slotFree(&n.Slots[i]))
	}
	after := append(buf[len(before):len(before)], before...)
	for _, i := range a.Whole {
		after[i] = 0
	}
	if a.Shared >= 0 {
		if after[a.Shared] -= a.Milli; after[a.Shared] < fragTolerance {
			after[a.Shared] = 0
		}
	}
	cpu := n.Allocatable.MilliCPU - n.Used.MilliCPU
	slices.Sort(before)
	slices.Sort(after)
	return m.frag(mask, cpu-req.MilliCPU, after) - m.frag(mask, cpu, before)
}

// frag is the expected fragmentation of a node state, memoised.
func (m *fragModel) frag(mask uint64, cpu int64, free []int64) float64 {
	rank, _ := slices.BinarySearch(m.cpus, cpu+1) // sizes <= cpu
	memo := len(free) <= 8
	var k fragKey
	if memo {
		k = fragKey{member: mask, cpuRank: int32(rank), n: int32(len(free))}
		for i, f := range free {
			k.free[i] = int16(f)
		}
		if v, ok := m.memo[k]; ok {
			return v
		}
	}
	var all int64
	for _, f := range free {
		all += f
	}
	var total float64
	for i := range m.groups {
		g := &m.groups[i]
		if mask&(1<<g.member) == 0 {
			total += g.weight * float64(all)
			continue
		}
		// free is sorted: the GPUs too small for the share come first.
		j, _ := slices.BinarySearch(free, g.perGPU)
		if int64(len(free)-j) < g.gpus {
			total += g.weight * float64(all)
			continue
		}
		var partial int64
		for _, f := range free[:j] {
			partial += f
		}
		c, _ := slices.BinarySearch(g.cpus, cpu+1)
		fit := 0.0
		if c > 0 {
			fit = g.cum[c-1]
		}
		total += fit*float64(partial) + (g.weight-fit)*float64(all)
	}
	if memo {
		if len(m.memo) > 1<<20 {
			clear(m.memo)
		}
		m.memo[k] = total
	}
	return total
}

// findNodeFrag is findNode's bin-packing when shares fragment GPUs: every node that fits is
// scored, in findNode's order (nodes with a shared GPU with room first for a share, then by
// fewest free GPUs), and the one whose placement raises the expected fragmentation least wins,
// among equals the one left with the least free GPU capacity, then the earliest. On a node, the GPUs are PickGPUs' choice (its rules are the
// contract shares rely on: the fullest shared GPU with room first). A pod without GPUs cannot lower the
// fragmentation, only raise it by taking CPU a GPU request needs, so it takes the first node
// where its placement raises nothing.
func (c *cycle) findNodeFrag(m *fragModel, t *snapshot.Task, g *snapshot.Gang, cls, restrict bitset.Set) (*snapshot.Node, snapshot.Assignment, bool) {
	nodes := c.snap.Nodes()
	var best *snapshot.Node
	var bestA snapshot.Assignment
	bestD := 0.0
	var buf [32]int64
	r := &t.Req
	bestFree := int64(0)
	take := func(n *snapshot.Node, a snapshot.Assignment) {
		d := m.delta(c.snap, n, r, a, buf[:0])
		if best != nil && d > bestD+1e-9 {
			return
		}
		free := freeMilliGPU(n, false) - a.MilliGPU()
		if best != nil && d > bestD-1e-9 && free >= bestFree {
			return // equal: the tighter node wins
		}
		best, bestA, bestD, bestFree = n, a, d, free
	}
	done := func() bool { return !r.GPU() && best != nil && bestD <= 1e-9 }
	consider := func(set bitset.Set) {
		for id := bitset.NextAnd(set, cls, restrict, 0); id >= 0 && !done(); id = bitset.NextAnd(set, cls, restrict, id+1) {
			n := nodes[id]
			a, f := c.tryNode(n, t, g, false)
			if f != Fits {
				continue
			}
			take(n, a)
		}
	}
	from := int(r.WholeGPUs)
	switch {
	case r.Shared():
		consider(c.snap.NodesWithSharedRoom())
		from = 1
	case !r.GPU():
		consider(c.snap.CPUOnlyNodes())
	}
	for k := from; k <= c.snap.MaxFreeGPUs() && !done(); k++ {
		consider(c.snap.NodesWithFreeGPUs(k))
	}
	return best, bestA, best != nil
}
