package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// report fills the result's reasons (one per gang that still has pods waiting) and queue status.
func (c *cycle) report() {
	res := c.res
	holders := map[*snapshot.Queue]string{}
	for _, q := range c.snap.Queues() {
		for _, g := range q.PendingGangs {
			r, ok := c.reasons[g]
			pending := 0
			for _, t := range g.Pending {
				if !t.Gated || t.Problem != nil {
					pending++
				}
			}
			if !ok {
				switch {
				case c.placed[g]:
					r = GangReason{Gang: g.Key, Queue: q.Name, Code: ReasonNoNodeFits,
						Message: fmt.Sprintf("the gang runs; %s for free capacity", count(len(g.Pending), "more of its pods waits", "more of its pods wait"))}
				default:
					r = GangReason{Gang: g.Key, Queue: q.Name, Code: ReasonNoNodeFits, Message: "not tried this cycle"}
				}
			}
			r.PendingPods = len(g.Pending)
			r.Message += c.foreignCompetition(g, r.Code)
			if r.Code == ReasonQueueLimit {
				r.Message += c.limitHolders(g, holders)
			}
			if g.Foreign != "" {
				// The queue the gang names does not take it: reported under no queue, so that
				// nothing counted per queue (metrics, dashboards) charges it to that queue.
				r.Queue = ""
			}
			res.Unschedulable = append(res.Unschedulable, r)
		}
	}
	slices.SortFunc(res.Unschedulable, func(a, b GangReason) int { return a.Gang.Compare(b.Gang) })
	res.Capacity = make(Amounts, len(c.e.fsCap))
	for d, v := range c.e.fsCap {
		put(res.Capacity, c.snap.DimName(d), v)
	}
	for _, q := range c.snap.Queues() {
		st := QueueStatus{
			Name: q.Name, FairShare: Amounts{}, Allocated: Amounts{}, AllocatedNonPreemptible: Amounts{},
			Requested: Amounts{}, Borrowed: Amounts{}, PendingPods: q.PendingPods,
			NotReadyReason: q.NotReadyReason, NotReady: q.NotReady,
		}
		if len(q.Loaned) > 0 {
			st.Loaned = Amounts{} // only queues that ever had loans: most cycles allocate nothing more
		}
		for d := 0; d < c.snap.NumDims(); d++ {
			name := c.snap.DimName(d)
			if d < snapshot.NumBaseDims || q.QuotaSet(d) {
				// Per-type shares mean something only for queues that set a quota per type.
				put(st.FairShare, name, q.FairShare.At(d))
			}
			// Loans show as allocated and borrowed: over-quota use that takes nothing from the
			// guarantee (the snapshot keeps them out of Allocated, which fair share reads).
			loaned := q.Loaned.At(d)
			put(st.Allocated, name, q.Allocated.At(d)+loaned)
			put(st.AllocatedNonPreemptible, name, q.AllocatedNP.At(d))
			put(st.Requested, name, q.Demand(d)+loaned)
			if loaned > 0 {
				st.Loaned[name] = loaned
			}
			if d < snapshot.NumBaseDims || q.QuotaSet(d) {
				put(st.Borrowed, name, max(q.Allocated.At(d)-q.Quota.At(d), 0)+loaned)
			}
		}
		res.Queues = append(res.Queues, st)
	}
}

func put(a Amounts, name string, v int64) {
	if v > 0 {
		a[name] = v
	}
}

// toldSet records, per gang, the parts its reason says, so that a later step does not say one
// again (appendReason). A gang's parts are a list linked through one slice, and the engine
// keeps the memory between cycles: a cycle that adds to thousands of reasons allocates nothing.
type toldSet struct {
	head  map[*snapshot.Gang]int // index in parts of the gang's latest part
	parts []toldPart
}

type toldPart struct {
	text string
	next int // the gang's previous part, -1 for none
}

// reset forgets everything, keeping the memory.
func (t *toldSet) reset() {
	if t.head == nil {
		t.head = make(map[*snapshot.Gang]int)
	}
	clear(t.head)
	clear(t.parts) // drop the texts, keep the capacity
	t.parts = t.parts[:0]
}

func (t *toldSet) has(g *snapshot.Gang) bool {
	_, ok := t.head[g]
	return ok
}

// forget drops what the gang's reason said (its reason was replaced).
func (t *toldSet) forget(g *snapshot.Gang) { delete(t.head, g) }

func (t *toldSet) add(g *snapshot.Gang, text string) {
	next, ok := t.head[g]
	if !ok {
		next = -1
	}
	t.parts = append(t.parts, toldPart{text: text, next: next})
	t.head[g] = len(t.parts) - 1
}

// said reports whether the gang's reason says text, as a whole part.
func (t *toldSet) said(g *snapshot.Gang, text string) bool {
	i, ok := t.head[g]
	for ok && i >= 0 {
		if t.parts[i].text == text {
			return true
		}
		i = t.parts[i].next
	}
	return false
}

