// Package leasefence keeps a scheduler replica's writes inside its leadership.
//
// Leader election alone does not stop two replicas from writing at once: a leader killed or cut
// off keeps its requests in flight, and the API server may apply one after the standby has taken
// the Lease over and planned from a cache that did not show it yet (two pods bound onto the same
// GPU). kube-scheduler leaves that to the kubelet, which refuses the second pod; fairway promises
// more, so its replicas fence their writes as a leader lease does in etcd's raft:
//
//   - every write carries a server-side deadline (the `timeout` parameter client-go sends when the
//     client has a timeout): the API server gives it up once the deadline passes;
//   - a write is sent only while its deadline ends before the Lease could pass to another
//     replica: a standby takes over no earlier than LeaseDurationSeconds after it saw the last
//     renewal, and it cannot have seen that renewal before the renewal was sent;
//   - a replica that stops (or releases the Lease) sends no more writes and waits for the last
//     one's deadline before it lets the Lease go.
//
// The fence assumes what client-go's leader election assumes: the replicas' clocks run at the
// same rate. It needs no clock agreement between machines.
package leasefence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrStopped is the error of a write sent after the replica stopped leading.
var ErrStopped = errors.New("leasefence: this replica no longer leads; the write was not sent")

// Fence gates the writes of one replica on the Lease it holds.
type Fence struct {
	timeout time.Duration
	clock   clock.Clock

	mu sync.Mutex
	// renewed is when the last acquisition or renewal that succeeded was sent, and lease the
	// duration it wrote; zero while the replica does not hold the Lease.
	renewed time.Time
	lease   time.Duration
	// changed is closed (and replaced) whenever renewed changes or the fence closes.
	changed chan struct{}
	closed  bool
	// lastSent is when the last write was sent.
	lastSent time.Time
}

// New returns a fence whose writes carry writeTimeout as their server-side deadline. The
// writeTimeout must be shorter than the lease duration, by more than the renewal period for
// writes to flow between renewals.
func New(writeTimeout, leaseDuration time.Duration, clk clock.Clock) (*Fence, error) {
	if writeTimeout <= 0 || writeTimeout >= leaseDuration {
		return nil, fmt.Errorf("the write timeout (%v) must be above 0 and below the lease duration (%v)", writeTimeout, leaseDuration)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Fence{timeout: writeTimeout, clock: clk, changed: make(chan struct{})}, nil
}

// Timeout is the server-side deadline of every write.
func (f *Fence) Timeout() time.Duration { return f.timeout }

// Lock wraps the leader election's lock so that the fence learns each acquisition and renewal
// the replica makes, and each release.
func (f *Fence) Lock(l resourcelock.Interface) resourcelock.Interface {
	return &lock{Interface: l, f: f}
}

// Config returns a copy of cfg whose writes pass the fence and carry its deadline. Reads pass
// freely (with the same deadline, which a long-running watch must not have: use cfg for those).
func (f *Fence) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Timeout = f.timeout
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &roundTripper{next: rt, f: f} })
	return c
}

// Start runs until ctx ends, then stops the writes and waits until the last one's deadline has
// passed: added to a manager as a leader election runnable, it keeps the Lease (which the
// manager releases after its runnables stopped) until no write of this replica can still land.
func (f *Fence) Start(ctx context.Context) error {
	<-ctx.Done()
	f.mu.Lock()
	f.close()
	until := f.lastSent.Add(f.timeout)
	f.mu.Unlock()
	if d := until.Sub(f.clock.Now()); d > 0 {
		<-f.clock.After(d)
	}
	return nil
}

// admit waits until a write may be sent and records it as sent; it fails when ctx ends first or
// the fence is closed.
func (f *Fence) admit(ctx context.Context) error {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return ErrStopped
		}
		now := f.clock.Now()
		if !f.renewed.IsZero() && now.Add(f.timeout).Before(f.renewed.Add(f.lease)) {
			f.lastSent = now
			f.mu.Unlock()
			return nil
		}
		// Not held yet, or too close to the Lease's end for a write: wait for a renewal.
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the Lease to be renewed before a write: %w", ctx.Err())
		}
	}
}

// held records an acquisition or renewal sent at sent that succeeded, writing a lease of d.
func (f *Fence) held(sent time.Time, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || sent.Before(f.renewed) {
		return
	}
	f.renewed, f.lease = sent, d
	close(f.changed)
	f.changed = make(chan struct{})
}

// close stops every later write; f.mu is held.
func (f *Fence) close() {
	if f.closed {
		return
	}
	f.closed = true
	close(f.changed)
}

// lock records the outcome of the leader election's writes of the Lease.
type lock struct {
	resourcelock.Interface
	f *Fence
}

func (l *lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Create(ctx, ler) })
}

func (l *lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Update(ctx, ler) })
}

func (l *lock) write(ler resourcelock.LeaderElectionRecord, do func() error) error {
	if ler.HolderIdentity != l.Identity() {
		// A release: nothing may be sent from now on, whatever the answer.
		l.f.mu.Lock()
		l.f.close()
		l.f.mu.Unlock()
		return do()
	}
	sent := l.f.clock.Now()
	err := do()
	if err == nil {
		l.f.held(sent, time.Duration(ler.LeaseDurationSeconds)*time.Second)
	}
	return err
}

// roundTripper sends reads at once and writes once the fence admits them.
type roundTripper struct {
	next http.RoundTripper
	f    *Fence
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := rt.f.admit(req.Context()); err != nil {
			return nil, err
		}
	}
	return rt.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's transport debugging see through the fence.
func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }
