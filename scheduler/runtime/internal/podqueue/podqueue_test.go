package podqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

type req struct {
	pod types.NamespacedName
	n   int
}

func key(r *req) types.NamespacedName { return r.pod }

func pod(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

func TestOrderAndDuplicates(t *testing.T) {
	q := New(key)
	var skipped []int
	q.Add([]req{{pod("a"), 1}, {pod("b"), 2}, {pod("a"), 3}}, func(r *req) { skipped = append(skipped, r.n) })
	if len(skipped) != 1 || skipped[0] != 3 {
		t.Fatalf("skipped %v, want [3] (a is already queued)", skipped)
	}
	if got := q.InFlight(); got != 2 {
		t.Fatalf("InFlight %d, want 2", got)
	}
	ctx := t.Context()
	first, _ := q.Next(ctx)
	second, _ := q.Next(ctx)
	if first.n != 1 || second.n != 2 {
		t.Fatalf("took %d then %d, want 1 then 2", first.n, second.n)
	}
	// In flight until Done: a new request for a is still dropped.
	q.Add([]req{{pod("a"), 4}}, func(r *req) { skipped = append(skipped, r.n) })
	if len(skipped) != 2 {
		t.Fatalf("a request for a pod in flight was queued")
	}
	q.Done(&first)
	q.Add([]req{{pod("a"), 5}}, nil)
	if r, _ := q.Next(ctx); r.n != 5 {
		t.Fatalf("after Done, took %d, want 5", r.n)
	}
}

func TestNextWaitsAndStops(t *testing.T) {
	q := New(key)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan req, 1)
	go func() {
		r, ok := q.Next(ctx)
		if ok {
			got <- r
		}
		close(got)
	}()
	time.Sleep(10 * time.Millisecond)
	q.Add([]req{{pod("a"), 1}}, nil)
	if r := <-got; r.n != 1 {
		t.Fatalf("a waiting worker took %d, want 1", r.n)
	}
	cancel()
	if _, ok := q.Next(ctx); ok {
		t.Fatal("Next returned a request after its context ended")
	}
}

// TestManyWorkers checks that one Add of many requests reaches every waiting worker (the wake
// token is passed on) and each request is taken once.
func TestManyWorkers(t *testing.T) {
	q := New(key)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const workers, n = 8, 1000
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r, ok := q.Next(ctx)
				if !ok {
					return
				}
				mu.Lock()
				seen[r.n]++
				mu.Unlock()
				q.Done(&r)
			}
		})
	}
	reqs := make([]req, n)
	for i := range reqs {
		reqs[i] = req{pod(fmt.Sprintf("p%d", i)), i}
	}
	q.Add(reqs, nil)
	deadline := time.Now().Add(10 * time.Second)
	for q.InFlight() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("request %d taken %d times, want once", i, seen[i])
		}
	}
}
