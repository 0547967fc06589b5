package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/pprof/profile"
)

// profileChunk is how long each CPU profile request lasts. Go's /debug/pprof/profile profiles
// for a number of seconds fixed when it is asked, and a burst's length is not known
// beforehand, so the burst is profiled in consecutive chunks, merged when it ends; the gaps
// between chunks are one local HTTP round trip each.
const profileChunk = 2 * time.Second

// burstProfiler takes one fairway process's CPU profile over a burst and the allocations it
// made during the burst, from its --pprof-bind-address endpoint.
type burstProfiler struct {
	base      string // http://host:port/debug/pprof
	dir, name string
	allocs0   *profile.Profile
	stop      chan struct{}
	done      chan cpuResult
}

type cpuResult struct {
	p   *profile.Profile
	err error
}

// startProfile reads the allocations so far and starts profiling the CPU.
func startProfile(ctx context.Context, addr, dir, name string) (*burstProfiler, error) {
	bp := &burstProfiler{base: "http://" + addr + "/debug/pprof", dir: dir, name: name,
		stop: make(chan struct{}), done: make(chan cpuResult, 1)}
	var err error
	if bp.allocs0, err = bp.get(ctx, "/allocs"); err != nil {
		return nil, err
	}
	go func() {
		var chunks []*profile.Profile
		for {
			p, err := bp.get(ctx, fmt.Sprintf("/profile?seconds=%d", int(profileChunk/time.Second)))
			if err != nil {
				bp.done <- cpuResult{err: err}
				return
			}
			chunks = append(chunks, p)
			select {
			case <-bp.stop:
				merged, err := profile.Merge(chunks)
				bp.done <- cpuResult{p: merged, err: err}
				return
			default:
			}
		}
	}()
	return bp, nil
}

// finish ends the CPU profile (after its current chunk) and writes <name>-cpu.pb.gz and
// <name>-allocs.pb.gz, the allocations made since startProfile, into the profiler's directory.
func (bp *burstProfiler) finish(ctx context.Context) error {
	close(bp.stop)
	allocs1, err := bp.get(ctx, "/allocs")
	if err != nil {
		return err
	}
	cpu := <-bp.done
	if cpu.err != nil {
		return fmt.Errorf("CPU profile of %s: %w", bp.name, cpu.err)
	}
	// The allocations during the burst: the profile at its end less the one at its start, as
	// /debug/pprof/allocs?seconds=N computes its deltas.
	bp.allocs0.Scale(-1)
	delta, err := profile.Merge([]*profile.Profile{bp.allocs0, allocs1})
	if err != nil {
		return fmt.Errorf("allocation profile of %s: %w", bp.name, err)
	}
	if err := os.MkdirAll(bp.dir, 0o755); err != nil {
		return err
	}
	for _, out := range []struct {
		suffix string
		p      *profile.Profile
	}{{"cpu", cpu.p}, {"allocs", delta}} {
		path := filepath.Join(bp.dir, bp.name+"-"+out.suffix+".pb.gz")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = out.p.Write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		fmt.Printf("bench-e2e: %s: wrote %s (go tool pprof -top %s)\n", bp.name, path, path)
	}
	return nil
}

func (bp *burstProfiler) get(ctx context.Context, path string) (*profile.Profile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, bp.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("profiling %s: %w", bp.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("profiling %s: %s %s: %s", bp.name, path, resp.Status, body)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("profiling %s: parsing %s: %w", bp.name, path, err)
	}
	return p, nil
}
