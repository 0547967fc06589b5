package usage_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

// snap is a cluster of 8-GPU nodes and queues, the first holding busy GPUs.
func snap(t testing.TB, queues, nodes, busy int) *snapshot.Snapshot {
	t.Helper()
	s := snapshot.New()
	for i := range nodes {
		if err := s.UpsertNode(testutil.MakeNode(fmt.Sprintf("n%03d", i)).GPUs(8, "H100").Obj()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range queues {
		if err := s.UpsertQueue(testutil.MakeQueue(fmt.Sprintf("q%03d", i)).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range busy {
		p := testutil.MakePod("q000", fmt.Sprintf("p%03d", i)).Queue("q000").GPU(1).Node(fmt.Sprintf("n%03d", i/8)).Obj()
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestHalfLife: a queue that held half the cluster for a long time has a usage share of one
// half; after one half-life of holding nothing, its decayed use is half of what it was, and the
// share (against a capacity that kept accumulating) lower still. Restoring the totals an earlier
// scheduler kept gives the same shares.
func TestHalfLife(t *testing.T) {
	s := snap(t, 2, 2, 8)
	h := usage.New(time.Hour)
	capacity := engine.Amounts{"gpu": 16000}
	now := testutil.Epoch
	for range 24 * 60 {
		h.Advance(now)
		h.Record(s, capacity)
		now = now.Add(time.Minute)
	}
	h.Advance(now)
	if got := h.UsedShare("q000")[snapshot.DimGPU]; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("used share after a day at half the cluster: %v, want 0.5", got)
	}
	if got := h.OverQuotaShare("q000")[snapshot.DimGPU]; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("over-quota share without a quota: %v, want 0.5", got)
	}
	before, _ := h.Totals("q000")
	empty := snap(t, 2, 2, 0)
	h.Record(empty, capacity)
	h.Advance(now.Add(time.Hour))
	after, _ := h.Totals("q000")
	if r := after.Used[snapshot.DimGPU] / before.Used[snapshot.DimGPU]; math.Abs(r-0.5) > 1e-9 {
		t.Errorf("decayed use after one half-life: %v of before, want 0.5", r)
	}
	// A new scheduler restoring the totals from status goes on from them.
	st := usage.ToStatus(after, time.Hour)
	back, ok := usage.FromStatus(st)
	if !ok {
		t.Fatal("no totals from status")
	}
	r := usage.New(time.Hour)
	r.Restore("q000", back, after.At)
	r.Advance(after.At)
	got, want := r.UsedShare("q000")[snapshot.DimGPU], h.UsedShare("q000")[snapshot.DimGPU]
	if math.Abs(got-want) > 1e-4 {
		t.Errorf("restored used share %v, want %v", got, want)
	}
}

// BenchmarkHistory1000Queues is the runtime's cost of the history per cycle: Advance, Apply and
// Record on 1,000 queues.
func BenchmarkHistory1000Queues(b *testing.B) {
	s := snap(b, 1000, 100, 64)
	h := usage.New(24 * time.Hour)
	capacity := engine.Amounts{"gpu": 800000, "cpu": 1000000, "memory": 1 << 40}
	now := testutil.Epoch
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		h.Advance(now)
		h.Apply(s)
		h.Record(s, capacity)
	}
}
