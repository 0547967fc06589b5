package leasefence

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeLock is a lock whose writes always succeed.
type fakeLock struct{ id string }

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, errors.New("not used")
}
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (l *fakeLock) RecordEvent(string)                                              {}
func (l *fakeLock) Identity() string                                                { return l.id }
func (l *fakeLock) Describe() string                                                { return "fake" }

// server counts the writes that reach it.
func server(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var writes atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s, &writes
}

func send(ctx context.Context, c *http.Client, url, method string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func setup(t *testing.T) (*Fence, *clocktesting.FakeClock, resourcelock.Interface, *http.Client, string, *atomic.Int32) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f, err := New(2*time.Second, 4*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	s, writes := server(t)
	cfg := f.Config(&rest.Config{Host: s.URL})
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 2*time.Second {
		t.Fatalf("the fenced config's timeout is %v, want the write timeout 2s", cfg.Timeout)
	}
	return f, clk, f.Lock(&fakeLock{id: "me"}), &http.Client{Transport: rt}, s.URL, writes
}

func record(holder string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 4}
}

func TestNewRefusesATimeoutAsLongAsTheLease(t *testing.T) {
	if _, err := New(4*time.Second, 4*time.Second, nil); err == nil {
		t.Fatal("a write timeout as long as the lease was accepted")
	}
	if _, err := New(0, 4*time.Second, nil); err == nil {
		t.Fatal("a zero write timeout was accepted")
	}
}

// A replica that never held the Lease sends no write; its reads pass.
func TestStandbyDoesNotWrite(t *testing.T) {
	_, _, _, c, url, writes := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := send(ctx, c, url, http.MethodPost); err == nil {
		t.Fatal("a standby's write was sent")
	}
	if err := send(t.Context(), c, url, http.MethodGet); err != nil {
		t.Fatalf("a standby's read failed: %v", err)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("%d writes reached the API server from a standby", n)
	}
}

// A write waits while the Lease is too close to its end and goes once it is renewed.
func TestWriteWaitsForRenewal(t *testing.T) {
	_, clk, lock, c, url, writes := setup(t)
	if err := lock.Create(t.Context(), record("me")); err != nil {
		t.Fatal(err)
	}
	if err := send(t.Context(), c, url, http.MethodPost); err != nil {
		t.Fatalf("a leader's write right after it acquired the Lease: %v", err)
	}
	clk.Step(2 * time.Second) // 2s left of the lease: a 2s write could outlast it
	done := make(chan error, 1)
	go func() { done <- send(t.Context(), c, url, http.MethodPatch) }()
	select {
	case err := <-done:
		t.Fatalf("a write was sent with no more of the Lease left than its deadline (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := lock.Update(t.Context(), record("me")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write after the renewal: %v", err)
	}
	if n := writes.Load(); n != 2 {
		t.Fatalf("%d writes reached the API server, want 2", n)
	}
}

// After a release nothing is sent, and Start returns only once the last write's deadline passed.
func TestReleaseAndStop(t *testing.T) {
	f, clk, lock, c, url, writes := setup(t)
	if err := lock.Create(t.Context(), record("me")); err != nil {
		t.Fatal(err)
	}
	if err := send(t.Context(), c, url, http.MethodPost); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { _ = f.Start(ctx); close(stopped) }()
	cancel()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("Start returned before the last write's deadline")
	default:
	}
	clk.Step(2 * time.Second)
	<-stopped
	if err := send(t.Context(), c, url, http.MethodPost); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after the stop: %v, want ErrStopped", err)
	}
	if err := lock.Update(t.Context(), record("")); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("%d writes reached the API server, want 1", n)
	}
}

// The fence's promise, tried on random timings: every write sent ends (its deadline) before the
// Lease, counted from the last renewal sent before it, could pass to another replica.
func TestEveryWriteEndsInsideTheLease(t *testing.T) {
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		timeout := time.Duration(1+rng.IntN(3)) * time.Second
		f, err := New(timeout, 4*time.Second, clk)
		if err != nil {
			t.Fatal(err)
		}
		lock := f.Lock(&fakeLock{id: "me"})
		var lastRenewal time.Time
		for range 100 {
			clk.Step(time.Duration(rng.IntN(1500)) * time.Millisecond)
			switch rng.IntN(3) {
			case 0:
				if err := lock.Update(t.Context(), record("me")); err != nil {
					t.Fatal(err)
				}
				lastRenewal = clk.Now()
			default:
				ctx, cancel := context.WithCancel(t.Context())
				cancel() // a write that would have to wait fails at once
				if err := f.admit(ctx); err == nil {
					if lastRenewal.IsZero() {
						t.Fatalf("seed %d: a write was admitted before any renewal", seed)
					}
					if end, lost := clk.Now().Add(timeout), lastRenewal.Add(4*time.Second); !end.Before(lost) {
						t.Fatalf("seed %d: a write admitted at %v ends at %v, when the Lease renewed at %v may have passed on (%v)",
							seed, clk.Now(), end, lastRenewal, lost)
					}
				}
			}
		}
	}
}
