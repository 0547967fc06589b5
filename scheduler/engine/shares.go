package engine

import (
	"math"

	"github.com/fairway-sched/fairway/scheduler/fairshare"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// computeFairShare writes every queue's FairShare. Capacity per dimension is what fairway may
// hand out: the allocatable of schedulable nodes (and what fairway's pods already hold on
// cordoned ones), minus what pods fairway does not account take. A queue that is not ready
// demands only what it holds.
func (c *cycle) computeFairShare() {
	queues := c.snap.Queues()
	nd := c.snap.NumDims()
	e := c.e
	e.fsCap = resizeInts(e.fsCap, nd)
	for _, n := range c.snap.Nodes() {
		if n == nil {
			continue
		}
		gpu := int64(len(n.Slots))*snapshot.MilliPerGPU - n.UnmanagedMilliGPU - foreignClaimedMilli(n)
		cpu := n.Allocatable.MilliCPU - n.Unmanaged.MilliCPU
		mem := n.Allocatable.Memory - n.Unmanaged.Memory
		if n.Unschedulable {
			gpu = n.UsedMilliGPU - n.UnmanagedMilliGPU
			cpu = n.Used.MilliCPU - n.Unmanaged.MilliCPU
			mem = n.Used.Memory - n.Unmanaged.Memory
		}
		e.fsCap[snapshot.DimGPU] += max(gpu, 0)
		e.fsCap[snapshot.DimCPU] += max(cpu, 0)
		e.fsCap[snapshot.DimMemory] += max(mem, 0)
		if n.TypeDim >= 0 {
			e.fsCap[n.TypeDim] += max(gpu, 0)
		}
	}
	index := make(map[*snapshot.Queue]int, len(queues))
	for i, q := range queues {
		index[q] = i
	}
	if cap(e.fsIn) < len(queues) {
		e.fsIn = make([]fairshare.Queue, len(queues))
	}
	e.fsIn = e.fsIn[:len(queues)]
	for i, q := range queues {
		in := &e.fsIn[i]
		in.Parent = -1
		if q.Parent != nil {
			in.Parent = index[q.Parent]
		}
		in.Priority = q.Spec.Priority
		if cap(in.Resources) < nd {
			in.Resources = make([]fairshare.Resource, nd)
		}
		in.Resources = in.Resources[:nd]
		for d := 0; d < nd; d++ {
			demand := q.Demand(d)
			if q.NotReadyReason != "" {
				demand = q.Allocated.At(d)
			}
			in.Resources[d] = fairshare.Resource{Quota: q.Quota.At(d), Weight: q.Weight.At(d), Limit: q.LimitAt(d), Demand: demand}
			if d < snapshot.NumBaseDims {
				in.Resources[d].Usage = q.Usage[d]
			}
		}
	}
	e.solver.UsageWeight = e.opts.FairShareUsageWeight
	fair := e.solver.Solve(e.fsIn, e.fsCap)
	for i, q := range queues {
		if len(q.FairShare) != nd {
			q.FairShare = make(snapshot.Amounts, nd)
		}
		copy(q.FairShare, fair[i])
	}
}

func resizeInts(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// dominantShare is a queue's largest effective/fair-share ratio across resources: how far it is
// towards (or beyond) its fair share in the resource it uses most. A queue with no fair share of
// something it holds is infinitely far.
//
// Only gpu, cpu and memory count: per-GPU-type shares are enforced through limits and quotas.
func dominantShare(q *snapshot.Queue) float64 {
	share := 0.0
	for d := 0; d < snapshot.NumBaseDims && d < len(q.FairShare); d++ {
		eff := q.Effective(d)
		if eff <= 0 {
			continue
		}
		f := q.FairShare[d]
		if f <= 0 {
			return math.Inf(1)
		}
		share = max(share, float64(eff)/float64(f))
	}
	return share
}

// belowGuarantee reports whether a queue holds less than its guarantee (quota capped by demand)
// of some resource with a quota.
func belowGuarantee(q *snapshot.Queue) bool {
	for d := 0; d < snapshot.NumBaseDims && d < len(q.Quota); d++ {
		quota := q.Quota[d]
		if quota > 0 && q.Effective(d) < min(quota, q.Demand(d)) {
			return true
		}
	}
	return false
}

// deserved is a queue's guarantee of dimension d: its quota, capped by its demand.
func deserved(q *snapshot.Queue, d int) int64 { return min(q.Quota.At(d), q.Demand(d)) }
