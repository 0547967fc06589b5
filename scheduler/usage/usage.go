// Package usage keeps every queue's usage history: what makes fair share fair over time rather
// than in each cycle alone (docs/fair-share.md).
//
// A queue's history per resource (gpu, cpu, memory) is its allocation integrated over time with
// exponential decay: a GPU-hour used one half-life ago counts half as much as one used now. The
// cluster's capacity is integrated the same way, and a queue's usage share is the ratio of the
// two, so a queue that held half the cluster all week has a share of 0.5, and one that used a
// little of an empty cluster has a small share, not a large one. The part of it above the
// queue's guarantee is kept too: the engine reads its share (snapshot.Queue.Usage) and moves the
// division of the capacity above guarantees against the queues that used more of it than their
// weight entitled them to (fairshare.Solver). Use within a guarantee costs nothing.
//
// The history is pure arithmetic on what the caller observes: around every cycle, Advance to
// the cycle's time and Apply the shares to the snapshot before it, Record the allocations after
// it. The scheduler runtime does so every cycle and keeps it in Queue status (v1alpha1.QueueUsage) so that it survives restarts and
// leader changes, and fairway sim observes on simulated time.
package usage

import (
	"math"
	"time"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// dims are the resources with a history, in the snapshot's base-dimension order.
var dims = [snapshot.NumBaseDims]string{"gpu", "cpu", "memory"}

// History is the decayed usage of every queue. The zero value and nil are disabled: they keep
// nothing and set no usage. A History is not safe for concurrent use: one goroutine (the
// scheduling loop) owns it.
type History struct {
	halfLife time.Duration
	// last is when the latest observation was made; zero before the first.
	last time.Time
	// capacity is the decayed capacity integral, rate the capacity at the last observation;
	// both in engine units (milli-GPU, milli-CPU, bytes) times seconds.
	capacity, capRate [snapshot.NumBaseDims]float64
	queues            map[string]*queue
	// restoredAt is when the capacity history restored was observed.
	restoredAt time.Time
}

type queue struct {
	// used is the decayed allocation integral, rate the allocation at the last observation;
	// over and overRate the same for the allocation above the queue's guarantee (its quota),
	// which is what fair share weighs.
	used, rate, over, overRate [snapshot.NumBaseDims]float64
	// seen marks the queues of the latest observation; the others are dropped.
	seen bool
}

// New returns a history with the given half-life; 0 (or less) returns nil, which keeps none.
func New(halfLife time.Duration) *History {
	if halfLife <= 0 {
		return nil
	}
	return &History{halfLife: halfLife, queues: map[string]*queue{}}
}

// HalfLife is the history's half-life, 0 when disabled.
func (h *History) HalfLife() time.Duration {
	if h == nil {
		return 0
	}
	return h.halfLife
}

// decay is the factor by which the weight of past usage falls over dt.
func (h *History) decay(dt time.Duration) float64 {
	return math.Exp2(-dt.Seconds() / h.halfLife.Seconds())
}

// integral is what a constant rate of 1 held over dt adds to a decayed integral at its end, f
// being decay(dt): the integral of 2^(-(dt-s)/halfLife) ds over [0, dt].
func (h *History) integral(f float64) float64 {
	return (1 - f) * h.halfLife.Seconds() / math.Ln2
}

// Advance integrates what every queue held since the previous observation (its allocation then)
// up to now. Call it before Apply, so that the cycle about to run sees the usage up to its own
// time. A clock that goes back integrates nothing.
func (h *History) Advance(now time.Time) {
	if h == nil {
		return
	}
	if !h.last.IsZero() && now.After(h.last) {
		dt := now.Sub(h.last)
		f := h.decay(dt)
		k := h.integral(f)
		for d := range h.capacity {
			h.capacity[d] = h.capacity[d]*f + h.capRate[d]*k
		}
		for _, q := range h.queues {
			for d := range q.used {
				q.used[d] = q.used[d]*f + q.rate[d]*k
				q.over[d] = q.over[d]*f + q.overRate[d]*k
			}
		}
	}
	if h.last.IsZero() || now.After(h.last) {
		h.last = now
	}
}

// Record remembers what every queue holds now (the snapshot's allocations after a cycle, and the
// capacity the cycle divided), to be integrated by the next Advance. Queues no longer in the
// snapshot are forgotten.
func (h *History) Record(snap *snapshot.Snapshot, capacity engine.Amounts) {
	if h == nil {
		return
	}
	for d, name := range dims {
		h.capRate[d] = float64(capacity[name])
	}
	for _, q := range h.queues {
		q.seen = false
	}
	for _, sq := range snap.Queues() {
		q := h.queues[sq.Name]
		if q == nil {
			q = &queue{}
			h.queues[sq.Name] = q
		}
		q.seen = true
		for d := range q.rate {
			a := sq.Allocated.At(d)
			q.rate[d] = float64(a)
			q.overRate[d] = float64(max(a-sq.Quota.At(d), 0))
		}
	}
	for name, q := range h.queues {
		if !q.seen {
			delete(h.queues, name)
		}
	}
}

// Apply writes every queue's over-quota usage share into the snapshot (snapshot.Queue.Usage),
// for the next cycle. A nil History writes nothing: the shares stay zero.
func (h *History) Apply(snap *snapshot.Snapshot) {
	if h == nil {
		return
	}
	for _, sq := range snap.Queues() {
		sq.Usage = h.OverQuotaShare(sq.Name)
	}
}

// OverQuotaShare is a queue's recent use above its guarantee per resource: decayed, over the
// cluster's decayed capacity, in [0, 1]. Fair share over time weighs it.
func (h *History) OverQuotaShare(name string) [snapshot.NumBaseDims]float64 {
	return h.share(name, func(q *queue) *[snapshot.NumBaseDims]float64 { return &q.over })
}

// UsedShare is a queue's recent use per resource, guarantee included: the fraction of the
// cluster it had over the window.
func (h *History) UsedShare(name string) [snapshot.NumBaseDims]float64 {
	return h.share(name, func(q *queue) *[snapshot.NumBaseDims]float64 { return &q.used })
}

func (h *History) share(name string, of func(*queue) *[snapshot.NumBaseDims]float64) [snapshot.NumBaseDims]float64 {
	var out [snapshot.NumBaseDims]float64
	if h == nil {
		return out
	}
	q := h.queues[name]
	if q == nil {
		return out
	}
	v := of(q)
	for d := range out {
		if c := h.capacity[d]; c > 0 {
			out[d] = min(max(v[d]/c, 0), 1)
		}
	}
	return out
}

// Totals are one queue's decayed usage (all of it, and the part above its guarantee) and the
// cluster's decayed capacity, per resource in engine units times seconds: what is kept across
// restarts.
type Totals struct {
	Used, OverQuota, Capacity [snapshot.NumBaseDims]float64
	// At is when they were observed.
	At time.Time
}

// Totals is what h holds for a queue, and false when it holds nothing for it.
func (h *History) Totals(name string) (Totals, bool) {
	if h == nil {
		return Totals{}, false
	}
	q := h.queues[name]
	if q == nil || h.last.IsZero() {
		return Totals{}, false
	}
	return Totals{Used: q.used, OverQuota: q.over, Capacity: h.capacity, At: h.last}, true
}

// Restore takes a queue's totals kept by an earlier scheduler, decayed from when they were
// observed to now (what the queues held while no scheduler observed is not counted). The
// cluster's capacity history is taken from the most recent totals restored. Call it before the
// first Advance; it replaces what h holds for the queue.
func (h *History) Restore(name string, t Totals, now time.Time) {
	if h == nil {
		return
	}
	f := 1.0
	if now.After(t.At) {
		f = h.decay(now.Sub(t.At))
	}
	q := &queue{seen: true}
	for d := range q.used {
		q.used[d] = max(t.Used[d], 0) * f
		q.over[d] = max(t.OverQuota[d], 0) * f
	}
	h.queues[name] = q
	if h.restoredAt.IsZero() || t.At.After(h.restoredAt) {
		h.restoredAt = t.At
		for d := range h.capacity {
			h.capacity[d] = max(t.Capacity[d], 0) * f
		}
	}
}
