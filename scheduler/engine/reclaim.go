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
	"time"

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

// reclaimFailure is a failed reclaim kept for the gangs of the same shape later in the cycle,
// with the what-if that failed when a PodDisruptionBudget held it up: those gangs wait for the
// budget too, and each starts its own budget wait (a gang that only ever met the cache would
// otherwise wait one timeout after another).
type reclaimFailure struct {
	f      placeFailure
	budget *victimPolicy
	// moves is the what-if whose moves a PodDisruptionBudget held, if that is the gang's wait:
	// those gangs wait for the budget too (the reason's code), with no budget timeout.
	moves *victimPolicy
	// pod is the pod the messages name (firstPending of the gang that failed first).
	pod string
}

// forGang is the failure told to gang g of the same shape: its messages name g's pod, not the
// pod of the gang that failed first.
func (cf reclaimFailure) forGang(g *snapshot.Gang) placeFailure {
	f, pod := cf.f, firstPending(g)
	f.msg = strings.ReplaceAll(f.msg, cf.pod, pod)
	f.nodes = strings.ReplaceAll(f.nodes, cf.pod, pod)
	f.refusal = strings.ReplaceAll(f.refusal, cf.pod, pod)
	return f
}

func (c *cycle) reclaim() {
	failures := map[failKey]reclaimFailure{}
	holders := map[*snapshot.FilterClass]string{}
	gangs := c.waitingOrder()
	// Gangs an ancestor's limit keeps out while their queue is below its guarantee: the
	// department's other projects may be borrowing the limit.
	for _, q := range c.snap.Queues() {
		for _, pg := range q.PendingGangs {
			if c.limited[pg] && !c.placed[pg] && c.limitedAbove(pg) {
				gangs = append(gangs, pg)
			}
		}
	}
	for _, g := range gangs {
		// Whether the gang keeps its queue within its guarantee is asked only when it matters
		// (planning its pods costs): for a budget's timeout, or once fair share failed.
		withinKnown, within := false, false
		isWithin := func() bool {
			if !withinKnown {
				a := c.newAttempt(g)
				within, withinKnown = a != nil && c.withinGuarantee(a), true
			}
			return within
		}
		key, cacheable := c.failKeyOf(g)
		// A gang past its budget timeout fails differently from one that is not.
		cacheable = cacheable && !c.limited[g] && !c.budgetOverdue(g)
		if cf, ok := failures[key]; cacheable && ok {
			f := cf.forGang(g)
			if cf.moves != nil && isWithin() {
				c.waitForBudget(g, cf.moves)
			}
			if cf.budget != nil && isWithin() {
				c.waitForBudget(g, cf.budget)
				c.noteBudget(g, cf.budget)
				c.tellBudgetTimeout(g, &f)
			}
			c.takeCode(g, f)
			c.appendReason(g, "reclaim", f.msg, f.nodes)
			continue
		}
		override := c.budgetOverdue(g) && isWithin()
		f, pol := c.victimsWhatIfMode(g, kindReclaimFair, reclaimMode{overrideBudgets: override})
		if budgetHeldUp(pol) && isWithin() {
			c.noteBudget(g, pol)
		}
		if f.msg == "" {
			continue
		}
		cf := reclaimFailure{f: f}
		if budgetHeldUp(pol) {
			cf.budget = pol
		}
		if isWithin() {
			f2, pol2, moves := c.reclaimGuarantee(g)
			if f2.msg == "" {
				continue
			}
			cf.f = f2
			if pol2 != nil {
				cf.budget = pol2
			}
			cf.moves = moves
			if moves == nil && c.reasons[g].Code != ReasonWaitingForBudget {
				// No budget the reason names keeps the guarantee waiting, only pods: say whose.
				if h := c.gpuHolders(g, holders); h != "" {
					f2.msg += "; " + h
				}
				cf.f = f2
			}
			f = f2
			c.tellBudgetTimeout(g, &f)
		}
		if cacheable {
			cf.pod = firstPending(g)
			failures[key] = cf
		}
		c.takeCode(g, f)
		c.appendReason(g, "reclaim", f.msg, f.nodes)
	}
}

// takeCode gives a gang that no node fits the code of the reclaim that failed, when that has a
// code of its own (ReasonOverFairShare): the reclaim says more precisely what the gang waits for.
func (c *cycle) takeCode(g *snapshot.Gang, f placeFailure) {
	if f.code != ReasonOverFairShare {
		return
	}
	if r, ok := c.reasons[g]; ok && r.Code == ReasonNoNodeFits {
		r.Code = f.code
		c.reasons[g] = r
	}
}

