package engine

import (
	"slices"
	"time"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Statement is a transaction on the snapshot. Every change the engine makes goes through one:
// Allocate, Evict and the hold operations apply to the snapshot at once (later what-ifs see
// them) and are logged; Rollback undoes the log back to a Checkpoint in reverse order, using
// the snapshot's exact inverses, so a failed what-if leaves no trace; Commit makes the logged
// changes final and returns them as decisions.
//
// Checkpoints are positions in the log since the last Commit; one taken before a Commit is no
// longer valid after it.
type Statement struct {
	snap *snapshot.Snapshot
	now  time.Time
	ops  []op
}

type opKind uint8

const (
	opAllocate opKind = iota
	opEvict
	opHold
	opClearHolds
)

type op struct {
	kind  opKind
	task  *snapshot.Task
	gang  *snapshot.Gang
	evict evictInfo
	holds []snapshot.Hold
}

type evictInfo struct {
	reason      EvictionReason
	message     string
	beneficiary *snapshot.GangKey
	// overrides is the PodDisruptionBudget the eviction goes ahead against (nil: none). A
	// pointer keeps the op small: the log holds one per eviction of every what-if.
	overrides *snapshot.Budget
}

// NewStatement starts a statement on the snapshot; allocations are assumed as started at now.
func NewStatement(snap *snapshot.Snapshot, now time.Time) *Statement {
	return &Statement{snap: snap, now: now}
}

// Checkpoint returns a position to roll back to.
func (s *Statement) Checkpoint() int { return len(s.ops) }

// Allocate assumes a pending pod on a node with a GPU assignment.
func (s *Statement) Allocate(t *snapshot.Task, n *snapshot.Node, a snapshot.Assignment) {
	s.snap.Assume(t, n, a, s.now)
	s.ops = append(s.ops, op{kind: opAllocate, task: t})
}

// Evict marks a bound pod as releasing.
func (s *Statement) Evict(t *snapshot.Task, reason EvictionReason, message string, beneficiary *snapshot.GangKey) {
	s.evict(t, evictInfo{reason: reason, message: message, beneficiary: beneficiary})
}

// EvictOverridingBudget is Evict for a pod whose PodDisruptionBudget the eviction overrides:
// the runtime deletes it rather than asking the Eviction API, which would refuse.
func (s *Statement) EvictOverridingBudget(t *snapshot.Task, reason EvictionReason, message string, beneficiary *snapshot.GangKey, budget *snapshot.Budget) {
	s.evict(t, evictInfo{reason: reason, message: message, beneficiary: beneficiary, overrides: budget})
}

func (s *Statement) evict(t *snapshot.Task, info evictInfo) {
	s.snap.SetReleasing(t, true)
	s.ops = append(s.ops, op{kind: opEvict, task: t, evict: info})
}

// Hold keeps capacity on a node for a gang.
func (s *Statement) Hold(g *snapshot.Gang, h snapshot.Hold) {
	s.snap.AddHold(g, h)
	s.ops = append(s.ops, op{kind: opHold, gang: g})
}

// ClearHolds drops every hold of a gang.
func (s *Statement) ClearHolds(g *snapshot.Gang) {
	if len(g.Holds()) == 0 {
		return
	}
	saved := append([]snapshot.Hold(nil), g.Holds()...)
	s.snap.ClearHolds(g)
	s.ops = append(s.ops, op{kind: opClearHolds, gang: g, holds: saved})
}

// Rollback undoes every change made since the checkpoint, newest first.
func (s *Statement) Rollback(cp int) {
	for i := len(s.ops) - 1; i >= cp; i-- {
		o := &s.ops[i]
		switch o.kind {
		case opAllocate:
			s.snap.Unassume(o.task)
		case opEvict:
			s.snap.SetReleasing(o.task, false)
		case opHold:
			s.snap.PopHold(o.gang)
		case opClearHolds:
			for _, h := range o.holds {
				s.snap.AddHold(o.gang, h)
			}
		}
		*o = op{}
	}
	s.ops = s.ops[:cp]
}

// Commit makes the logged changes final and appends them to res as bindings and evictions, in
// the order they were made; grace gives each evicted pod its grace period. The snapshot
// remembers each eviction's beneficiary (Snapshot.NoteEvictedFor).
func (s *Statement) Commit(res *Result, grace func(*snapshot.Task) time.Duration) {
	s.growResult(res)
	for i := range s.ops {
		o := &s.ops[i]
		switch o.kind {
		case opAllocate:
			res.Bindings = append(res.Bindings, bindingOf(o.task))
		case opEvict:
			t := o.task
			ev := Eviction{
				Pod: t.Key, Gang: t.Gang.Key, Node: t.NodeName, Reason: o.evict.reason,
				Message: o.evict.message, Beneficiary: o.evict.beneficiary, GracePeriod: grace(t),
			}
			if b := o.evict.overrides; b != nil {
				key := b.Key
				ev.OverridesBudget = &key
			}
			if b := o.evict.beneficiary; b != nil {
				if g := s.snap.Gang(*b); g != nil && len(g.Tasks) == 1 {
					ev.BeneficiaryPod = &g.Tasks[0].Key
				}
			}
			res.Evictions = append(res.Evictions, ev)
			if b := o.evict.beneficiary; b != nil && o.evict.reason != EvictLoanReturn {
				s.snap.NoteEvictedFor(*b, t.Key, s.now)
			}
		}
		*o = op{}
	}
	s.ops = s.ops[:0]
}

// growResult makes room in res for the log's bindings and evictions at once: a large reclaim
// commits thousands of evictions in one statement, and growing the slice by doubling as they
// are appended allocated about twice their size (ReclaimLargeJobs_500Node/decision).
func (s *Statement) growResult(res *Result) {
	var binds, evicts int
	for i := range s.ops {
		switch s.ops[i].kind {
		case opAllocate:
			binds++
		case opEvict:
			evicts++
		}
	}
	res.Bindings = slices.Grow(res.Bindings, binds)
	res.Evictions = slices.Grow(res.Evictions, evicts)
}

func bindingOf(t *snapshot.Task) Binding {
	b := Binding{Pod: t.Key, Gang: t.Gang.Key, Node: t.NodeName}
	n := t.Node
	for _, pos := range t.GPUs.Whole {
		b.GPUs = append(b.GPUs, GPU{Index: n.Slots[pos].Index, UUID: n.Slots[pos].UUID})
	}
	if t.GPUs.DRA != nil {
		b.Claims = t.GPUs.DRA.Claims
	}
	if p := t.GPUs.Shared; p >= 0 && t.GPUs.DRA == nil {
		// A share of a DRA GPU is the claim's, made true by the DRA driver: the binder writes the
		// claim, and no reservation pod or gpu-agent takes part.
		b.Shared = &SharedGPU{GPU: GPU{Index: n.Slots[p].Index, UUID: n.Slots[p].UUID}, MilliGPU: t.GPUs.Milli, MemoryMiB: t.GPUs.MemMiB, Loan: t.GPUs.Loan}
	}
	return b
}
