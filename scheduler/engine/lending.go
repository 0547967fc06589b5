package engine

// Idle GPU lending. A GPU whose shares are held only by idle interactive pods (notebooks the
// gpu-agent reports fairway.dev/GPUIdle) may run preemptible work on loan until one of them does
// GPU work again.
//
// A loan is kept apart from the GPU's shares (snapshot.GPUSlot.Loans): it never adds to the
// shares placement reads, nor to its queue's Allocated that fair share reads, so the cluster
// looks to every other decision exactly as without it. It counts against its queue's limits and
// is reported as allocated and borrowed. Loans are never victims: evicting one frees nothing
// placement could use.
//
// A GPU is lendable when
//   - its node publishes a GPU inventory (a gpu-agent runs there and reports idleness);
//   - no whole-GPU pod holds it, and at least one pod shares it;
//   - every pod sharing it is interactive, idle for at least its queue's minIdleTime, in a
//     queue whose policy lends, not leaving, and has reported the GPU memory kept in use while
//     idle (fairway.dev/idle-gpu-memory-used);
//   - its memory is known.
//
// Loans take at most the memory left free: the GPU's memory minus what the idle holders keep
// resident (their memory is not swapped out) minus the memory of loans already there, and at
// most the lowest maxLoansPerGPU of the holders' queues.
//
// Borrowers are pending single-pod gangs of preemptible pods that ask for a GPU share (fraction
// or memory; whole GPUs cannot be lent, the kubelet gives a device to one pod only), whose queue
// lets them borrow (OptIn with fairway.dev/borrow-idle-gpu: "true", or Always), and that
// allocation, reclaim, preemption and consolidation could not place this cycle. Node constraints
// and node capacity apply as for any placement.
//
// Return is the first step of every cycle: every loan on a GPU that is no longer lendable is
// evicted (EvictLoanReturn), all loans of that GPU at once, with the short
// Options.LoanReturnGracePeriod.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// notLendable says why a GPU may not host loans now; the text is built only when shown
// (lendState.reason), as the scan of every shared GPU runs each cycle a borrower waits.
type notLendable uint8

const (
	lendableOK notLendable = iota
	noInventory
	heldWhole
	memoryUnknown
	holderLeaving
	holderNoQueue
	holderNotInteractive
	queueDoesNotLend
	holderWorks
	holderIdleTooShort
	idleMemoryUnknown
	holdersGone
	holderSwapFailed
)

// lendState is whether one GPU may host loans now.
type lendState struct {
	ok   bool
	code notLendable
	// t is the holder the code is about, and q its queue, when it is about one.
	t *snapshot.Task
	q *snapshot.Queue
	// freeMiB is the memory left for new loans; maxLoans the cap of loans on the GPU.
	freeMiB  int64
	maxLoans int32
	// swapMiB is what swapping out the holders the gpu-agent reports Eligible would add to
	// freeMiB; swapIn the longest time a swapped-out holder's memory takes to come back.
	swapMiB int64
	swapIn  time.Duration
}

// reason says, when not ok, why the GPU is not (or no longer) lendable.
func (st *lendState) reason(now time.Time) string {
	switch st.code {
	case noInventory:
		return "its node publishes no GPU inventory (no gpu-agent)"
	case heldWhole:
		return "a whole-GPU pod holds it"
	case memoryUnknown:
		return "its memory is unknown"
	case holderLeaving:
		return fmt.Sprintf("pod %s is leaving it", st.t.Key)
	case holderNoQueue:
		return fmt.Sprintf("pod %s, which shares it, belongs to no queue", st.t.Key)
	case holderNotInteractive:
		return fmt.Sprintf("pod %s, which shares it, is not interactive", st.t.Key)
	case queueDoesNotLend:
		return fmt.Sprintf("queue %s of pod %s does not lend idle GPUs (spec.idleLending.lend)", st.q.Name, st.t.Key)
	case holderWorks:
		return fmt.Sprintf("pod %s does GPU work (it is not idle)", st.t.Key)
	case holderIdleTooShort:
		return fmt.Sprintf("pod %s has been idle for %s, less than the %s its queue %s asks",
			st.t.Key, now.Sub(st.t.IdleSince()).Round(time.Second), st.q.Lending.MinIdleTime, st.q.Name)
	case idleMemoryUnknown:
		return fmt.Sprintf("the GPU memory pod %s keeps while idle is unknown", st.t.Key)
	case holdersGone:
		return "the pods it was lent from have left"
	case holderSwapFailed:
		return fmt.Sprintf("pod %s's GPU memory could not be restored from host RAM (%s)", st.t.Key, st.t.Swap().Reason)
	}
	return ""
}