func (c *cycle) preempt() {
	failures := map[failKey]bool{}
	gangs := c.waitingOrder()
	// Gangs a queue limit keeps out: preemption makes room under the limit, not only on nodes.
	for _, g := range c.snap.Queues() {
		for _, pg := range g.PendingGangs {
			if c.limited[pg] && !c.placed[pg] {
				gangs = append(gangs, pg)
			}
		}
	}
	for _, g := range gangs {
		if low, ok := g.Queue.LowestPreemptiblePriority(); !ok || low >= g.Priority {
			continue // nothing of lower priority runs in the queue
		}
		key, cacheable := c.failKeyOf(g)
		cacheable = cacheable && !c.limited[g]
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
	f, _ := c.victimsWhatIfMode(g, kind, reclaimMode{})
	return f
}

// reclaimMode relaxes the guarantee what-if, one step at a time, when the strict one fails (see
// reclaimGuarantee).
type reclaimMode struct {
	// overQuota lets a unit go whose queue (or department) is above its guarantee before it,
	// even if the unit takes it below: a pod or gang partly above its queue's guarantee is
	// over-quota work as a whole, as KAI-Scheduler treats it.
	overQuota bool
	// moves lets the what-if move recreatable pods that floors protect: they are evicted only
	// if every one of them can be placed again elsewhere at once (consolidation inside reclaim).
	moves bool
	// overrideBudgets lets over-quota pods go although a PodDisruptionBudget refuses: the
	// claimant waited its queue's reclaim budget timeout. Moved pods keep their budgets.
	overrideBudgets bool
	// under, when set, takes victims only from the queues under it: a department the gang's
	// placement would take above its bound gives back its own projects' borrowed pods.
	under *snapshot.Queue
	// evictAgain lets the what-if take pods evicted for the gang lately (victimPolicy.spared).
	evictAgain bool
	// takeHolds lets the what-if release capacity held for gangs of queues above their
	// guaranteed quota (holdsOverQuota): a hold is over-quota work that disrupts no pod.
	takeHolds bool
	// deptRoom, when set, is a department the gang's placement would take above its bound: the
	// what-if first evicts its own projects' over-bound pods until the department has room for
	// the gang (freeAncestorRoom), then makes node room anywhere, as usual.
	deptRoom *snapshot.Queue
}

// victimsWhatIfMode runs the what-if of kind under mode and returns its failure ("" msg on
// success) and the policy it ran with (nil when there was none).
func (c *cycle) victimsWhatIfMode(g *snapshot.Gang, kind victimKind, mode reclaimMode) (placeFailure, *victimPolicy) {
	if c.placed[g] {
		return placeFailure{}, nil
	}
	a := c.newAttempt(g)
	if a == nil {
		return placeFailure{msg: "no pod to place"}, nil
	}
	pol, none := c.policyFor(kind, a, mode)
	if pol == nil {
		return none, nil
	}
	pol.noSpare = mode.evictAgain
	// Without room unless pods evicted for the gang lately go again, a guarantee reclaim or a
	// preemption runs again with them: what is promised (a guarantee, a priority) is not kept
	// waiting for them. A fair share, like consolidation, is not a promise: it waits for the
	// memory to lapse rather than evict a pod twice for one gang (a gang within its guarantee
	// goes on to the guarantee what-if, which may). Nor does a guarantee reclaim that a
	// PodDisruptionBudget of over-quota pods holds up: the budget may delay it, up to the
	// queue's budget timeout, and once that passes the budget's pods go before a pod is evicted
	// twice for the gang.
	again := func() bool {
		if !pol.sparedHit || mode.evictAgain || kind == kindConsolidate || kind == kindReclaimFair {
			return false
		}
		return kind != kindReclaimGuarantee || mode.overrideBudgets || !budgetRefused(pol)
	}
	cp := c.stmt.Checkpoint()
	if mode.takeHolds {
		for _, h := range c.holdsOverQuota(g) {
			c.stmt.ClearHolds(h)
		}
	}
	if (kind == kindPreempt || kind == kindReclaimGuarantee) && c.limited[g] {
		c.limitsAfterRelease = true
		defer func() { c.limitsAfterRelease = false }()
		if why := c.freeLimitRoom(a, pol); why != "" {
			c.stmt.Rollback(cp)
			if again() {
				mode.evictAgain = true
				return c.victimsWhatIfMode(g, kind, mode)
			}
			return placeFailure{msg: why, refusal: why}, pol
		}
	}
	if mode.deptRoom != nil {
		if why := c.freeAncestorRoom(a, pol, mode.deptRoom); why != "" {
			c.stmt.Rollback(cp)
			return placeFailure{msg: why, refusal: why}, pol
		}
	}
	_, f := c.placeGang(g, placeMode{afterRelease: true, victims: pol, minimalOnly: true})
	if f != nil && again() {
		c.stmt.Rollback(cp)
		mode.evictAgain = true
		return c.victimsWhatIfMode(g, kind, mode)
	}
	if f != nil {
		c.stmt.Rollback(cp)
		c.waitForBudget(g, pol)
		return *f, pol
	}
	if why := c.checkAfter(kind, a, pol); why != "" {
		c.stmt.Rollback(cp)
		if x := pol.overAncestor; x != nil && mode.under == nil && mode.deptRoom == nil {
			// Victims from elsewhere left the department above its bound: try its own
			// projects' borrowed pods instead; for a guarantee, then both: the department's
			// own borrowed pods for room under its bound, anyone's for room on the nodes.
			m := mode
			m.under = x
			if f2, pol2 := c.victimsWhatIfMode(g, kind, m); f2.msg == "" {
				return f2, pol2
			}
			if kind == kindReclaimGuarantee {
				m = mode
				m.deptRoom = x
				if f2, pol2 := c.victimsWhatIfMode(g, kind, m); f2.msg == "" {
					return f2, pol2
				}
			}
		}
		return placeFailure{msg: why}, pol
	}
	c.nominate(g, cp, pol)
	return placeFailure{}, pol
}

// reclaimGuarantee runs the guarantee what-if for a gang that keeps its queue within its
// guarantee, relaxing it step by step until one delivers: strict floors first; then over-quota
// units taken whole; then moves of recreatable pods. Once the gang has waited its queue's
// reclaim budget timeout for PodDisruptionBudgets of over-quota pods, the budgets no longer hold
// those pods. The first failure is the one reported: the later ones only relax it. The what-if a
// PodDisruptionBudget held up, if one did, comes with it. So does the what-if whose moves a
// budget held (moves), if one did: the failure then names that budget too, as what the gang
// waits for.
func (c *cycle) reclaimGuarantee(g *snapshot.Gang) (_ placeFailure, heldUp, moves *victimPolicy) {
	override := c.budgetOverdue(g)
	var first placeFailure
	for i, mode := range []reclaimMode{{}, {overQuota: true}, {overQuota: true, moves: true}} {
		mode.overrideBudgets = override
		f, pol := c.victimsWhatIfMode(g, kindReclaimGuarantee, mode)
		c.noteBudget(g, pol)
		if f.msg == "" {
			return f, nil, nil
		}
		if heldUp == nil && budgetHeldUp(pol) {
			heldUp = pol
		}
		if moves == nil && f.refusal != "" && movesHeldByBudget(pol) {
			moves = pol
		}
		if i == 0 {
			first = f
		}
		// Moves only where they can help, so that many waiting one-GPU gangs do not pay for a
		// third what-if each: a pod that needs several GPUs of one node, or a share of one
		// (scattered victims free capacity that only moves can gather).
		if i == 1 && !c.wantsGathering(g) {
			break
		}
	}
	// Capacity held for gangs of queues above their guarantee (a fair-share reclaim whose plan a
	// budget broke, say, holding what its other evictions freed until the hold lapses) is
	// over-quota too: a guarantee takes it before it waits for the hold to lapse.
	if len(c.holdsOverQuota(g)) > 0 {
		mode := reclaimMode{overQuota: true, moves: c.wantsGathering(g), overrideBudgets: override, takeHolds: true}
		f, pol := c.victimsWhatIfMode(g, kindReclaimGuarantee, mode)
		c.noteBudget(g, pol)
		if f.msg == "" {
			return f, nil, nil
		}
		if moves == nil && f.refusal != "" && movesHeldByBudget(pol) {
			moves = pol
		}
	}
	if moves != nil {
		first.msg += "; " + c.movesWhy(moves)
	}
	return first, heldUp, moves
}

// wantsGathering reports whether a pod the gang needs asks for more than one GPU, or a share of
// one, or one whole GPU while shares leave GPUs part used: only such a pod may need moves to
// gather free capacity on one node or GPU.
func (c *cycle) wantsGathering(g *snapshot.Gang) bool {
	sharesScattered := bitset.NextAnd(c.snap.NodesWithSharedRoom(), nil, nil, 0) >= 0
	for _, t := range g.Pending {
		if t.Req.WholeGPUs > 1 || t.Req.Shared() || (t.Req.WholeGPUs == 1 && sharesScattered) {
			return true
		}
	}
	return false
}

// holdsOverQuota returns the gangs other than g that hold capacity for over-quota work: their
// queue, the holds counted, is above its guaranteed quota of GPUs, or the gang would not keep its
// queue within its guarantee once placed (it claims a fair share, not a guarantee). A reclaim
// for a guarantee may release what they hold.
func (c *cycle) holdsOverQuota(g *snapshot.Gang) []*snapshot.Gang {
	var out []*snapshot.Gang
	for _, h := range c.snap.HeldGangs() {
		if h == g || h.Queue == nil || len(h.Holds()) == 0 {
			continue
		}
		if q := h.Queue; q.Effective(snapshot.DimGPU) > q.Quota.At(snapshot.DimGPU) {
			out = append(out, h)
		} else if a := c.newAttempt(h); a == nil || !c.withinGuarantee(a) {
			out = append(out, h)
		}
	}
	return out
}

// budgetOverdue reports whether the gang has waited its queue's reclaim budget timeout since a
// PodDisruptionBudget first held up a reclaim for its guarantee.
func (c *cycle) budgetOverdue(g *snapshot.Gang) bool {
	return !g.BudgetWaitSince.IsZero() && !c.now.Before(g.BudgetWaitSince.Add(g.Queue.ReclaimBudgetTimeout))
}

// noteBudget starts the gang's budget wait when a what-if for its guarantee had to leave pods of
// a blocked budget alone, or chose victims whose eviction violates a budget (which the API
// server will refuse).
func (c *cycle) noteBudget(g *snapshot.Gang, pol *victimPolicy) {
	if g.BudgetWaitSince.IsZero() && budgetHeldUp(pol) {
		g.BudgetWaitSince = c.now
	}
}

// budgetHeldUp reports whether a what-if had to leave pods of a blocked budget alone, or chose
// victims whose eviction violates a budget.
func budgetHeldUp(pol *victimPolicy) bool {
	return pol != nil && (pol.violations > 0 || budgetRefused(pol))
}

// tellBudgetTimeout adds to the reason of a gang that waits for a PodDisruptionBudget when the
// budget stops holding the over-quota pods it protects.
func (c *cycle) tellBudgetTimeout(g *snapshot.Gang, f *placeFailure) {
	if g.BudgetWaitSince.IsZero() || c.reasons[g].Code != ReasonWaitingForBudget {
		return
	}
	until := g.BudgetWaitSince.Add(g.Queue.ReclaimBudgetTimeout)
	f.msg += "; queue " + g.Queue.Name + "'s guarantee overrides the budgets of over-quota pods at " + until.UTC().Format(time.RFC3339) +
		" (reclaim.budgetTimeout " + g.Queue.ReclaimBudgetTimeout.String() + ")"
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
	case kindReclaimFair, kindReclaimGuarantee:
		// Moved pods come back first: they stay in their queues' accounting. One that fits
		// nowhere may take the room of over-quota pods the policy evicts for it.
		if why := c.replaceVictims(pol.moved, pol); why != "" {
			return why
		}
		return c.checkAncestors(a, pol)
	case kindConsolidate:
		if len(pol.evicted) == 0 {
			// Nothing moves: the gang would only take capacity other pods' evictions free,
			// which is not consolidation's to give (reclaim decided whom it is for).
			return "only capacity being freed for others would take it"
		}
		return c.replaceVictims(pol.evicted, nil)
	}
	return ""
}

