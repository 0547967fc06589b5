package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// result is one request's outcome: its latency from the moment it was due, and its error.
type result struct {
	latency time.Duration
	err     error
}

// openLoop calls send for requests 0..n-1 at a fixed rate, each in its own goroutine at the time
// it is due, whether or not earlier requests have answered (an open loop: a slow server does not
// slow the arrivals, as the API server's pod creations would not slow down either). Latency is
// measured from the due time, so time a request spent waiting to be sent counts too.
func openLoop(ctx context.Context, rps, n int, send func(ctx context.Context, i int) error) []result {
	results := make([]result, n)
	interval := time.Second / time.Duration(rps)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			results[i] = result{err: ctx.Err()}
			continue
		}
		wg.Go(func() {
			err := send(ctx, i)
			results[i] = result{latency: time.Since(due), err: err}
		})
	}
	wg.Wait()
	return results
}

// summary is what the benchmark prints.
type summary struct {
	n, errors     int
	p50, p99, max time.Duration
	firstErr      error
}

func summarize(results []result) summary {
	s := summary{n: len(results)}
	lat := make([]time.Duration, 0, len(results))
	for _, r := range results {
		if r.err != nil {
			s.errors++
			if s.firstErr == nil {
				s.firstErr = r.err
			}
			continue
		}
		lat = append(lat, r.latency)
	}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	s.p50, s.p99, s.max = q(0.50), q(0.99), lat[len(lat)-1]
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