// limitHolders says which gangs hold the limit that keeps a gang out: "; the limit is held by 3
// gangs: ns/a (2 GPU, priority 50), ...", the largest first, at most three named. Computed once
// per limited queue and cycle (cache); "" when no limit of the gang's queue or its ancestors is
// full for it.
func (c *cycle) limitHolders(g *snapshot.Gang, cache map[*snapshot.Queue]string) string {
	tasks, _, minimal := c.planTasks(g)
	if len(tasks) == 0 {
		return ""
	}
	set := tasks[:max(minimal, 1)]
	var x *snapshot.Queue
	for a := g.Queue; a != nil && x == nil; a = a.Parent {
		if c.overOwnLimit(a, g, set) {
			x = a
		}
	}
	if x == nil {
		return ""
	}
	if s, ok := cache[x]; ok {
		return s
	}
	type holder struct {
		g    *snapshot.Gang
		gpu  int64
		pods int
	}
	by := map[*snapshot.Gang]*holder{}
	for _, n := range c.snap.Nodes() {
		if n == nil {
			continue
		}
		for _, t := range n.Tasks {
			if t.Gang == nil || t.State != snapshot.TaskBound || !x.IsAncestorOf(t.Gang.Queue) {
				continue
			}
			h := by[t.Gang]
			if h == nil {
				h = &holder{g: t.Gang}
				by[t.Gang] = h
			}
			h.gpu += t.GPUs.MilliGPU()
			h.pods++
		}
	}
	hs := slices.Collect(maps.Values(by))
	slices.SortFunc(hs, func(a, b *holder) int {
		if c := cmp.Compare(b.gpu, a.gpu); c != 0 {
			return c
		}
		return a.g.Key.Compare(b.g.Key)
	})
	var parts []string
	for _, h := range hs[:min(3, len(hs))] {
		parts = append(parts, fmt.Sprintf("%s (%s, %s GPU, priority %d)", h.g.Key, count(h.pods, "pod", "pods"), snapshot.FormatAmount(snapshot.DimGPU, h.gpu), h.g.Priority))
	}
	s := ""
	if len(parts) > 0 {
		s = fmt.Sprintf("; queue %s's limit is held by %s: %s", x.Name, count(len(hs), "gang", "gangs"), strings.Join(parts, ", "))
		if len(hs) > 3 {
			s += ", ..."
		}
	}
	cache[x] = s
	return s
}

// gpuHolders says who holds the GPUs of the nodes a gang's pods may use, for the reason of a
// guarantee that no what-if could deliver: "the GPUs of the 2 nodes its pods may use are held by
// queue keeper (4 GPU, guarantee 4; 4 non-preemptible pods), queue borrower (1 GPU, guarantee
// 0)", the largest holders first, at most three named. Computed once per class of pods and
// cycle (cache), and only for such a reason; "" when no pod holds a GPU there.
func (c *cycle) gpuHolders(g *snapshot.Gang, cache map[*snapshot.FilterClass]string) string {
	if len(g.Pending) == 0 {
		return ""
	}
	cls := g.Pending[0].Class
	if s, ok := cache[cls]; ok {
		return s
	}
	type holder struct {
		q              *snapshot.Queue
		milli          int64
		nonPreemptible int
	}
	by := map[*snapshot.Queue]*holder{}
	nodes := c.snap.Nodes()
	count := 0
	set := c.snap.ClassNodes(cls)
	for id := bitset.NextAnd(set, nil, nil, 0); id >= 0; id = bitset.NextAnd(set, nil, nil, id+1) {
		n := nodes[id]
		if n == nil || len(n.Slots) == 0 {
			continue
		}
		count++
		for _, t := range n.Tasks {
			if t.Gang == nil || t.Gang.Queue == nil || t.State != snapshot.TaskBound {
				continue
			}
			m := t.GPUs.MilliGPU()
			if m == 0 {
				continue
			}
			h := by[t.Gang.Queue]
			if h == nil {
				h = &holder{q: t.Gang.Queue}
				by[t.Gang.Queue] = h
			}
			h.milli += m
			if !t.Gang.Preemptible {
				h.nonPreemptible++
			}
		}
	}
	hs := slices.Collect(maps.Values(by))
	slices.SortFunc(hs, func(a, b *holder) int {
		if c := cmp.Compare(b.milli, a.milli); c != 0 {
			return c
		}
		return strings.Compare(a.q.Name, b.q.Name)
	})
	s := ""
	if len(hs) > 0 {
		var parts []string
		for _, h := range hs[:min(3, len(hs))] {
			p := fmt.Sprintf("queue %s (%s GPU, guarantee %s", h.q.Name, snapshot.FormatAmount(snapshot.DimGPU, h.milli),
				snapshot.FormatAmount(snapshot.DimGPU, h.q.Quota.At(snapshot.DimGPU)))
			if h.q == g.Queue {
				p += "; the gang's own queue"
			}
			if h.nonPreemptible > 0 {
				p += fmt.Sprintf("; %d non-preemptible pods", h.nonPreemptible)
			}
			parts = append(parts, p+")")
		}
		noun := "nodes"
		if count == 1 {
			noun = "node"
		}
		s = fmt.Sprintf("the GPUs of the %d %s its pods may use are held by %s", count, noun, strings.Join(parts, ", "))
		if len(hs) > 3 {
			s += fmt.Sprintf(", and %d more queues", len(hs)-3)
		}
	}
	cache[cls] = s
	return s
}
