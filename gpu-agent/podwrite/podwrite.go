// Package podwrite writes the latest wanted state of each of a node's pods to the API server
// off the caller's loop: the agent's usage monitor and swap controller decide at every poll and
// must never wait for the API server, and a state decided later makes an unwritten earlier one
// pointless. So Queue keeps, per pod, only the latest value asked for, and one worker writes it,
// retried with exponential back-off per pod (client-go's rate-limited workqueue, which also
// never writes one pod twice at once and writes again when a newer value came during a write).
package podwrite

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Default back-off of a pod whose write failed: 0.5s, 1s, 2s, ... up to 10s.
const (
	DefaultBaseDelay = 500 * time.Millisecond
	DefaultMaxDelay  = 10 * time.Second
)

// conflictAttempts is how many times a write refused as a conflict is tried again before it is
// dropped: the writers send the pod's UID as a precondition, and a pod re-created under the same
// name answers every write with a conflict; a write of the pod it was meant for is pointless.
const conflictAttempts = 4

// WriteFunc writes v to pod. A NotFound answer ends the pod's writes (it is gone); any other
// error is retried with back-off, a conflict only a few times.
type WriteFunc[V any] func(ctx context.Context, pod types.NamespacedName, v V) error

// Options configure a Queue.
type Options struct {
	// Name names the workqueue in its metrics.
	Name string
	// BaseDelay and MaxDelay bound the per-pod back-off after failed writes; zero values take
	// DefaultBaseDelay and DefaultMaxDelay.
	BaseDelay, MaxDelay time.Duration
	Log                 logr.Logger
}

// wanted is a pod's latest value; seq tells a value from one asked for during its write.
type wanted[V any] struct {
	value V
	seq   uint64
}

// Queue writes the latest value asked for each pod with a WriteFunc. It implements
// manager.Runnable; values asked for before Start are written once it runs.
type Queue[V any] struct {
	write WriteFunc[V]
	opts  Options

	mu      sync.Mutex
	wanted  map[types.NamespacedName]wanted[V]
	seq     uint64
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName] // nil until Start
	started bool
}

// New returns a Queue writing with write.
func New[V any](write WriteFunc[V], opts Options) *Queue[V] {
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = DefaultBaseDelay
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	return &Queue[V]{write: write, opts: opts, wanted: map[types.NamespacedName]wanted[V]{}}
}

// Set asks for v to be written to pod, in place of any value not written yet.
func (q *Queue[V]) Set(pod types.NamespacedName, v V) {
	q.Update(pod, func(V, bool) V { return v })
}

// Update asks for next(prev, pending) to be written to pod, where prev is the value not written
// yet (pending true), if any. It never blocks on a write.
func (q *Queue[V]) Update(pod types.NamespacedName, next func(prev V, pending bool) V) {
	q.mu.Lock()
	prev, pending := q.wanted[pod]
	q.seq++
	q.wanted[pod] = wanted[V]{value: next(prev.value, pending), seq: q.seq}
	queue := q.queue
	q.mu.Unlock()
	if queue != nil {
		queue.Add(pod)
	}
}

// Pending reports how many pods wait for a write (or its retry).
func (q *Queue[V]) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.wanted)
}

// NeedLeaderElection is false: every node's agent writes its own pods.
func (q *Queue[V]) NeedLeaderElection() bool { return false }

// Start writes until ctx ends, then returns once its worker and the workqueue's goroutines
// have stopped. A Queue starts once.
func (q *Queue[V]) Start(ctx context.Context) error {
	queue, err := q.open()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for q.next(ctx, queue) {
		}
	}()
	<-ctx.Done()
	queue.ShutDown()
	<-done
	return nil
}

// open makes the workqueue and queues the pods asked for before Start.
func (q *Queue[V]) open() (workqueue.TypedRateLimitingInterface[types.NamespacedName], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return nil, errors.New("podwrite: Start called twice")
	}
	q.started = true
	q.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](q.opts.BaseDelay, q.opts.MaxDelay),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: q.opts.Name})
	for pod := range q.wanted {
		q.queue.Add(pod)
	}
	return q.queue, nil
}

// next writes one pod's latest value; false once the queue is shut down or ctx ended.
func (q *Queue[V]) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[types.NamespacedName]) bool {
	pod, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(pod)
	if ctx.Err() != nil {
		return false
	}
	q.mu.Lock()
	w, ok := q.wanted[pod]
	q.mu.Unlock()
	if !ok {
		queue.Forget(pod)
		return true
	}
	err := q.write(ctx, pod, w.value)
	finished := err == nil || apierrors.IsNotFound(err) ||
		(apierrors.IsConflict(err) && queue.NumRequeues(pod) >= conflictAttempts)
	q.mu.Lock()
	replaced := q.wanted[pod].seq != w.seq
	if finished && !replaced {
		delete(q.wanted, pod)
	}
	q.mu.Unlock()
	switch {
	case replaced:
		// The newer value was queued by its Update and goes next, without the old one's back-off.
		queue.Forget(pod)
	case finished:
		queue.Forget(pod)
	default:
		queue.AddRateLimited(pod)
	}
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		q.opts.Log.Error(err, "Writing to a pod failed", "pod", klog.KRef(pod.Namespace, pod.Name),
			"failures", queue.NumRequeues(pod), "retry", !finished || replaced)
	}
	return true
}
