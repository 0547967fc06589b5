package engine

// Consolidation moves preemptible pods to make room for a gang that does not fit although the
// cluster has enough free GPUs for it: the free GPUs are scattered over nodes (for example four
// 8-GPU nodes with two free GPUs each cannot take one 8-GPU pod). A what-if evicts pods to make
// the gang fit, preferring the lowest priority and the fewest GPUs, and then places every evicted
// pod again, on capacity that is free now or once the pods leaving have left (never on what the
// gang's placement takes), as if its controller had already recreated it. Only
// if every one of them fits elsewhere are the evictions made; the gang is nominated on the
// capacity they free, as after reclaim. Victims must have run at least their queue's
// PreemptMinRuntime, must not need a topology domain or sub-groups to be placed again, and must
// be recreatable (Task.Recreatable: a ReplicaSet's pod, a Ray worker, an Argo step that retries
// errors): a bare pod, a Ray head or an Argo step without retries evicted is gone, not moved. The
// rule applies to the unit evicted, so a Ray worker may move alone while its cluster keeps its
// minimum, but never takes its head along.
//
// The moved pods are not held anywhere: the check proves there is room for them now, and the
// allocation order places them next cycle like any other pending pod.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// consolidate tries moves for the waiting gangs, at most Options.MaxConsolidationsPerCycle
// what-ifs a cycle, each a search over the whole cluster.
//
// The budget goes round, by queue and then by gang (consolidationTurns.order): each round takes
// one gang of every queue with gangs waiting, the queues whose gangs had a what-if least lately
// first, and a queue's gangs whose what-if failed in an earlier cycle wait behind its gangs not
// tried since, as kube-scheduler retries an unschedulable pod after the others. A what-if that
// failed fails again until the cluster changes; without turns the first gangs in waiting order
// (hopeless ones of a queue with a lower share) would take the whole budget every cycle, and a
// gang behind them that a move would place would wait as long as they do. With turns a
// fragmented gang is tried within (D+1)·⌈Q/B⌉ cycles, D being the distinct shapes failing ahead
// of it in its own queue, Q the queues with gangs waiting and B the budget, however many gangs
// the other queues submit; within ⌈(D+1)/B⌉ when its queue is alone (TestConsolidationTurns).
//
// A failed what-if changes nothing, so a gang identical to one that failed this cycle
// (failKeyOf: the same pods of the same class in the same queue) would fail the same way: it is
// skipped, takes its turn as failed, and leaves the budget to gangs of other shapes. (The
// failure's message names the pod it tried, so it is not copied to the skipped gang.) A
// reclaim's recreated victims are thousands of such gangs, each a what-if over the whole
// cluster every cycle until the reclaim is done (issue 37's reclaim-large).
func (c *cycle) consolidate() {
	turns := &c.e.turns
	turns.cycle++
	gangs := turns.order(c.waitingOrder())
	next := make(map[snapshot.GangKey]uint64, len(turns.failedAt))
	served := make(map[string]uint64, len(turns.servedAt))
	budget := c.e.opts.MaxConsolidationsPerCycle
	failed := map[failKey]bool{}
	for _, g := range gangs {
		if _, ok := served[g.Queue.Name]; !ok {
			served[g.Queue.Name] = turns.servedAt[g.Queue.Name] // kept while the queue has gangs waiting
		}
		if at, ok := turns.failedAt[g.Key]; ok {
			next[g.Key] = at // kept while the gang waits, whatever this cycle does with it
		}
		if budget <= 0 && len(failed) == 0 {
			continue
		}
		key, cacheable := c.failKeyOf(g)
		if cacheable && failed[key] {
			next[g.Key] = turns.cycle // also past the budget: it waits behind the shapes not tried
			continue
		}
		if budget <= 0 {
			continue
		}
		a := c.newAttempt(g)
		if a == nil || !c.fragmented(a) {
			continue
		}
		budget--
		served[g.Queue.Name] = turns.cycle
		if why := c.tryVictims(g, kindConsolidate); why != "" {
			c.appendReason(g, "consolidate", why)
			failed[key] = cacheable
			next[g.Key] = turns.cycle
		} else {
			delete(next, g.Key)
		}
	}
	turns.failedAt, turns.servedAt = next, served // gangs and queues no longer waiting are forgotten
}

// consolidationTurns is the consolidation budget's memory across cycles: the cycle in which each
// waiting gang's what-if last failed (or was skipped as identical to one that failed), and in
// which each queue's gang last had a what-if. Zero is never.
type consolidationTurns struct {
	cycle    uint64
	failedAt map[snapshot.GangKey]uint64
	servedAt map[string]uint64
}

// consolidationQueue is one queue's gangs in the order they get their turns.
type consolidationQueue struct {
	served uint64
	first  int // the queue's place in waiting order, for ties
	gangs  []*snapshot.Gang
}