// checkAncestors checks, once a reclaim what-if has placed the gang, the rule that every queue
// on the gang's path that is not also an ancestor of every victim stays within its bound: with
// the evictions of this what-if counted, so that a department whose other project borrows does
// not refuse the claimant while the same reclaim evicts that project's pods.
func (c *cycle) checkAncestors(a *attempt, pol *victimPolicy) string {
	g := a.g
	for x := g.Queue.Parent; x != nil; x = x.Parent {
		common := len(pol.evicted) > 0
		for _, v := range pol.evicted {
			if !x.IsAncestorOf(v.Gang.Queue) && !slices.Contains(pol.moved, v) {
				common = false
				break
			}
		}
		if common {
			return "" // x and everything above it only move capacity between their own queues
		}
		for _, d := range pol.dims {
			if after := x.Effective(d) - gangHeld(g, d); after > pol.bound(x, d) {
				pol.overAncestor = x
				return fmt.Sprintf("department %s would go above its %s of %s with the gang placed (it would hold %s, its %s is %s), so queue %s cannot take capacity from other departments",
					x.Name, pol.level, c.snap.DimName(d), snapshot.FormatAmount(d, after), pol.level, snapshot.FormatAmount(d, pol.bound(x, d)), g.Queue.Name)
			}
		}
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
		p.h.Slots = append(p.h.Slots, t.GPUs.Whole...)
		if t.GPUs.Shared >= 0 {
			p.h.Slots = append(p.h.Slots, t.GPUs.Shared)
		}
	}
	type ev struct {
		t    *snapshot.Task
		info evictInfo
	}
	var evs []ev
	var released []*snapshot.Gang // other gangs' holds the what-if took (reclaimMode.takeHolds)
	for _, o := range c.stmt.ops[cp:] {
		switch {
		case o.kind == opEvict:
			evs = append(evs, ev{o.task, o.evict})
		case o.kind == opClearHolds && o.gang != g:
			released = append(released, o.gang)
		}
	}
	c.stmt.Rollback(cp)
	for _, h := range released {
		c.stmt.ClearHolds(h)
	}
	for _, e := range evs {
		c.stmt.evict(e.t, e.info)
	}
	old := slices.Clone(g.Holds())
	c.stmt.ClearHolds(g)
	var names []string
	pods := 0
	for _, p := range places {
		c.stmt.Hold(g, p.h)
		names = append(names, p.n.Name)
		pods += int(p.h.Pods)
	}
	// A hold this plan moves away from stays: pods were evicted for the gang there, and the
	// capacity they free must not go back to their recreated pods, which a later plan would
	// have to evict again (a budget refused one of their co-victims, say, and the gang waits for
	// it elsewhere). It goes when the gang binds or the hold lapses (HoldTTL).
	for _, h := range old {
		if !slices.ContainsFunc(places, func(p *place) bool { return p.n == h.Node }) {
			c.stmt.Hold(g, h)
		}
	}
	c.commit()
	slices.Sort(names)
	c.placed[g] = true
	c.res.Nominations = append(c.res.Nominations, Nomination{Gang: g.Key, Nodes: names, Pods: pods})
	they := "they have"
	if len(evs) == 1 {
		they = "it has"
	}
	msg := fmt.Sprintf("%s being evicted (%s) to make room; the gang will be bound on %s once %s terminated",
		count(len(evs), "pod is", "pods are"), strings.ToLower(string(pol.reason)), strings.Join(names, ", "), they)
	if len(evs) == 0 {
		msg = fmt.Sprintf("waiting for pods already leaving %s; the capacity there is held for the gang", strings.Join(names, ", "))
	}
	if len(released) > 0 {
		var from []string
		for _, h := range released {
			from = append(from, h.Key.String())
		}
		slices.Sort(from)
		msg += fmt.Sprintf("; capacity held for over-quota gangs (%s) was released for its guarantee", strings.Join(from, ", "))
	}
	c.setReason(g, ReasonWaitingEvictions, msg)
	if l := c.e.opts.Logger.V(2); l.Enabled() {
		// Guarded: the arguments cost allocations on every nomination even when not logged.
		l.Info("nominated", "gang", g.Key.String(), "nodes", names, "evictions", len(evs), "reason", pol.reason)
	}
}