// lendable evaluates the GPU at position pos of node n (see the file comment).
func (c *cycle) lendable(n *snapshot.Node, pos int) lendState {
	g := &n.Slots[pos]
	switch {
	case !n.Inventory:
		return lendState{code: noInventory}
	case g.Owners > 0:
		return lendState{code: heldWhole}
	case g.MemoryMiB <= 0:
		return lendState{code: memoryUnknown}
	}
	st := lendState{ok: true, maxLoans: 1 << 30}
	holders := 0
	var idleMem int64
	for _, t := range n.Tasks {
		if t.GPUs.Shared != int32(pos) || t.Req.Reservation || t.GPUs.Loan {
			continue
		}
		if t.State == snapshot.TaskReleasing {
			return lendState{code: holderLeaving, t: t}
		}
		swap := t.Swap()
		if swap.State == v1alpha1.GPUSwapRestoreFailed {
			// Its memory may still come back only onto this GPU: never lend it.
			return lendState{code: holderSwapFailed, t: t}
		}
		holders++
		var q *snapshot.Queue
		if t.Gang != nil {
			q = t.Gang.Queue
		}
		switch {
		case q == nil:
			return lendState{code: holderNoQueue, t: t}
		case !t.Interactive:
			return lendState{code: holderNotInteractive, t: t}
		case !q.Lending.Lend:
			return lendState{code: queueDoesNotLend, t: t, q: q}
		case !t.Idle:
			return lendState{code: holderWorks, t: t}
		case c.now.Sub(t.IdleSince()) < q.Lending.MinIdleTime:
			return lendState{code: holderIdleTooShort, t: t, q: q}
		case t.IdleMemMiB < 0:
			return lendState{code: idleMemoryUnknown, t: t}
		}
		// A swapped-out holder keeps resident only what its GPU held beyond its own processes.
		idleMem += max(t.IdleMemMiB-swap.SwappedMiB(), 0)
		switch swap.State {
		case v1alpha1.GPUSwapEligible:
			st.swapMiB += min(swap.Bytes>>20, t.IdleMemMiB)
		case v1alpha1.GPUSwappedOut:
			st.swapIn = max(st.swapIn, swap.SwapIn())
		}
		st.maxLoans = min(st.maxLoans, q.Lending.MaxLoansPerGPU)
	}
	if holders == 0 {
		return lendState{code: holdersGone}
	}
	st.freeMiB = g.MemoryMiB - idleMem - int64(g.LoanMemMiB)
	return st
}

// returnLoans evicts every loan on a GPU that is no longer lendable: step 0 of the cycle.
func (c *cycle) returnLoans() {
	for _, n := range c.snap.Nodes() {
		if n == nil || n.Loans == 0 {
			continue
		}
		for pos := range n.Slots {
			g := &n.Slots[pos]
			if g.Loans == g.RelLoans {
				continue
			}
			st := c.lendable(n, pos)
			var why string
			switch {
			case !st.ok:
				why = st.reason(c.now)
			case st.freeMiB < 0:
				why = "the memory its holders keep grew: the loans no longer fit"
			case int32(g.Loans-g.RelLoans) > st.maxLoans:
				why = fmt.Sprintf("its holders' queues now allow %s on it", count(int(st.maxLoans), "loan", "loans"))
			default:
				continue
			}
			msg := fmt.Sprintf("GPU %d of node %s goes back to its holders: %s", g.Index, n.Name, why)
			for _, t := range n.Tasks {
				// A loan whose binding is in flight goes back in the cycle after the binding is
				// confirmed, as nothing is evicted while its binding is in flight.
				if t.State == snapshot.TaskBound && !t.Assumed && t.GPUs.Loan && t.GPUs.Shared == int32(pos) {
					c.stmt.Evict(t, EvictLoanReturn, msg, nil)
				}
			}
		}
	}
	c.stmt.Commit(c.res, c.loanGrace)
}

// loanGrace is the grace period of a returned loan: the loan-return budget
// (Options.LoanReturnGracePeriod) less the time the swapped-out holders of its GPU take to get
// their memory back (the gpu-agent's estimate), so that the owner has its GPU, memory
// included, within the budget; never below zero.
func (c *cycle) loanGrace(t *snapshot.Task) time.Duration {
	grace := c.e.opts.LoanReturnGracePeriod
	if t.Node == nil || t.GPUs.Shared < 0 {
		return grace
	}
	var swapIn time.Duration
	for _, h := range t.Node.Tasks {
		if sw := h.Swap(); h.GPUs.Shared == t.GPUs.Shared && !h.GPUs.Loan && sw.State == v1alpha1.GPUSwappedOut {
			swapIn = max(swapIn, sw.SwapIn())
		}
	}
	return max(grace-swapIn, 0)
}

