package engine

import (
	"fmt"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// This file checks queue limits and the rule that non-preemptible work fits in guaranteed quota,
// for a whole gang before it is placed and for each pod as it is placed (a gang is never placed
// partly because a limit was reached halfway: placement is all or nothing).

// gangHeld is what the gang's own holds keep in dimension d of its queue's accounting.
func gangHeld(g *snapshot.Gang, d int) int64 {
	var v int64
	for _, h := range g.Holds() {
		switch d {
		case snapshot.DimGPU:
			v += h.MilliGPU
		case snapshot.DimCPU:
			v += h.MilliCPU
		case snapshot.DimMemory:
			v += h.Memory
		default:
			if h.Node.TypeDim == d {
				v += h.MilliGPU
			}
		}
	}
	return v
}

// podAmount is what a pending pod adds to base dimension d of its queue.
func podAmount(t *snapshot.Task, d int) int64 {
	switch d {
	case snapshot.DimGPU:
		return t.PendingGPU()
	case snapshot.DimCPU:
		return t.Req.MilliCPU
	case snapshot.DimMemory:
		return t.Req.Memory
	}
	return 0
}

// chainOverLimit reports whether adding amt of dimension d to the gang's queue would break a
// limit (ReasonQueueLimit) or the non-preemptible quota rule (ReasonNonPreemptible) of the
// queue or an ancestor, with the code and a message; nil if not. The code is chosen where the
// rule is, never from the message, which names queues and pods. what names what would be
// added ("the gang", "pod ns/p").
func (c *cycle) chainOverLimit(g *snapshot.Gang, d int, amt int64, what string) *placeFailure {
	if amt <= 0 {
		return nil
	}
	noBorrow := gangPolicy(g)
	if noBorrow != nil && noBorrow.Borrowing != v1alpha1.BorrowingNever {
		noBorrow = nil
	}
	for a := g.Queue; a != nil; a = a.Parent {
		if lim := a.LimitAt(d); lim >= 0 {
			// Loans count against limits (not against guarantees or fair share).
			used := a.Allocated.At(d) + a.Loaned.At(d) + a.Held.At(d) - gangHeld(g, d)
			if c.limitsAfterRelease {
				used -= a.Releasing.At(d)
			}
			if used+amt > lim {
				return &placeFailure{code: ReasonQueueLimit, msg: fmt.Sprintf("queue %s: %s limit %s would be exceeded: the queue holds %s and %s needs %s (%s over)",
					a.Name, c.snap.DimName(d), snapshot.FormatAmount(d, lim), snapshot.FormatAmount(d, used), what,
					snapshot.FormatAmount(d, amt), snapshot.FormatAmount(d, used+amt-lim))}
			}
		}
		if !g.Preemptible && a.QuotaSet(d) {
			np, quota := a.AllocatedNP.At(d), a.Quota.At(d)
			if np+amt > quota {
				return &placeFailure{code: ReasonNonPreemptible, msg: fmt.Sprintf("queue %s: non-preemptible work runs only within guaranteed quota, and the %s quota is %s: non-preemptible pods hold %s and %s needs %s (%s missing)",
					a.Name, c.snap.DimName(d), snapshot.FormatAmount(d, quota), snapshot.FormatAmount(d, np), what,
					snapshot.FormatAmount(d, amt), snapshot.FormatAmount(d, np+amt-quota))}
			}
		}
		if noBorrow != nil && a.QuotaSet(d) {
			used, quota := a.Allocated.At(d)+a.Held.At(d)-gangHeld(g, d), a.Quota.At(d)
			if used+amt > quota {
				return &placeFailure{code: ReasonQueuePolicy, msg: fmt.Sprintf("queue %s: %s does not let them borrow above guaranteed quota (borrowing: Never), and the %s quota is %s: the queue holds %s and %s needs %s (%s missing)",
					a.Name, noBorrow.Describe(v1alpha1.RuleBorrowing), c.snap.DimName(d), snapshot.FormatAmount(d, quota),
					snapshot.FormatAmount(d, used), what, snapshot.FormatAmount(d, amt), snapshot.FormatAmount(d, used+amt-quota))}
			}
		}
	}
	return nil
}

// gangPolicy is the policy of the gang's queue for the gang's kind of work (one adapter made
// all of a gang's pods, so they share one kind); nil without a policy.
func gangPolicy(g *snapshot.Gang) *v1alpha1.EffectivePolicy {
	if len(g.Tasks) == 0 {
		return nil
	}
	return g.Queue.Policy(g.Tasks[0].Kind)
}

// gangOverLimit checks the pods the gang needs to start against its queue's limits and quotas:
// gpu, cpu and memory, and the GPU type the pods' node selector pins, if any (other GPU types
// are checked per node as pods are placed).
func (c *cycle) gangOverLimit(g *snapshot.Gang, set []*snapshot.Task) *placeFailure {
	what := "the gang"
	if len(set) == 1 {
		what = "pod " + set[0].Key.String()
	}
	amt := map[int]int64{}
	var dims []int
	for _, t := range set {
		for _, d := range c.podDims(t) {
			if _, ok := amt[d]; !ok {
				dims = append(dims, d)
			}
			amt[d] += dimAmount(t, d)
		}
	}
	for _, d := range dims {
		if f := c.chainOverLimit(g, d, amt[d], what); f != nil {
			return f
		}
	}
	return nil
}

// podOverLimit checks one more pod of the gang against its queue's limits and quotas.
func (c *cycle) podOverLimit(g *snapshot.Gang, t *snapshot.Task) *placeFailure {
	for _, d := range c.podDims(t) {
		if f := c.chainOverLimit(g, d, dimAmount(t, d), "pod "+t.Key.String()); f != nil {
			return f
		}
	}
	return nil
}

// podDims are the queue dimensions a pending pod is known to be charged in.
func (c *cycle) podDims(t *snapshot.Task) []int {
	dims := []int{snapshot.DimGPU, snapshot.DimCPU, snapshot.DimMemory}
	if t.Class != nil && t.Class.PinnedType != "" && t.Req.GPU() {
		if d := c.snap.DimOfType(t.Class.PinnedType); d >= 0 {
			dims = append(dims, d)
		}
	}
	return dims
}

// dimAmount is what a pending pod adds to dimension d (a GPU-type dimension counts its GPUs).
func dimAmount(t *snapshot.Task, d int) int64 {
	if d >= snapshot.NumBaseDims {
		return t.PendingGPU()
	}
	return podAmount(t, d)
}

// typeOverLimit reports whether a pod of the gang may not take GPUs of the type of dimension td.
func (c *cycle) typeOverLimit(g *snapshot.Gang, t *snapshot.Task, td int) bool {
	return c.chainOverLimit(g, td, t.PendingGPU(), "") != nil
}
