package engine

import (
	"slices"
	"time"

	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/fairway-sched/fairway/scheduler/fairshare"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Engine runs scheduling cycles. It keeps scratch buffers between cycles; it is not safe for
// concurrent use, and like the snapshot it belongs to one goroutine.
type Engine struct {
	opts   Options
	solver fairshare.Solver
	fsIn   []fairshare.Queue
	fsCap  []int64
	// told is what gangs' reasons say, for appendReason; reset every cycle, its memory kept.
	told toldSet
	// frag weighs placements by the fragmentation they cause (fragscore.go); kept across cycles.
	frag *fragModel
	// cel caches the compiled CEL selectors of DRA device classes and claims (dra.go).
	cel *cel.Cache
	// turns is when each waiting gang's consolidation what-if last failed, and each queue's
	// gangs last had one (consolidate.go).
	turns consolidationTurns
}

// New returns an engine with the given options (zero fields take their defaults).
func New(opts Options) *Engine {
	return &Engine{opts: opts.withDefaults()}
}

// Options returns the engine's options, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// cycle is the state of one Schedule call.
type cycle struct {
	e    *Engine
	snap *snapshot.Snapshot
	now  time.Time
	stmt *Statement
	res  *Result

	// unplaced are the gangs allocation could not place for lack of capacity, in the order they
	// were tried; reclaim, preempt and consolidation work through them.
	unplaced []*snapshot.Gang
	// reasons holds the latest reason of every gang tried this cycle.
	reasons map[*snapshot.Gang]GangReason
	// placed are gangs placed or nominated this cycle.
	placed map[*snapshot.Gang]bool
	// failCache remembers capacity failures of identical requests within the allocate step.
	failCache map[failKey]placeFailure
	// limited are the gangs allocation refused for a queue limit: preemption may make room under
	// the limit by evicting lower-priority pods of the same queue.
	limited map[*snapshot.Gang]bool
	// limitsAfterRelease makes limit checks count releasing pods as gone (a preemption what-if
	// that freed room under a limit).
	limitsAfterRelease bool
	// classFits caches FilterClass.Matches by class and node for explain, which asks it of every
	// node for every gang it explains: node objects do not change within a cycle, and matching
	// node affinity allocates (issue 37: in a reclaim of 4,000 one-GPU jobs at 500 nodes it was
	// 40% of the scheduler's CPU).
	classFits map[*snapshot.FilterClass][]snapshot.FitCode

	scratch scratch
}

// Schedule runs one cycle on the snapshot at time now and returns its decisions. On return the
// snapshot reflects them (see the package documentation).
func (e *Engine) Schedule(snap *snapshot.Snapshot, now time.Time) Result {
	c := &cycle{
		e: e, snap: snap, now: now, stmt: NewStatement(snap, now), res: &Result{},
		reasons:   make(map[*snapshot.Gang]GangReason),
		placed:    make(map[*snapshot.Gang]bool),
		failCache: make(map[failKey]placeFailure),
		limited:   make(map[*snapshot.Gang]bool),
	}
	e.told.reset()

	// 0. Lent GPUs whose holders woke (or left) go back to them before anything else.
	c.returnLoans()
	// 1. Housekeeping: drop holds of gangs that no longer wait or whose time ran out.
	c.expireHolds()
	// 2. Fair share of every queue.
	c.computeFairShare()
	// 3. Place pending gangs on free capacity; gangs running below their minimum first.
	c.allocate()
	// 4. Evict gangs that ran below their minimum for too long and could not be completed.
	c.evictStaleGangs()
	// 5. Reclaim borrowed capacity for queues below their fair share.
	c.reclaim()
	// 6. Preempt lower priority work within a queue.
	c.preempt()
	// 7. Move preemptible pods to make room for a gang that only fragmentation blocks.
	c.consolidate()
	// 8. Lend idle interactive pods' GPUs to borrowers nothing else could place, and return
	// the loans of GPUs this cycle's placements made unlendable (a pod that works joined them).
	c.lendIdleGPUs()
	c.returnLoans()
	// 9. Hold capacity for gangs that waited too long.
	c.holdForStarving()
	// The nodes the holds are on, for the runtime to keep other schedulers off.
	c.heldNodes()
	// 10. Reasons for every waiting gang, status of every queue.
	c.report()

	if v := e.opts.Logger.V(2); v.Enabled() {
		v.Info("cycle done", "now", now, "bindings", len(c.res.Bindings), "nominations", len(c.res.Nominations),
			"evictions", len(c.res.Evictions), "unschedulable", len(c.res.Unschedulable))
	}
	return *c.res
}

// expireHolds drops the holds of gangs that have nothing left to place or whose holds lapsed,
// and the evictions remembered for longer than a hold lasts (HoldTTL; see spared).
// It runs before any statement; the drops are not decisions to report.
func (c *cycle) expireHolds() {
	c.snap.ForgetEvictedBy(c.now.Add(-c.e.opts.HoldTTL))
	for _, g := range slices.Clone(c.snap.HeldGangs()) {
		expired := len(g.Pending) == 0
		for _, h := range g.Holds() {
			if !h.Expires.After(c.now) {
				expired = true
			}
		}
		if expired {
			c.snap.ClearHolds(g)
		}
	}
}

// commit makes the statement's changes final.
func (c *cycle) commit() { c.stmt.Commit(c.res, c.evictionGrace) }

// evictionGrace is the grace period of an eviction: the pod's own terminationGracePeriodSeconds
// (Options.EvictionGracePeriod when its spec sets none), at most its queue's
// maxEvictionGracePeriod. The time to checkpoint is the workload's to choose; the queue's
// administrator bounds how long capacity taken back from it stays occupied.
func (c *cycle) evictionGrace(t *snapshot.Task) time.Duration {
	g := c.e.opts.EvictionGracePeriod
	if t.Grace >= 0 {
		g = t.Grace
	}
	if t.Gang != nil {
		g = t.Gang.Queue.EvictionGrace(g)
	}
	return g
}

// setReason records why a gang waits; later steps overwrite earlier ones.
func (c *cycle) setReason(g *snapshot.Gang, code ReasonCode, msg string) {
	c.reasons[g] = GangReason{Gang: g.Key, Queue: g.QueueName(), Code: code, Message: msg}
	c.e.told.forget(g)
}
