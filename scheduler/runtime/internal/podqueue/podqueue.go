// Package podqueue is the work queue the binder and the evictor share: requests about pods,
// taken in submission order by a pool of workers, with at most one request per pod in flight.
//
// client-go's workqueue is not used: it keys items by equality (the requests carry pointers and
// slices) and queues an item added while it is being processed again after Done, where here a
// second request for a pod in flight is dropped (the first attempt's outcome settles the pod,
// and the engine asks again if it still wants to).
package podqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CallBackoff is how the workers of both pools retry one API call on a transient error: up to 5
// attempts, waiting 100ms, 200ms, 400ms and 800ms (±20%) between them. (In wait.Backoff a step
// that reaches Cap is the last one.) A call that still fails is the engine's to ask again for.
var CallBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 2 * time.Second}

// Queue is a FIFO of requests keyed by pod. The zero value is not usable; call New.
type Queue[T any] struct {
	key func(*T) types.NamespacedName

	mu       sync.Mutex
	pending  []T
	inflight map[types.NamespacedName]struct{}
	// wake holds at most one token: a worker that takes a request while more wait passes the
	// token on, so that one Add wakes as many workers as there is work, one at a time.
	wake chan struct{}
}

// New returns an empty queue that keys requests by key.
func New[T any](key func(*T) types.NamespacedName) *Queue[T] {
	return &Queue[T]{key: key, inflight: map[types.NamespacedName]struct{}{}, wake: make(chan struct{}, 1)}
}

// Add queues reqs in order and never blocks. A request for a pod already queued or in flight is
// not queued; skipped, when not nil, is called with it (under the queue's lock: it must not
// call back into the queue).
func (q *Queue[T]) Add(reqs []T, skipped func(*T)) {
	if len(reqs) == 0 {
		return
	}
	q.mu.Lock()
	for i := range reqs {
		k := q.key(&reqs[i])
		if _, busy := q.inflight[k]; busy {
			if skipped != nil {
				skipped(&reqs[i])
			}
			continue
		}
		q.inflight[k] = struct{}{}
		q.pending = append(q.pending, reqs[i])
	}
	q.mu.Unlock()
	q.signal()
}

// Next blocks until a request is queued or ctx ends (false then). The request stays in flight
// until Done.
func (q *Queue[T]) Next(ctx context.Context) (T, bool) {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			r := q.pending[0]
			var zero T
			q.pending[0] = zero // let the request be collected once done
			q.pending = q.pending[1:]
			more := len(q.pending) > 0
			q.mu.Unlock()
			if more {
				q.signal()
			}
			return r, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			var zero T
			return zero, false
		case <-q.wake:
		}
	}
}

// Done ends r's flight: a new request for its pod is queued again.
func (q *Queue[T]) Done(r *T) {
	q.mu.Lock()
	delete(q.inflight, q.key(r))
	q.mu.Unlock()
}

// InFlight is the number of requests queued or being worked on.
func (q *Queue[T]) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
