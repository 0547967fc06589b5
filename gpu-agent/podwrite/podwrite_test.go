package podwrite_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/gpu-agent/podwrite"
)

var (
	podA   = types.NamespacedName{Namespace: "ns", Name: "a"}
	podB   = types.NamespacedName{Namespace: "ns", Name: "b"}
	podsGR = schema.GroupResource{Resource: "pods"}
)

// recorder is a WriteFunc that records its calls and answers with the errors of fail, in turn,
// then nil; block, when set (before Start), holds each write of a pod but those in free until it
// is closed.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   map[types.NamespacedName][]error
	block  chan struct{}
	free   map[types.NamespacedName]bool
	calls  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{fail: map[types.NamespacedName][]error{}, calls: make(chan struct{}, 100)}
}

func (r *recorder) write(ctx context.Context, pod types.NamespacedName, v string) error {
	r.calls <- struct{}{}
	if r.block != nil && !r.free[pod] {
		select {
		case <-r.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, pod.Name+"="+v)
	if errs := r.fail[pod]; len(errs) > 0 {
		r.fail[pod] = errs[1:]
		return errs[0]
	}
	return nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// start runs q until the test ends, and checks then that Start returned.
func start(t *testing.T, q *podwrite.Queue[string]) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- q.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Start did not return after its context ended")
		}
	})
	return cancel
}

// settle waits until q has nothing left to write.
func settle(t *testing.T, q *podwrite.Queue[string]) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pods still wait for a write", q.Pending())
		}
		time.Sleep(time.Millisecond)
	}
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// Values asked for before Start, and during a write, coalesce: only the latest of each pod is
// written, and one that came during a write is written right after it.
func TestLatestValueWins(t *testing.T) {
	r := newRecorder()
	q := podwrite.New(r.write, podwrite.Options{Log: testr.New(t)})
	q.Set(podA, "1")
	q.Set(podA, "2")
	q.Set(podB, "1")
	if q.Pending() != 2 {
		t.Fatalf("Pending = %d, want 2", q.Pending())
	}
	r.block = make(chan struct{})
	start(t, q)
	<-r.calls // one write in flight: the others come while it lasts
	q.Set(podA, "3")
	q.Set(podB, "2")
	q.Set(podA, "4")
	q.Set(podB, "3")
	close(r.block)
	settle(t, q)
	got := r.got()
	var a, b []string
	for _, w := range got {
		if strings.HasPrefix(w, "a=") {
			a = append(a, w)
		} else {
			b = append(b, w)
		}
	}
	// The first write was a=2 or b=1 (the workqueue's order); either way each pod ends at its
	// latest value, written once after the value in flight.
	if a[0] == "a=2" {
		equal(t, "writes of a", a, []string{"a=2", "a=4"})
		equal(t, "writes of b", b, []string{"b=3"})
	} else {
		equal(t, "writes of a", a, []string{"a=4"})
		equal(t, "writes of b", b, []string{"b=1", "b=3"})
	}
}

// A failed write is retried with back-off until it succeeds; a pod that is gone is not.
func TestRetryAfterFailure(t *testing.T) {
	r := newRecorder()
	r.fail[podA] = []error{errors.New("connection refused"), apierrors.NewServiceUnavailable("later")}
	r.fail[podB] = []error{apierrors.NewNotFound(podsGR, "b")}
	q := podwrite.New(r.write, podwrite.Options{Log: testr.New(t), BaseDelay: 20 * time.Millisecond, MaxDelay: time.Second})
	t0 := time.Now()
	start(t, q)
	q.Set(podA, "1")
	q.Set(podB, "1")
	settle(t, q)
	// Back-off: 20ms after the first failure, 40ms after the second.
	if d := time.Since(t0); d < 60*time.Millisecond {
		t.Errorf("three writes of a took %v, want at least the 60ms of back-off", d)
	}
	var a []string
	for _, w := range r.got() {
		if strings.HasPrefix(w, "a=") {
			a = append(a, w)
		}
	}
	equal(t, "writes of a", a, []string{"a=1", "a=1", "a=1"})
	if n := len(r.got()) - len(a); n != 1 {
		t.Errorf("pod b, gone, was written %d times, want 1", n)
	}
}

// A conflict (the pod's UID precondition failed: the name now holds another pod) is retried a
// few times, then dropped.
func TestConflictsEnd(t *testing.T) {
	r := newRecorder()
	for range 10 {
		r.fail[podA] = append(r.fail[podA], apierrors.NewConflict(podsGR, "a", errors.New("uid mismatch")))
	}
	q := podwrite.New(r.write, podwrite.Options{Log: testr.New(t), BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	start(t, q)
	q.Set(podA, "1")
	settle(t, q)
	if n := len(r.got()); n != 5 {
		t.Errorf("a conflicting write was tried %d times, want 5", n)
	}
}

// Update sees the value not written yet, and only that.
func TestUpdateSeesPendingValue(t *testing.T) {
	r := newRecorder()
	q := podwrite.New(r.write, podwrite.Options{Log: testr.New(t)})
	var seen []string
	appendTo := func(prev string, pending bool) string {
		if !pending {
			prev = "-"
		}
		seen = append(seen, prev)
		return prev + "+"
	}
	q.Update(podA, appendTo)
	q.Update(podA, appendTo)
	start(t, q)
	settle(t, q)
	q.Update(podA, appendTo)
	settle(t, q)
	equal(t, "previous values", seen, []string{"-", "-+", "-"})
	equal(t, "writes", r.got(), []string{"a=-++", "a=-+"})
}

// Start returns when its context ends, with a write in flight and retries waiting, and leaves
// no goroutine behind: neither its worker nor the workqueue's.
func TestStopLeavesNoGoroutine(t *testing.T) {
	r := newRecorder()
	r.fail[podB] = []error{errors.New("down"), errors.New("down")}
	r.block, r.free = make(chan struct{}), map[types.NamespacedName]bool{podB: true}
	q := podwrite.New(r.write, podwrite.Options{Name: "podwrite-test", Log: testr.New(t), BaseDelay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- q.Start(ctx) }()
	q.Set(podB, "1")
	<-r.calls // b failed, and waits an hour for its retry
	q.Set(podA, "1")
	<-r.calls // a's write is in flight
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if err := q.Start(context.Background()); err == nil {
		t.Error("a second Start did not fail")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := goroutines("gpu-agent/podwrite.", "k8s.io/client-go/util/workqueue.")
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Start returned:\n%s", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutines returns the stacks of the goroutines but this one that run a function of one of
// the packages.
func goroutines(packages ...string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // this goroutine
		}
		for _, p := range packages {
			if strings.Contains(g, p) && !strings.Contains(g, "testing.tRunner") {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}
