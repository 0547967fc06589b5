//go:build cgo

package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/fairway-sched/fairway/gpu-agent/agent"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
)

func watchLibrary(t *testing.T) (*agent.Library, *fakegpu.Node) {
	t.Helper()
	n, err := fakegpu.New("dgxh100", "n1")
	if err != nil {
		t.Fatal(err)
	}
	lib := &agent.Library{Library: nvmllib.New(n), Fake: n}
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	return lib, n
}

// TestWatchLendingRound plays the real-GPU lending check on a fake GPU: the owner holds memory
// and idles, a loan arrives and works hard, then the owner works. Only the owner's work ends
// the watch, the way the agent would wake the notebook.
func TestWatchLendingRound(t *testing.T) {
	for name, wake := range map[string]struct {
		owner  fakegpu.Process
		reason string
	}{
		"utilization":   {fakegpu.Process{PID: 100, UsedMiB: 2048, SMPercent: 45}, "GPUUtilization"},
		"memory growth": {fakegpu.Process{PID: 100, UsedMiB: 2560}, "GPUMemoryGrowth"},
	} {
		t.Run(name, func(t *testing.T) {
			lib, n := watchLibrary(t)
			gpu := n.Device(5)
			idle := fakegpu.Process{PID: 100, UsedMiB: 2048}
			loan := fakegpu.Process{PID: 200, UsedMiB: 70000, SMPercent: 95}
			gpu.SetState(fakegpu.State{Processes: []fakegpu.Process{idle}})

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ready := make(chan []uint32, 1)
			done := make(chan error, 1)
			var woken *agent.Woken
			go func() {
				w, err := agent.Watch(ctx, lib, agent.WatchOptions{
					GPU: 5, Interval: 10 * time.Millisecond, ThresholdPercent: 5,
					Ready: func(owner []uint32) { ready <- owner },
					Log:   testr.New(t),
				})
				woken = w
				done <- err
			}()
			if owner := <-ready; len(owner) != 1 || owner[0] != 100 {
				t.Fatalf("owner pids %v, want [100]", owner)
			}
			// The loan starts, grows and spawns a second process: none of it wakes the owner.
			gpu.SetState(fakegpu.State{Processes: []fakegpu.Process{idle, loan}})
			time.Sleep(50 * time.Millisecond)
			loan.UsedMiB = 80000
			gpu.SetState(fakegpu.State{Processes: []fakegpu.Process{idle, loan, {PID: 201, UsedMiB: 1000, SMPercent: 30}}})
			select {
			case err := <-done:
				t.Fatalf("the loan's work ended the watch: %+v, %v", woken, err)
			case <-time.After(100 * time.Millisecond):
			}

			started := time.Now()
			gpu.SetState(fakegpu.State{Processes: []fakegpu.Process{wake.owner, loan}})
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if woken.Reason != wake.reason || woken.Observed.IsZero() || woken.Detected.Before(woken.Observed) {
				t.Errorf("woken = %+v, want reason %s", woken, wake.reason)
			}
			if took := time.Since(started); took > time.Second {
				t.Errorf("detection took %v with a 10ms poll", took)
			}
		})
	}
}

func TestWatchNeedsAnOwner(t *testing.T) {
	lib, _ := watchLibrary(t)
	if _, err := agent.Watch(context.Background(), lib, agent.WatchOptions{GPU: 0, Interval: time.Millisecond, Log: testr.New(t)}); err == nil {
		t.Fatal("watch of a GPU without processes did not fail")
	}
}
