package swap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// CheckOptions drive RunCheck.
type CheckOptions struct {
	API checkpoint.API
	PID int
	// CPU and WakeCPU are the agent's sign of work (Options.CPU, Options.WakeCPU); Poll how often
	// it is read.
	CPU         func(pid int) (time.Duration, error)
	WakeCPU     time.Duration
	Poll        time.Duration
	LockTimeout time.Duration
	// RestoreTimeout bounds the wait for GPU memory to restore into (the loan exiting).
	RestoreTimeout time.Duration
}

// RunCheck is the real-GPU swap check's agent side (test/gpu/run.sh, `fairway agent
// swap-check`): it swaps one process out and in on commands read from in, one per line, with the
// agent's own calls and sign of work, and writes what happened to out:
//
//	out  -> lock and checkpoint; "swap-check: out <ms>", then the CPU watch starts and
//	        "swap-check: work <unix µs>" comes at the owner's first sign of work
//	in   -> restore (retried while the GPU lacks the memory) and unlock; "swap-check: in <ms> <unix µs>"
//	quit -> return
func RunCheck(ctx context.Context, o CheckOptions, in io.Reader, out io.Writer) error {
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(in)
		for s.Scan() {
			lines <- strings.TrimSpace(s.Text())
		}
		close(lines)
	}()
	var watching bool
	var last time.Duration
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if !watching {
				continue
			}
			t, err := o.CPU(o.PID)
			if err != nil {
				return fmt.Errorf("reading process %d's CPU: %w", o.PID, err)
			}
			if t-last > o.WakeCPU {
				watching = false
				fmt.Fprintf(out, "swap-check: work %d (%s of CPU in %s)\n", time.Now().UnixMicro(), (t - last).Round(time.Millisecond), o.Poll)
			}
			last = t
		case cmd, ok := <-lines:
			if !ok || cmd == "quit" {
				return nil
			}
			switch cmd {
			case "out":
				began := time.Now()
				if err := o.API.Lock(o.PID, o.LockTimeout); err != nil {
					return fmt.Errorf("locking process %d: %w", o.PID, err)
				}
				if err := o.API.Checkpoint(o.PID); err != nil {
					_ = o.API.Unlock(o.PID)
					return fmt.Errorf("checkpointing process %d: %w", o.PID, err)
				}
				fmt.Fprintf(out, "swap-check: out %d\n", time.Since(began).Milliseconds())
				t, err := o.CPU(o.PID)
				if err != nil {
					return fmt.Errorf("reading process %d's CPU: %w", o.PID, err)
				}
				watching, last = true, t
			case "in":
				watching = false
				began := time.Now()
				for {
					err := o.API.Restore(o.PID)
					if err == nil {
						break
					}
					if !errors.Is(err, checkpoint.ErrOutOfMemory) || time.Since(began) > o.RestoreTimeout {
						return fmt.Errorf("restoring process %d: %w", o.PID, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err := o.API.Unlock(o.PID); err != nil {
					return fmt.Errorf("unlocking process %d: %w", o.PID, err)
				}
				fmt.Fprintf(out, "swap-check: in %d %d\n", time.Since(began).Milliseconds(), time.Now().UnixMicro())
			default:
				return fmt.Errorf("unknown command %q: want out, in or quit", cmd)
			}
		}
	}
}
