package usage

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTrackerTransitions(t *testing.T) {
	cfg := TrackerConfig{ThresholdPercent: 5, IdleAfter: 30 * time.Second, MemoryGrowthBytes: 1 << 20}
	quiet := Activity{SMPercent: 1, PIDs: []uint32{100}, MemoryBytes: 512 << 20}

	type step struct {
		advance time.Duration
		a       Activity
		want    string // "", "idle" or the wake-up reason
	}
	cases := map[string][]step{
		"idle after N, not before": {
			{0, quiet, ""},
			{29 * time.Second, quiet, ""},
			{time.Second, quiet, "idle"},
			{time.Minute, quiet, ""}, // already idle: no second transition
		},
		"active at once on utilization": {
			{0, quiet, ""},
			{30 * time.Second, quiet, "idle"},
			{250 * time.Millisecond, Activity{SMPercent: 40, PIDs: []uint32{100}, MemoryBytes: 512 << 20}, "GPUUtilization"},
			{250 * time.Millisecond, quiet, ""}, // the idle clock restarted
			{29 * time.Second, quiet, ""},
			{time.Second, quiet, "idle"},
		},
		// A swapped-out notebook's processes leave the GPU: that is not work, but the swap
		// controller's sign (its CPU) is, and it holds the pod awake while it lasts.
		"a swapped notebook's CPU is work": {
			{0, quiet, ""},
			{30 * time.Second, quiet, "idle"},
			{250 * time.Millisecond, Activity{}, ""},
			{250 * time.Millisecond, Activity{Work: "GPUSwapIn", WorkMessage: "CPU"}, "GPUSwapIn"},
			{30 * time.Second, Activity{Work: "GPUSwapIn"}, ""},
			{time.Second, Activity{Work: "GPUSwapIn"}, ""},
		},
		"active at once on a new process": {
			{0, quiet, ""},
			{30 * time.Second, quiet, "idle"},
			{250 * time.Millisecond, Activity{SMPercent: 0, PIDs: []uint32{100, 101}, MemoryBytes: 512 << 20}, "GPUNewProcess"},
		},
		"a process that exits is not work": {
			{0, Activity{PIDs: []uint32{100, 101}}, ""},
			{30 * time.Second, Activity{PIDs: []uint32{100}}, "idle"},
		},
		"active at once on memory growth": {
			{0, quiet, ""},
			{30 * time.Second, quiet, "idle"},
			{250 * time.Millisecond, Activity{SMPercent: 0, PIDs: []uint32{100}, MemoryBytes: 2048 << 20}, "GPUMemoryGrowth"},
		},
		"memory growth within tolerance is noise": {
			{0, quiet, ""},
			{30 * time.Second, Activity{SMPercent: 0, PIDs: []uint32{100}, MemoryBytes: 512<<20 + 4096}, "idle"},
		},
		"memory freed then regrown is work": {
			{0, quiet, ""},
			{10 * time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 0}, ""},
			{20 * time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 0}, "idle"},
			{time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 256 << 20}, "GPUMemoryGrowth"},
		},
		"memory creeping up below the tolerance at every sample is work": {
			{0, quiet, ""},
			{30 * time.Second, quiet, "idle"},
			{250 * time.Millisecond, Activity{PIDs: []uint32{100}, MemoryBytes: 512<<20 + 768<<10}, ""},
			{250 * time.Millisecond, Activity{PIDs: []uint32{100}, MemoryBytes: 513<<20 + 512<<10}, "GPUMemoryGrowth"},
		},
		"growth is measured from the lowest point since the last work": {
			{0, quiet, ""},
			{10 * time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 256 << 20}, ""},
			{10 * time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 256<<20 + 512<<10}, ""},
			{10 * time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 257 << 20}, "idle"},
			{time.Second, Activity{PIDs: []uint32{100}, MemoryBytes: 257<<20 + 1}, "GPUMemoryGrowth"},
		},
		"threshold is exclusive": {
			{0, Activity{SMPercent: 5}, ""},
			{30 * time.Second, Activity{SMPercent: 5}, "idle"},
		},
		"no GPU work at all goes idle": {
			{0, Activity{}, ""},
			{30 * time.Second, Activity{}, "idle"},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
			tr := NewTracker(cfg)
			wantIdle := false
			for i, s := range steps {
				clock.SetTime(clock.Now().Add(s.advance))
				tn, changed := tr.Observe("pod", clock.Now(), s.a)
				got := ""
				if changed {
					got = tn.Reason
					if tn.Idle {
						got = "idle"
					}
					if !tn.At.Equal(clock.Now()) || tn.Message == "" {
						t.Errorf("step %d: transition %+v lacks time or message", i, tn)
					}
				}
				if got != s.want {
					t.Fatalf("step %d (+%s, %+v): transition %q, want %q", i, s.advance, s.a, got, s.want)
				}
				if got != "" {
					wantIdle = got == "idle"
				}
				if tr.Idle("pod") != wantIdle {
					t.Fatalf("step %d: Idle = %v, want %v", i, tr.Idle("pod"), wantIdle)
				}
			}
		})
	}
}

func TestTrackerSeedSurvivesRestart(t *testing.T) {
	cfg := TrackerConfig{ThresholdPercent: 5, IdleAfter: time.Minute}
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	tr := NewTracker(cfg)
	tr.Seed("pod", start.Add(-time.Hour))
	// The restarted agent sees the pod's existing processes for the first time: not new work.
	if tn, changed := tr.Observe("pod", start, Activity{PIDs: []uint32{7, 8}, MemoryBytes: 1 << 30}); changed {
		t.Fatalf("first sample after seed caused %+v", tn)
	}
	if !tr.Idle("pod") {
		t.Fatal("seeded pod not idle")
	}
	if tn, changed := tr.Observe("pod", start.Add(time.Second), Activity{SMPercent: 60, PIDs: []uint32{7, 8}, MemoryBytes: 1 << 30}); !changed || tn.Idle {
		t.Fatalf("work on a seeded pod: %+v, %v", tn, changed)
	}
	tr.Forget("pod")
	if tr.Tracked("pod") || tr.Idle("pod") {
		t.Error("forgotten pod still tracked")
	}
}