// policyFor builds the victim policy of a what-if, or says why there is none (the failure's
// code is set when the why has a code of its own).
func (c *cycle) policyFor(kind victimKind, a *attempt, mode reclaimMode) (*victimPolicy, placeFailure) {
	switch kind {
	case kindReclaimFair, kindReclaimGuarantee:
		return c.reclaimPolicy(a, kind == kindReclaimGuarantee, mode)
	case kindPreempt:
		return c.preemptPolicy(a), placeFailure{}
	default:
		return c.consolidatePolicy(a), placeFailure{}
	}
}

// evictabilityKey ranks victims: recreatable ones first, then lowest priority, then most recent
// start.
func evictabilityKey(v *snapshot.Task) victimKey {
	return victimKey{prio: v.Gang.Priority, lost: !v.Recreatable, start: v.Gang.LastStart.UnixNano()}
}

func (c *cycle) reclaimPolicy(a *attempt, guarantee bool, mode reclaimMode) (*victimPolicy, placeFailure) {
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
	if over := c.reclaimClaimantOver(a, level, bound); over.msg != "" {
		if !guarantee && over.policy {
			// The fair share, not the cluster, keeps the gang out: a code of its own, so that
			// `fairway why`, the metrics and dashboards tell policy from size without reading
			// the message. A refusal at the guarantee level keeps NoNodeFits: that what-if runs
			// only for a gang within its queue's guarantee, and its message says the rest.
			return nil, placeFailure{code: ReasonOverFairShare, msg: over.msg}
		}
		return nil, placeFailure{msg: over.msg}
	}
	contested := func(x *snapshot.Queue, d int) bool { return guarantee || x.FairShare.At(d) < x.Demand(d) }
	facts := newReclaimFacts(a, bound, contested, c.now, len(c.snap.Queues()))
	victimQueues := reclaimVictimQueues(c.snap.Queues(), q, mode, facts)
	sources := make([]bitset.Set, len(victimQueues)) // not nil: no queue means no node to search
	for i, v := range victimQueues {
		sources[i] = v.PreemptibleNodes()
	}
	reclaimHead := "reclaimed for " + claimantName(g) + " of queue " + q.Name + ", which is below its " + level + "; queue "
	pol := &victimPolicy{
		reason:          EvictReclaim,
		beneficiary:     g,
		level:           level,
		dims:            a.dims,
		bound:           bound,
		overrideBudgets: mode.overrideBudgets,
		sources:         sources,
		victimQueues:    victimQueues,
		none:            "no queue above its " + level + " runs pods that may be evicted",
		headroom: func(v *snapshot.Queue) int64 {
			if !contested(v, snapshot.DimGPU) || mode.moves {
				return math.MaxInt64
			}
			over := max(0, v.Effective(snapshot.DimGPU)-bound(v, snapshot.DimGPU))
			if mode.overQuota && over > 0 {
				return v.Effective(snapshot.DimGPU) // a unit across the floor goes whole
			}
			return over
		},
		quiet: []refusalKind{refuseOwnQueue, refuseOtherQueue},
		verdict: func(vg *snapshot.Gang) refusal {
			switch {
			case !vg.Preemptible:
				return refusal{kind: refuseNonPreemptible}
			case vg.Queue == q:
				return refusal{kind: refuseOwnQueue}
			case mode.under != nil && !mode.under.IsAncestorOf(vg.Queue):
				return refusal{kind: refuseOtherQueue}
			case !facts.queueOK(vg.Queue) && !mode.moves:
				return refusal{kind: refuseQueueNotOver, q: vg.Queue}
			case vg.LastStart.UnixNano() > facts.q[vg.Queue.Index].cutoff:
				return refusal{kind: refuseReclaimRuntime, q: vg.Queue}
			}
			return refusal{}
		},
		allow: func(unit []*snapshot.Task, acc *freedAcc) refusal { return facts.allow(unit, acc, mode.overQuota) },
		key: func(v *snapshot.Task) victimKey {
			k := evictabilityKey(v)
			k.share = facts.q[v.Gang.Queue.Index].share // set by queueOK, which the verdict asked first
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
	if mode.moves {
		c.allowMoves(pol, g)
	}
	return pol, placeFailure{}
}

// claimantOver is why a gang's queue may not reclaim: msg says which bound of which dimension
// it would cross ("" when it may), policy whether the cluster has that much of the dimension
// for fairway's queues, so that only other queues' claims keep it below the bound, not the
// cluster's size.
type claimantOver struct {
	msg    string
	policy bool
}

// reclaimClaimantOver says why the gang's queue may not reclaim at level (bound): with the gang,
// it would go above its bound of a dimension the gang needs.
func (c *cycle) reclaimClaimantOver(a *attempt, level string, bound func(*snapshot.Queue, int) int64) claimantOver {
	g, q := a.g, a.g.Queue
	for _, d := range a.dims {
		eff := q.Effective(d) - gangHeld(g, d)
		if eff+a.req[d] > bound(q, d) {
			holds := snapshot.FormatAmount(d, q.Allocated.At(d)-q.Releasing.At(d))
			if h := q.Held.At(d) - gangHeld(g, d); h > 0 {
				holds += " plus " + snapshot.FormatAmount(d, h) + " held for its waiting gangs"
			}
			return claimantOver{
				msg: fmt.Sprintf("queue %s would go above its %s of %s (it holds %s, %s is %s, the gang needs %s), so it cannot take capacity from other queues",
					q.Name, level, c.snap.DimName(d), holds, level, snapshot.FormatAmount(d, bound(q, d)), snapshot.FormatAmount(d, a.req[d])),
				policy: eff+a.req[d] <= c.e.fsCap[d],
			}
		}
	}
	return claimantOver{}
}

// allowMoves lets pol move (evict to re-create elsewhere) the pods that may be moved: recreatable,
// not in a gang with required topology or sub-groups, past their queue's preemption minimum
// runtime.
func (c *cycle) allowMoves(pol *victimPolicy, g *snapshot.Gang) {
	pol.move = func(unit []*snapshot.Task) bool {
		for _, t := range unit {
			vg := t.Gang
			if !t.Recreatable || vg.Topology.Required != "" || len(vg.SubGroups) > 0 || c.now.Sub(vg.LastStart) < vg.Queue.Spec.PreemptMinRuntime {
				return false
			}
		}
		return true
	}
	moveMessage := "moved to deliver the guaranteed quota of queue " + g.Queue.Name + " to " + claimantName(g) +
		", which fits only if pods move; there is room for this pod on another node"
	pol.moveMessage = func(*snapshot.Task) string { return moveMessage }
}

// reclaimFacts are the per-queue facts of one reclaim what-if, computed on first use: whether
// the queue's pods may be reclaimed for the gang (ok: 1 yes, 2 no, 0 not computed yet), its
// share, and the start time before which its pods have run their reclaim minimum runtime. The
// verdict runs for every pod scanned, so these are arrays indexed by queue, not maps.
type reclaimFacts struct {
	a         *attempt
	bound     func(*snapshot.Queue, int) int64
	contested func(*snapshot.Queue, int) bool
	now       time.Time
	// q holds the facts by queue index, in one slice: a reclaim builds facts for every gang it
	// tries, and three slices were three allocations each time.
	q []queueFacts
}

type queueFacts struct {
	ok     int8
	share  float64
	cutoff int64
}

func newReclaimFacts(a *attempt, bound func(*snapshot.Queue, int) int64, contested func(*snapshot.Queue, int) bool, now time.Time, queues int) *reclaimFacts {
	return &reclaimFacts{a: a, bound: bound, contested: contested, now: now, q: make([]queueFacts, queues)}
}

// queueOK reports whether v's pods may be reclaimed for the gang, and records v's facts.
func (f *reclaimFacts) queueOK(v *snapshot.Queue) bool {
	if f.q[v.Index].ok != 0 {
		return f.q[v.Index].ok == 1
	}
	g, q := f.a.g, f.a.g.Queue
	ok := v != q
	// The gang's side: every queue on its path below the common ancestor stays within bound,
	// counting as gone what the queues beside the path could give (the exact check, with the
	// what-if's own evictions, is checkAncestors).
	for x := q; ok && x != nil && !x.IsAncestorOf(v); x = x.Parent {
		for _, d := range f.a.dims {
			if x.Effective(d)-gangHeld(g, d)+f.a.req[d]-givable(x, q, d) > f.bound(x, d) {
				ok = false
			}
		}
	}
	// The victim's side: it holds more than its bound of something the gang needs.
	over := false
	for _, d := range f.a.dims {
		if f.contested(v, d) && v.Effective(d) > f.bound(v, d) {
			over = true
		}
	}
	f.q[v.Index].ok = 2
	if ok && over {
		f.q[v.Index].ok = 1
	}
	f.q[v.Index].share = dominantShare(v)
	f.q[v.Index].cutoff = f.now.Add(-v.Spec.ReclaimMinRuntime).UnixNano()
	return ok && over
}

// allow is the policy's test of one unit of victims: every contested queue on the victim's path
// (below the common ancestor) stays at or above its bound after the what-if's evictions so far
// (acc), except that with overQuota a unit may take a queue across its bound once; a unit that
// frees nothing the gang needs is useless.
func (f *reclaimFacts) allow(unit []*snapshot.Task, acc *freedAcc, overQuota bool) refusal {
	v, q := unit[0].Gang.Queue, f.a.g.Queue
	if !f.queueOK(v) {
		return refusal{kind: refuseQueueNotOver, q: v} // only a move may take it
	}
	relevant := false
	for _, d := range f.a.dims {
		amt := unitAmount(unit, d)
		if amt == 0 {
			continue
		}
		relevant = true
		for x := v; x != nil && !x.IsAncestorOf(q); x = x.Parent {
			if !f.contested(x, d) {
				continue
			}
			left := x.Effective(d) - acc.under(x, d)
			if left-amt < f.bound(x, d) && (!overQuota || left <= f.bound(x, d)) {
				return refusal{kind: refuseFloor, q: x, d: d}
			}
		}
	}
	if !relevant {
		return refusal{kind: refuseUseless}
	}
	return refusal{}
}

// reclaimVictimQueues are the queues whose nodes the what-if searches, furthest above their
// share first. With moves, queues at their floor may still move pods.
func reclaimVictimQueues(queues []*snapshot.Queue, q *snapshot.Queue, mode reclaimMode, f *reclaimFacts) []*snapshot.Queue {
	out := make([]*snapshot.Queue, 0, len(queues))
	for _, v := range queues {
		if mode.under != nil && !mode.under.IsAncestorOf(v) {
			continue
		}
		if len(v.PreemptibleNodes()) > 0 && (f.queueOK(v) || (mode.moves && v.IsLeaf() && v != q)) {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(x, y *snapshot.Queue) int { return cmp.Compare(f.q[y.Index].share, f.q[x.Index].share) })
	return out
}

// givable is what the queues under x beside the path to q could give up to a reclaim at most:
// their preemptible pods. The prefilter of reclaimPolicy counts it as gone.
func givable(x, q *snapshot.Queue, d int) int64 {
	if x == q {
		return 0
	}
	var v int64
	for _, ch := range x.Children {
		if ch.IsAncestorOf(q) {
			continue
		}
		v += max(0, ch.Allocated.At(d)-ch.AllocatedNP.At(d)-ch.Releasing.At(d))
	}
	return v
}

func (c *cycle) preemptPolicy(a *attempt) *victimPolicy {
	g, q := a.g, a.g.Queue
	by := claimantName(g)
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
			const format = "preempted by %s of priority %d in queue %s (this pod has priority %d)"
			return fmt.Sprintf(lostFormat(v, format, format+notRecreatedSuffix), by, g.Priority, q.Name, v.Gang.Priority)
		},
	}
}

// freeLimitRoom evicts, for a gang a queue limit keeps out, the preemption policy's victims of
// the gang's own queue until the limits leave room for the pods it needs (releasing pods
// counted as gone), most evictable first: pods whose eviction violates no PodDisruptionBudget,
// lowest priority, most recently started. It returns why it could not ("" once there is room).
func (c *cycle) freeLimitRoom(a *attempt, pol *victimPolicy) string {
	g, q := a.g, a.g.Queue
	// Preemption takes from the gang's own queue; reclaim from the queues under an ancestor
	// whose limit keeps the gang out (a department's other projects that borrow).
	queues := []*snapshot.Queue{q}
	if pol.reason == EvictReclaim {
		queues = nil
		for _, v := range pol.victimQueues {
			for x := q.Parent; x != nil; x = x.Parent {
				if x.IsAncestorOf(v) && c.overOwnLimit(x, g, a.set) {
					queues = append(queues, v)
					break
				}
			}
		}
	}
	cands := c.boundCandidates(g, pol, queues)
	spared := !pol.noSpare && c.snap.EvictedForAny(g.Key)
	// Each victim is evicted at once, so the snapshot's accounting (Releasing) already counts
	// what it frees: the policy's floors see it there, and acc stays empty (adding the units to
	// it too would count them twice and refuse the next victim at a floor it keeps).
	var acc freedAcc
	for {
		f := c.gangOverLimit(g, a.set)
		if f == nil {
			return ""
		}
		if f.code != ReasonQueueLimit {
			return f.msg
		}
		var over []int
		for _, d := range c.podDims(a.set[0]) {
			var amt int64
			for _, t := range a.set {
				amt += dimAmount(t, d)
			}
			if c.chainOverLimit(g, d, amt, "") != nil {
				over = append(over, d)
			}
		}
		if !c.evictOneHelping(g, pol, cands, spared, over, &acc) {
			if pol.reason == EvictReclaim {
				return "no pod above its queue's guarantee under the limited queue frees room under the limit; " + f.msg
			}
			return "no lower-priority pod of queue " + q.Name + " that may be preempted frees room under its limit; " + f.msg
		}
	}
}

// boundCandidates lists, most evictable first, the bound pods of queues that pol may take for
// gang g (its own pods, loans and gangs still binding aside); a pod whose budget refused an
// eviction lately is left out, and the budget noted, unless pol overrides budgets.
func (c *cycle) boundCandidates(g *snapshot.Gang, pol *victimPolicy, queues []*snapshot.Queue) []cand {
	var cands []cand
	nodes := c.snap.Nodes()
	seen := map[*snapshot.Task]bool{}
	for _, vq := range queues {
		pn := vq.PreemptibleNodes()
		for id := bitset.NextAnd(pn, nil, nil, 0); id >= 0; id = bitset.NextAnd(pn, nil, nil, id+1) {
			for _, v := range nodes[id].Tasks {
				if seen[v] || v.State != snapshot.TaskBound || v.Gang == nil || v.Gang == g || v.Gang.Queue != vq || v.Gang.Assumed > 0 || v.GPUs.Loan {
					continue
				}
				seen[v] = true
				if pol.verdict(v.Gang).kind != refuseNone {
					continue
				}
				if b := blockedBudget(v, c.now); b != nil && !pol.overrideBudgets {
					pol.refuseBudget(b, v.Gang)
					continue
				}
				k := pol.key(v)
				k.violates = violatesBudget(v, nil) || blockedBudget(v, c.now) != nil
				cands = append(cands, cand{t: v, key: k})
			}
		}
	}
	slices.SortFunc(cands, compareCands)
	return cands
}

// evictOneHelping evicts the first unit of cands (most evictable first) that frees some of dims
// and that pol allows, skipping pods evicted for g lately when spared; it reports whether it
// evicted one. A taken candidate is cleared from cands.
func (c *cycle) evictOneHelping(g *snapshot.Gang, pol *victimPolicy, cands []cand, spared bool, dims []int, acc *freedAcc) bool {
	for i, cd := range cands {
		if cd.t == nil || cd.t.State != snapshot.TaskBound {
			continue
		}
		unit := appendUnit(nil, cd.t)
		if spared && c.spares(g, unit) {
			pol.sparedHit = true
			continue
		}
		helps := false
		for _, d := range dims {
			if unitAmount(unit, d) > 0 {
				helps = true
			}
		}
		if !helps || (pol.allow != nil && pol.allow(unit, acc).kind != refuseNone) {
			continue
		}
		for _, v := range unit {
			if v.State == snapshot.TaskBound {
				c.evictVictim(v, pol)
			}
		}
		cands[i].t = nil
		return true
	}
	return false
}

// freeAncestorRoom evicts, for a gang whose placement would take department x above its bound
// (the reclaim policy's level), pods of x's own projects that the policy may take, most
// evictable first, until x has room for the gang: the rule checkAncestors applies after the
// placement, with these evictions counted. It returns why it could not ("" once there is room).
func (c *cycle) freeAncestorRoom(a *attempt, pol *victimPolicy, x *snapshot.Queue) string {
	g := a.g
	over := func() []int {
		var out []int
		for _, d := range pol.dims {
			if x.Effective(d)-gangHeld(g, d)+a.req[d] > pol.bound(x, d) {
				out = append(out, d)
			}
		}
		return out
	}
	if len(over()) == 0 {
		return ""
	}
	var queues []*snapshot.Queue
	for _, vq := range pol.victimQueues {
		if x.IsAncestorOf(vq) {
			queues = append(queues, vq)
		}
	}
	cands := c.boundCandidates(g, pol, queues)
	spared := !pol.noSpare && c.snap.EvictedForAny(g.Key)
	// Each victim is evicted at once, so the snapshot's accounting (Releasing) already counts
	// what it frees: the policy's floors see it there, and acc stays empty (adding the units to
	// it too would count them twice and refuse the next victim at a floor it keeps).
	var acc freedAcc
	for {
		dims := over()
		if len(dims) == 0 {
			return ""
		}
		if !c.evictOneHelping(g, pol, cands, spared, dims, &acc) {
			return fmt.Sprintf("no pod of department %s's projects above their %s frees room for the gang under the department's %s", x.Name, pol.level, pol.level)
		}
	}
}

// overOwnLimit reports whether queue x's own limit keeps the gang's pods out.
func (c *cycle) overOwnLimit(x *snapshot.Queue, g *snapshot.Gang, set []*snapshot.Task) bool {
	for _, d := range c.podDims(set[0]) {
		lim := x.LimitAt(d)
		if lim < 0 {
			continue
		}
		var amt int64
		for _, t := range set {
			amt += dimAmount(t, d)
		}
		used := x.Allocated.At(d) + x.Loaned.At(d) + x.Held.At(d) - gangHeld(g, d) - x.Releasing.At(d)
		if used+amt > lim {
			return true
		}
	}
	return false
}

// limitedAbove reports whether a limit of one of the gang's queue's ancestors, not its own,
// keeps the pods it needs out.
func (c *cycle) limitedAbove(g *snapshot.Gang) bool {
	tasks, _, minimal := c.planTasks(g)
	if len(tasks) == 0 {
		return false
	}
	set := tasks[:max(minimal, 1)]
	for x := g.Queue.Parent; x != nil; x = x.Parent {
		if c.overOwnLimit(x, g, set) {
			return true
		}
	}
	return false
}
