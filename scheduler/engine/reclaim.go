package engine

// Reclaim and preemption: making room for gangs that allocation could not place.
//
// Reclaim gives capacity back to queues below their fair share. A gang of queue Q may evict
// preemptible pods of another queue V when, for every resource the gang asks for:
//
//   - Q (and each of its ancestors that is not also V's) stays at or below its fair share with
//     the gang placed, and
//   - V (and each of its ancestors that is not also Q's) stays at or above its fair share after
//     each eviction, on every resource where V gets less than it asks for; a resource everyone
//     gets in full is nobody's to reclaim.
//
// So victims are borrowed work, taken from the queues furthest above their fair share first,
// lowest priority and most recently started first, never below their fair share. That also rules
// out ping-pong: after the evictions V sits at or above its fair share, so by the first rule it
// cannot reclaim back from Q, and Q sits at or below its own, so nobody can reclaim from it; run
// again on the state it produced, reclaim finds nothing to evict.
//
// Guarantees come first: if that finds no room and the gang keeps Q within its guaranteed quota
// (quota capped by demand), the same what-if runs again with guarantees in place of fair shares:
// V may then go below its fair share, but never below its own guarantee. Without this a queue
// whose borrowed work is one large gang could keep another queue from its guarantee forever.
//
// Victims must have run at least their queue's ReclaimMinRuntime. Evicted pods release their
// capacity with a grace period (Options.EvictionGracePeriod) to checkpoint; the gang is nominated
// on it and the capacity is held until they are gone.
//
// Preemption is the same machinery within one queue: a gang evicts preemptible pods of its own
// queue with lower priority that have run at least the queue's PreemptMinRuntime, as long as the
// queue does not grow beyond its fair share by it.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

type victimKind uint8

const (
	kindReclaimFair victimKind = iota
	kindReclaimGuarantee
	kindPreempt
	kindConsolidate
)

// attempt is the context of one what-if for a gang.
type attempt struct {
	g    *snapshot.Gang
	set  []*snapshot.Task
	dims []int
	req  map[int]int64
	// before is the gang's queue's effective allocation per base dimension at the start.
	before [snapshot.NumBaseDims]int64
}

func (c *cycle) newAttempt(g *snapshot.Gang) *attempt {
	tasks, _, minimal := c.planTasks(g)
	if len(tasks) == 0 {
		return nil
	}
	a := &attempt{g: g, set: tasks[:max(minimal, 1)], req: map[int]int64{}}
	for d := 0; d < snapshot.NumBaseDims; d++ {
		var v int64
		for _, t := range a.set {
			v += podAmount(t, d)
		}
		if v > 0 {
			a.dims = append(a.dims, d)
			a.req[d] = v
		}
		a.before[d] = g.Queue.Effective(d) - gangHeld(g, d)
	}
	if cls := a.set[0].Class; cls != nil && cls.PinnedType != "" {
		if td := c.snap.DimOfType(cls.PinnedType); td >= 0 && a.req[snapshot.DimGPU] > 0 {
			a.dims = append(a.dims, td)
			a.req[td] = a.req[snapshot.DimGPU]
		}
	}
	return a
}