// borrower reports whether a gang may run on loan, and if not whether it asked to (for its
// reason).
func borrower(g *snapshot.Gang) (t *snapshot.Task, ok bool, why string) {
	if len(g.Tasks) != 1 || len(g.Pending) != 1 || g.Queue == nil {
		return nil, false, ""
	}
	t = g.Pending[0]
	pol := g.Queue.Lending
	asked := t.BorrowOptIn || pol.MayBorrow(false)
	switch {
	case !t.Placeable() || !t.Req.Shared() || t.Req.WholeGPUs > 0:
		return nil, false, ""
	case !g.Preemptible:
		if t.BorrowOptIn {
			return nil, false, "only preemptible pods borrow idle GPUs"
		}
		return nil, false, ""
	case !pol.MayBorrow(t.BorrowOptIn):
		if asked {
			return nil, false, fmt.Sprintf("queue %s does not borrow idle GPUs (spec.idleLending.borrow %s)", g.Queue.Name, pol.Borrow)
		}
		return nil, false, ""
	}
	return t, true, ""
}

// lentGPU is a lendable GPU found by lendIdleGPUs.
type lentGPU struct {
	n   *snapshot.Node
	pos int
	st  lendState
}

// lendIdleGPUs places, on loan, the borrowers that nothing else could place this cycle.
func (c *cycle) lendIdleGPUs() {
	type cand struct {
		g *snapshot.Gang
		t *snapshot.Task
	}
	// c.unplaced holds each gang once.
	var cands []cand
	for _, g := range c.unplaced {
		if c.placed[g] {
			continue
		}
		if t, ok, why := borrower(g); ok {
			cands = append(cands, cand{g, t})
		} else if why != "" {
			c.appendReason(g, "idle GPU lending", why)
		}
	}
	if len(cands) == 0 {
		return
	}
	if !c.snap.AnyQueueLends() {
		for _, b := range cands {
			c.appendReason(b.g, "idle GPU lending", "no queue lends idle GPUs (spec.idleLending.lend)")
		}
		return
	}
	var gpus []lentGPU
	// Examples of shared GPUs that are not lendable, for the reasons: a user asks "why is my
	// notebook's GPU not lent?" of the pods that wait for one.
	var notLent [3]lentGPU
	notLentCount := 0
	for _, n := range c.snap.Nodes() {
		if n == nil || !n.Inventory {
			continue
		}
		for pos := range n.Slots {
			if n.Slots[pos].Sharers == 0 {
				continue
			}
			st := c.lendable(n, pos)
			if st.ok {
				gpus = append(gpus, lentGPU{n: n, pos: pos, st: st})
				continue
			}
			if notLentCount < len(notLent) {
				notLent[notLentCount] = lentGPU{n: n, pos: pos, st: st}
			}
			notLentCount++
		}
	}
	if len(gpus) == 0 {
		none := "no GPU is lendable (none is shared only by idle interactive pods of queues that lend)"
		if notLentCount > 0 {
			shown := min(notLentCount, len(notLent))
			parts := make([]string, shown)
			for i, l := range notLent[:shown] {
				parts[i] = fmt.Sprintf("node %s GPU %d: %s", l.n.Name, l.n.Slots[l.pos].Index, l.st.reason(c.now))
			}
			none = fmt.Sprintf("no GPU is lendable; of %s: %s", count(notLentCount, "shared GPU", "shared GPUs"), strings.Join(parts, "; "))
			if notLentCount > shown {
				none += "; ..."
			}
		}
		for _, b := range cands {
			c.appendReason(b.g, "idle GPU lending", none)
		}
		return
	}
	for _, b := range cands {
		if why := c.lend(b.g, b.t, gpus); why != "" {
			c.appendReason(b.g, "idle GPU lending", why)
		}
	}
}