// order returns the gangs, given in waiting order, in the order their what-ifs are tried: round
// by round over the queues, those served least lately first (ties in waiting order), each round
// taking each queue's next gang, a queue's gangs not tried since first. A tenant's many hopeless
// gangs, however many shapes they have, then take one what-if of each round, not all of them.
func (t *consolidationTurns) order(gangs []*snapshot.Gang) []*snapshot.Gang {
	byName := map[string]*consolidationQueue{}
	var qs []*consolidationQueue
	for i, g := range gangs {
		qt := byName[g.Queue.Name]
		if qt == nil {
			qt = &consolidationQueue{served: t.servedAt[g.Queue.Name], first: i}
			byName[g.Queue.Name] = qt
			qs = append(qs, qt)
		}
		qt.gangs = append(qt.gangs, g)
	}
	slices.SortStableFunc(qs, func(a, b *consolidationQueue) int {
		if c := cmp.Compare(a.served, b.served); c != 0 {
			return c
		}
		return cmp.Compare(a.first, b.first)
	})
	for _, qt := range qs {
		qt.gangs = stableByFailure(qt.gangs, t.failedAt)
	}
	out := make([]*snapshot.Gang, 0, len(gangs))
	for round := 0; len(qs) > 0; round++ {
		left := qs[:0]
		for _, qt := range qs {
			out = append(out, qt.gangs[round])
			if round+1 < len(qt.gangs) {
				left = append(left, qt)
			}
		}
		qs = left
	}
	return out
}

// stableByFailure sorts gangs by the cycle of their last failed what-if, keeping their order
// within a cycle.
func stableByFailure(gangs []*snapshot.Gang, failedAt map[snapshot.GangKey]uint64) []*snapshot.Gang {
	slices.SortStableFunc(gangs, func(a, b *snapshot.Gang) int {
		return cmp.Compare(failedAt[a.Key], failedAt[b.Key])
	})
	return gangs
}

// fragmented reports whether the nodes the gang may use have, in total, the GPUs it needs free
// now: then only their scattering keeps it out.
func (c *cycle) fragmented(a *attempt) bool {
	var need int64
	for _, t := range a.set {
		need += t.Req.WholeGPUs
	}
	if need == 0 {
		return false // fractions and CPU-only pods are not consolidated for
	}
	cls := c.snap.ClassNodes(a.set[0].Class)
	var free int64
	for k := 1; k <= c.snap.MaxFreeGPUs(); k++ {
		free += int64(k) * int64(bitset.CountAnd(c.snap.NodesWithFreeGPUs(k), cls, nil))
	}
	if free >= need {
		return true
	}
	// GPUs shared by fractions with room left: packed together, their free parts may make
	// whole GPUs (two GPUs half used are one GPU free once one half moves to the other).
	milli := free * snapshot.MilliPerGPU
	nodes := c.snap.Nodes()
	shared := c.snap.NodesWithSharedRoom()
	for id := bitset.NextAnd(shared, cls, nil, 0); id >= 0 && milli < need*snapshot.MilliPerGPU; id = bitset.NextAnd(shared, cls, nil, id+1) {
		for i := range nodes[id].Slots {
			sl := &nodes[id].Slots[i]
			if sl.Owners == 0 && sl.Sharers > 0 && sl.UsedMilli < snapshot.MilliPerGPU {
				milli += snapshot.MilliPerGPU - sl.UsedMilli
			}
		}
	}
	return milli >= need*snapshot.MilliPerGPU
}

func (c *cycle) consolidatePolicy(a *attempt) *victimPolicy {
	g := a.g
	message := "moved to make room for " + claimantName(g) + ", which fits only if pods move; there is room for this pod on another node or GPU"
	return &victimPolicy{
		reason:      EvictConsolidate,
		beneficiary: g,
		verdict: func(vg *snapshot.Gang) refusal {
			switch {
			case !vg.Preemptible:
				return refusal{kind: refuseNonPreemptible}
			case vg.Topology.Required != "" || len(vg.SubGroups) > 0:
				return refusal{kind: refuseNeedsPlacement}
			case c.now.Sub(vg.LastStart) < vg.Queue.Spec.PreemptMinRuntime:
				return refusal{kind: refusePreemptRuntime, q: vg.Queue}
			}
			return refusal{}
		},
		allow: func(unit []*snapshot.Task, _ *freedAcc) refusal {
			if !recreatable(unit) {
				return refusal{kind: refuseNotRecreated}
			}
			return refusal{}
		},
		key: func(v *snapshot.Task) victimKey {
			k := evictabilityKey(v)
			k.gpu = v.GPUs.MilliGPU()
			return k
		},
		message: func(*snapshot.Task) string { return message },
	}
}

// replaceVictims places a shadow of every moved pod on capacity free now, else on capacity free
// once the pods leaving have left (the moved pods' own, say: two halves of one gang on two GPUs
// go together and come back sharing one; their controller recreates them only once they have
// terminated), never on what the beneficiary's placement took. With a reclaim's policy (pol not
// nil), a moved pod that fits nowhere may have room made for it by evicting pods the policy may
// take outright, over-quota work, but no further moves: a guarantee's plan may take one queue's
// borrowed GPU on one node so that a pod within its guarantee moves there from the node the
// gang needs. It says which one fits nowhere ("" when all fit).
func (c *cycle) replaceVictims(moved []*snapshot.Task, pol *victimPolicy) string {
	for _, v := range moved {
		sh := c.snap.Shadow(v)
		n, a, ok := c.findNode(sh, v.Gang, nil, false)
		if !ok {
			n, a, ok = c.findNode(sh, v.Gang, nil, true)
		}
		if !ok && pol != nil {
			move := pol.move
			pol.move = nil
			n, a, ok = c.makeRoom(sh, v.Gang, nil, pol)
			pol.move = move
		}
		if !ok {
			return fmt.Sprintf("pod %s could not be placed again elsewhere", v.Key)
		}
		c.stmt.Allocate(sh, n, a)
	}
	return ""
}

// recreatable reports whether the controllers of every pod of an eviction unit make them again
// with no work lost.
func recreatable(unit []*snapshot.Task) bool {
	for _, t := range unit {
		if !t.Recreatable {
			return false
		}
	}
	return true
}