// waitingOrder sorts the gangs allocation could not place: queues below their guarantee first,
// then by lowest dominant share, then gang order.
func (c *cycle) waitingOrder() []*snapshot.Gang {
	var gangs []*snapshot.Gang
	for _, g := range c.unplaced {
		if !c.placed[g] && len(g.Pending) > 0 { // allocation tries a gang once, so no duplicates
			gangs = append(gangs, g)
		}
	}
	below := map[*snapshot.Queue]bool{}
	share := map[*snapshot.Queue]float64{}
	for _, g := range gangs {
		below[g.Queue], share[g.Queue] = belowGuarantee(g.Queue), dominantShare(g.Queue)
	}
	slices.SortStableFunc(gangs, func(a, b *snapshot.Gang) int {
		if below[a.Queue] != below[b.Queue] {
			if below[a.Queue] {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(share[a.Queue], share[b.Queue]); c != 0 {
			return c
		}
		if c := strings.Compare(a.Queue.Name, b.Queue.Name); c != 0 {
			return c
		}
		return gangOrder(a, b)
	})
	return gangs
}

func (c *cycle) reclaim() {
	failures := map[failKey]placeFailure{}
	for _, g := range c.waitingOrder() {
		key, cacheable := c.failKeyOf(g)
		if f, ok := failures[key]; cacheable && ok {
			c.appendReason(g, "reclaim", f.msg, f.nodes)
			continue
		}
		f := c.victimsWhatIf(g, kindReclaimFair)
		if f.msg == "" {
			continue
		}
		if a := c.newAttempt(g); a != nil && c.withinGuarantee(a) {
			if f2 := c.victimsWhatIf(g, kindReclaimGuarantee); f2.msg == "" {
				continue
			} else {
				f = f2
			}
		}
		if cacheable {
			failures[key] = f
		}
		c.appendReason(g, "reclaim", f.msg, f.nodes)
	}
}

func (c *cycle) preempt() {
	failures := map[failKey]bool{}
	for _, g := range c.waitingOrder() {
		if low, ok := g.Queue.LowestPreemptiblePriority(); !ok || low >= g.Priority {
			continue // nothing of lower priority runs in the queue
		}
		key, cacheable := c.failKeyOf(g)
		if cacheable && failures[key] {
			continue
		}
		// Tell only when the queue had lower-priority pods it could not evict.
		f := c.victimsWhatIf(g, kindPreempt)
		if f.refusal != "" {
			c.appendReason(g, "preempt", f.refusal, f.nodes)
		}
		if f.msg != "" && cacheable {
			failures[key] = true
		}
	}
}

// appendReason adds what a later step found ("reclaim: why") to a gang's reason, unless the
// reason already says it: unless why is the reason's message or what an earlier step added,
// whole or one of its parts (why a pod does not fit the nodes). parts are why's own parts, which
// later steps must not repeat either. The texts are compared whole, never searched: a message
// names pods and queues.
func (c *cycle) appendReason(g *snapshot.Gang, step, why string, parts ...string) {
	r := c.reasons[g]
	told := &c.e.told
	if !told.has(g) {
		told.add(g, r.Message)
	}
	if told.said(g, why) {
		return
	}
	r.Message += "; " + step + ": " + why
	c.reasons[g] = r
	told.add(g, why)
	for _, p := range parts {
		if p != "" {
			told.add(g, p)
		}
	}
}

// withinGuarantee reports whether the gang keeps its queue within its guaranteed quota of every
// resource it asks for that the queue has a quota of (and there is at least one).
func (c *cycle) withinGuarantee(a *attempt) bool {
	any := false
	for _, d := range guaranteedDims(a) {
		any = true
		if a.before[d]+a.req[d] > deserved(a.g.Queue, d) {
			return false
		}
	}
	return any
}

// guaranteedDims are the base dimensions the gang asks for in which its queue has a quota.
func guaranteedDims(a *attempt) []int {
	var out []int
	for _, d := range a.dims {
		if d < snapshot.NumBaseDims && a.g.Queue.Quota.At(d) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// tryVictims runs a what-if that may evict pods for the gang, per the policy of kind. On success
// it commits the evictions, holds the capacity for the gang and nominates it, and returns "". On
// failure it leaves no trace and returns why.
func (c *cycle) tryVictims(g *snapshot.Gang, kind victimKind) string {
	return c.victimsWhatIf(g, kind).msg
}

// victimsWhatIf is tryVictims with the failure's parts: what the victims the policy refused
// and the nodes say (placeFailure.refusal and nodes). Its msg is "" on success.
func (c *cycle) victimsWhatIf(g *snapshot.Gang, kind victimKind) placeFailure {
	if c.placed[g] {
		return placeFailure{}
	}
	a := c.newAttempt(g)
	if a == nil {
		return placeFailure{msg: "no pod to place"}
	}
	pol, why := c.policyFor(kind, a)
	if pol == nil {
		return placeFailure{msg: why}
	}
	cp := c.stmt.Checkpoint()
	_, f := c.placeGang(g, placeMode{afterRelease: true, victims: pol, minimalOnly: true})
	if f != nil {
		c.stmt.Rollback(cp)
		c.waitForBudget(g, pol)
		return *f
	}
	if why := c.checkAfter(kind, a, pol); why != "" {
		c.stmt.Rollback(cp)
		return placeFailure{msg: why}
	}
	c.nominate(g, cp, pol)
	return placeFailure{}
}

// checkAfter verifies what must hold once the what-if placed the gang.
func (c *cycle) checkAfter(kind victimKind, a *attempt, pol *victimPolicy) string {
	switch kind {
	case kindPreempt:
		q := a.g.Queue
		for _, d := range a.dims {
			if d >= snapshot.NumBaseDims {
				continue
			}
			after := q.Effective(d) - gangHeld(a.g, d)
			if after > max(q.FairShare.At(d), a.before[d]) {
				return fmt.Sprintf("preempting would take queue %s above its fair share of %s", q.Name, c.snap.DimName(d))
			}
		}
	case kindConsolidate:
		return c.replaceVictims(pol)
	}
	return ""
}

// nominate turns a successful what-if into decisions: the evictions stay, the gang's placements
// become holds on their nodes, and the gang is reported as nominated.
func (c *cycle) nominate(g *snapshot.Gang, cp int, pol *victimPolicy) {
	type place struct {
		n *snapshot.Node
		h snapshot.Hold
	}
	var places []*place
	for _, o := range c.stmt.ops[cp:] {
		if o.kind != opAllocate || o.task.Gang != g || !o.task.Assumed {
			continue
		}
		t := o.task
		var p *place
		for _, q := range places {
			if q.n == t.Node {
				p = q
			}
		}
		if p == nil {
			p = &place{n: t.Node, h: snapshot.Hold{Node: t.Node, Expires: c.now.Add(c.e.opts.HoldTTL)}}
			places = append(places, p)
		}
		p.h.MilliCPU += t.Req.MilliCPU
		p.h.Memory += t.Req.Memory
		p.h.Pods++
		p.h.WholeGPUs += int64(len(t.GPUs.Whole)) + t.GPUs.Floating
		if t.GPUs.Shared >= 0 {
			p.h.WholeGPUs++ // a fraction holds a whole GPU until it is bound
		}
		p.h.MilliGPU += t.GPUs.MilliGPU()
	}
	type ev struct {
		t    *snapshot.Task
		info evictInfo
	}
	var evs []ev
	for _, o := range c.stmt.ops[cp:] {
		if o.kind == opEvict {
			evs = append(evs, ev{o.task, o.evict})
		}
	}
	c.stmt.Rollback(cp)
	for _, e := range evs {
		c.stmt.Evict(e.t, e.info.reason, e.info.message, e.info.beneficiary)
	}
	c.stmt.ClearHolds(g)
	var names []string
	pods := 0
	for _, p := range places {
		c.stmt.Hold(g, p.h)
		names = append(names, p.n.Name)
		pods += int(p.h.Pods)
	}
	c.commit()
	slices.Sort(names)
	c.placed[g] = true
	c.res.Nominations = append(c.res.Nominations, Nomination{Gang: g.Key, Nodes: names, Pods: pods})
	msg := fmt.Sprintf("%d pods are being evicted (%s) to make room; the gang will be bound on %s once they have terminated",
		len(evs), strings.ToLower(string(pol.reason)), strings.Join(names, ", "))
	if len(evs) == 0 {
		msg = fmt.Sprintf("waiting for pods already leaving %s; the capacity there is held for the gang", strings.Join(names, ", "))
	}
	c.setReason(g, ReasonWaitingEvictions, msg)
	c.e.opts.Logger.V(2).Info("nominated", "gang", g.Key.String(), "nodes", names, "evictions", len(evs), "reason", pol.reason)
}

// policyFor builds the victim policy of a what-if, or says why there is none.
func (c *cycle) policyFor(kind victimKind, a *attempt) (*victimPolicy, string) {
	switch kind {
	case kindReclaimFair, kindReclaimGuarantee:
		return c.reclaimPolicy(a, kind == kindReclaimGuarantee)
	case kindPreempt:
		return c.preemptPolicy(a)
	default:
		return c.consolidatePolicy(a)
	}
}

// evictabilityKey ranks victims: recreatable ones first, then lowest priority, then most recent
// start.
func evictabilityKey(v *snapshot.Task) victimKey {
	return victimKey{prio: v.Gang.Priority, lost: !v.Recreatable, start: v.Gang.LastStart.UnixNano()}
}

func (c *cycle) reclaimPolicy(a *attempt, guarantee bool) (*victimPolicy, string) {
	g, q := a.g, a.g.Queue
	level := "fair share"
	bound := func(x *snapshot.Queue, d int) int64 { return x.FairShare.At(d) }
	if guarantee {
		// Only the guaranteed resources are enforced: the gang claims its quota of those.
		level = "guaranteed quota"
		bound = func(x *snapshot.Queue, d int) int64 { return deserved(x, d) }
		g2 := *a
		g2.dims = guaranteedDims(a)
		a = &g2
	}
	for _, d := range a.dims {
		eff := q.Effective(d) - gangHeld(g, d)
		if eff+a.req[d] > bound(q, d) {
			holds := snapshot.FormatAmount(d, q.Allocated.At(d)-q.Releasing.At(d))
			if h := q.Held.At(d) - gangHeld(g, d); h > 0 {
				holds += " plus " + snapshot.FormatAmount(d, h) + " held for its waiting gangs"
			}
			return nil, fmt.Sprintf("queue %s would go above its %s of %s (it holds %s, %s is %s, the gang needs %s), so it cannot take capacity from other queues",
				q.Name, level, c.snap.DimName(d), holds, level, snapshot.FormatAmount(d, bound(q, d)), snapshot.FormatAmount(d, a.req[d]))
		}
	}
	contested := func(x *snapshot.Queue, d int) bool { return guarantee || x.FairShare.At(d) < x.Demand(d) }
	// Per-queue facts of this what-if, computed on first use: whether the queue's pods may be
	// reclaimed for the gang (1 yes, 2 no, 0 not computed yet), its share, and the start time
	// before which its pods have run their reclaim minimum runtime. The verdict runs for every
	// pod scanned, so these are arrays, not maps.
	queues := c.snap.Queues()
	okQ := make([]int8, len(queues))
	shareQ := make([]float64, len(queues))
	cutoffQ := make([]int64, len(queues))
	queueOK := func(v *snapshot.Queue) bool {
		if okQ[v.Index] != 0 {
			return okQ[v.Index] == 1
		}
		ok := v != q
		// The gang's side: every queue on its path below the common ancestor stays within bound.
		for x := q; ok && x != nil && !x.IsAncestorOf(v); x = x.Parent {
			for _, d := range a.dims {
				if x.Effective(d)-gangHeld(g, d)+a.req[d] > bound(x, d) {
					ok = false
				}
			}
		}
		// The victim's side: it holds more than its bound of something the gang needs.
		over := false
		for _, d := range a.dims {
			if contested(v, d) && v.Effective(d) > bound(v, d) {
				over = true
			}
		}
		okQ[v.Index] = 2
		if ok && over {
			okQ[v.Index] = 1
		}
		shareQ[v.Index] = dominantShare(v)
		cutoffQ[v.Index] = c.now.Add(-v.Spec.ReclaimMinRuntime).UnixNano()
		return ok && over
	}
	// Search the nodes of the queues whose pods may go, furthest above their share first.
	var victimQueues []*snapshot.Queue
	for _, v := range queues {
		if len(v.PreemptibleNodes()) > 0 && queueOK(v) {
			victimQueues = append(victimQueues, v)
		}
	}
	slices.SortStableFunc(victimQueues, func(x, y *snapshot.Queue) int { return cmp.Compare(shareQ[y.Index], shareQ[x.Index]) })
	sources := make([]bitset.Set, len(victimQueues)) // not nil: no queue means no node to search
	for i, v := range victimQueues {
		sources[i] = v.PreemptibleNodes()
	}
	reclaimHead := "reclaimed for gang " + g.Key.String() + " of queue " + q.Name + ", which is below its " + level + "; queue "
	pol := &victimPolicy{
		reason:       EvictReclaim,
		beneficiary:  g,
		level:        level,
		sources:      sources,
		victimQueues: victimQueues,
		none:         "no queue above its " + level + " runs pods that may be evicted",
		headroom: func(v *snapshot.Queue) int64 {
			if !contested(v, snapshot.DimGPU) {
				return math.MaxInt64
			}
			return max(0, v.Effective(snapshot.DimGPU)-bound(v, snapshot.DimGPU))
		},
		quiet: []refusalKind{refuseOwnQueue},
		verdict: func(vg *snapshot.Gang) refusal {
			switch {
			case !vg.Preemptible:
				return refusal{kind: refuseNonPreemptible}
			case vg.Queue == q:
				return refusal{kind: refuseOwnQueue}
			case !queueOK(vg.Queue):
				return refusal{kind: refuseQueueNotOver, q: vg.Queue}
			case vg.LastStart.UnixNano() > cutoffQ[vg.Queue.Index]:
				return refusal{kind: refuseReclaimRuntime, q: vg.Queue}
			}
			return refusal{}
		},
		allow: func(unit []*snapshot.Task, acc *freedAcc) refusal {
			v := unit[0].Gang.Queue
			relevant := false
			for _, d := range a.dims {
				amt := unitAmount(unit, d)
				if amt == 0 {
					continue
				}
				relevant = true
				for x := v; x != nil && !x.IsAncestorOf(q); x = x.Parent {
					if contested(x, d) && x.Effective(d)-acc.under(x, d)-amt < bound(x, d) {
						return refusal{kind: refuseFloor, q: x, d: d}
					}
				}
			}
			if !relevant {
				return refusal{kind: refuseUseless}
			}
			return refusal{}
		},
		key: func(v *snapshot.Task) victimKey {
			k := evictabilityKey(v)
			k.share = shareQ[v.Gang.Queue.Index] // set by queueOK, which the verdict asked first
			return k
		},
		// "reclaimed for gang G of queue Q, which is below its LEVEL; queue V holds N GPU, above
		// its LEVEL of B": built by concatenation from a head made once per what-if, because a
		// large reclaim writes thousands of these and fmt.Sprintf's boxed arguments were a quarter
		// of the cycle's allocations.
		message: func(v *snapshot.Task) string {
			vq := v.Gang.Queue
			held := snapshot.FormatAmount(snapshot.DimGPU, vq.Effective(snapshot.DimGPU))
			floor := snapshot.FormatAmount(snapshot.DimGPU, bound(vq, snapshot.DimGPU))
			if v.Recreatable {
				return reclaimHead + vq.Name + " holds " + held + " GPU, above its " + level + " of " + floor
			}
			return reclaimHead + vq.Name + " holds " + held + " GPU, above its " + level + " of " + floor + notRecreatedSuffix
		},
	}
	return pol, ""
}

func (c *cycle) preemptPolicy(a *attempt) (*victimPolicy, string) {
	g, q := a.g, a.g.Queue
	return &victimPolicy{
		reason:       EvictPreempt,
		beneficiary:  g,
		sources:      []bitset.Set{q.PreemptibleNodes()},
		victimQueues: []*snapshot.Queue{q},
		quiet:        []refusalKind{refuseOtherQueue, refusePriority},
		verdict: func(vg *snapshot.Gang) refusal {
			switch {
			case vg.Queue != q:
				return refusal{kind: refuseOtherQueue}
			case !vg.Preemptible:
				return refusal{kind: refuseNonPreemptible}
			case vg.Priority >= g.Priority:
				return refusal{kind: refusePriority, prio: g.Priority}
			case c.now.Sub(vg.LastStart) < q.Spec.PreemptMinRuntime:
				return refusal{kind: refusePreemptRuntime, q: q}
			}
			return refusal{}
		},
		key: evictabilityKey,
		message: func(v *snapshot.Task) string {
			const format = "preempted by gang %s of priority %d in queue %s (this pod has priority %d)"
			return fmt.Sprintf(lostFormat(v, format, format+notRecreatedSuffix), g.Key, g.Priority, q.Name, v.Gang.Priority)
		},
	}, ""
}