// lend places one borrower on the lendable GPU with the least free memory that takes it, or
// says why none does.
func (c *cycle) lend(g *snapshot.Gang, t *snapshot.Task, gpus []lentGPU) string {
	best := -1
	var bestMilli, bestMem int64
	var why [5]int
	// overLimit is the first limit a loan on a GPU would exceed (they may differ by GPU type).
	var overLimit string
	what := "a loan of pod " + t.Key.String()
	for i := range gpus {
		l := &gpus[i]
		n, s := l.n, &l.n.Slots[l.pos]
		mem, milli := t.Req.SharedMemMiB(s.MemoryMiB), t.Req.SharedMilli(s.MemoryMiB)
		switch {
		case int32(s.Loans) >= l.st.maxLoans:
			why[0]++
			continue
		case milli < 0 || mem > l.st.freeMiB:
			why[1]++
			continue
		case !c.snap.ClassNodes(t.Class).Has(n.ID):
			why[2]++
			continue
		case policyFit(n, t, g) != Fits || FitsNode(n, &t.Req, g, false) != Fits:
			why[3]++
			continue
		}
		f := c.chainOverLimit(g, snapshot.DimGPU, milli, what)
		if f == nil && n.TypeDim >= 0 {
			f = c.chainOverLimit(g, n.TypeDim, milli, what)
		}
		if f != nil {
			why[4]++
			if overLimit == "" {
				overLimit = f.msg
			}
			continue
		}
		if best < 0 || l.st.freeMiB < gpus[best].st.freeMiB {
			best, bestMilli, bestMem = i, milli, mem
		}
	}
	if best < 0 && why[1] > 0 {
		if msg := c.askSwap(g, t, gpus); msg != "" {
			return msg
		}
	}
	if best < 0 {
		var parts []string
		if why[4] == len(gpus) { // the limit is all that stands in the way
			return overLimit
		}
		for i, phrase := range [][2]string{{"at its loan cap", "at their loan cap"}, {"too little free memory", "too little free memory"},
			{"node selector/affinity/taints", "node selector/affinity/taints"}, {"node cpu/memory/pods", "node cpu/memory/pods"}, {"over a queue limit", "over a queue limit"}} {
			if why[i] > 0 {
				parts = append(parts, count(why[i], phrase[0], phrase[1]))
			}
		}
		msg := fmt.Sprintf("%s, none takes pod %s: %s", count(len(gpus), "lendable GPU", "lendable GPUs"), t.Key, strings.Join(parts, ", "))
		if overLimit != "" {
			msg += " (" + overLimit + ")"
		}
		return msg
	}
	l := &gpus[best]
	c.stmt.ClearHolds(g)
	c.stmt.Allocate(t, l.n, snapshot.Assignment{Shared: int32(l.pos), Milli: bestMilli, MemMiB: bestMem, Loan: true})
	c.commit()
	c.placed[g] = true
	g.WaitingSince = time.Time{}
	delete(c.reasons, g)
	l.st.freeMiB -= bestMem
	return ""
}

// askSwap looks, for a borrower that no lendable GPU has the free memory for, for one that would
// have it once the holders the gpu-agent reports Eligible are swapped out to host RAM (the
// least such memory that does), and asks the agent to swap those holders out
// (Result.SwapRequests). The borrower keeps waiting: the GPU is lent in a later cycle, once the
// agent reports the memory on the host, so that no loan starts before its memory is free. It
// returns the borrower's reason, or "" when no GPU would do.
func (c *cycle) askSwap(g *snapshot.Gang, t *snapshot.Task, gpus []lentGPU) string {
	best := -1
	for i := range gpus {
		l := &gpus[i]
		n, s := l.n, &l.n.Slots[l.pos]
		mem, milli := t.Req.SharedMemMiB(s.MemoryMiB), t.Req.SharedMilli(s.MemoryMiB)
		if l.st.swapMiB <= 0 || milli < 0 || mem > l.st.freeMiB+l.st.swapMiB || int32(s.Loans) >= l.st.maxLoans ||
			!c.snap.ClassNodes(t.Class).Has(n.ID) || policyFit(n, t, g) != Fits || FitsNode(n, &t.Req, g, false) != Fits {
			continue
		}
		if best < 0 || l.st.freeMiB+l.st.swapMiB < gpus[best].st.freeMiB+gpus[best].st.swapMiB {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	l := &gpus[best]
	pos := int32(l.pos)
	for _, h := range l.n.Tasks {
		if h.GPUs.Shared == pos && !h.GPUs.Loan && !h.Req.Reservation && h.Swap().State == v1alpha1.GPUSwapEligible &&
			!slices.ContainsFunc(c.res.SwapRequests, func(r SwapRequest) bool { return r.Pod == h.Key }) {
			c.res.SwapRequests = append(c.res.SwapRequests, SwapRequest{Pod: h.Key, IdleSince: h.IdleSince()})
		}
	}
	return fmt.Sprintf("GPU %d of node %s is lent to pod %s once its idle holders' GPU memory (%d MiB) is swapped to host RAM; asked the gpu-agent",
		l.n.Slots[l.pos].Index, l.n.Name, t.Key, l.st.swapMiB)
}
