package binder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
)

// recorder collects what the binder reports.
type recorder struct {
	mu       sync.Mutex
	bound    []string
	failed   map[string]string
	outcomes []cache.Outcome
	done     chan struct{}
}

func newRecorder() *recorder {
	return &recorder{failed: map[string]string{}, done: make(chan struct{}, 100)}
}

func (r *recorder) Bound(req *Request, _ time.Time) {
	r.mu.Lock()
	r.bound = append(r.bound, req.Pod.Name)
	r.mu.Unlock()
	r.done <- struct{}{}
}

func (r *recorder) Failed(req *Request, reason FailureReason, _ error) {
	r.mu.Lock()
	r.failed[req.Pod.Name] = string(reason) // the text, as the metric label shows it
	r.mu.Unlock()
}

func (r *recorder) report(o cache.Outcome) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	r.mu.Unlock()
	r.done <- struct{}{}
}

func (r *recorder) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Fatal("no outcome within 5s")
		}
	}
}

// quick makes 4 attempts 1, 2 and 4ms apart. (In wait.Backoff a step that reaches Cap is the
// last one, so Cap stays above the longest wait.)
var quick = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 4, Cap: 10 * time.Millisecond}

// bindingReactor answers pods/binding creates with errs in turn (nil: success) and counts them.
func bindingReactor(cs *fake.Clientset, calls *atomic.Int32, errs ...error) {
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		i := int(calls.Add(1)) - 1
		if i < len(errs) && errs[i] != nil {
			return true, nil, errs[i]
		}
		return true, nil, nil
	})
}

func start(t *testing.T, cs *fake.Clientset, rec *recorder) *Binder {
	t.Helper()
	b := New(cs, rec.report, Options{Workers: 4, Backoff: quick, Settle: 10 * time.Millisecond, Observer: rec})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = b.Start(ctx) }()
	return b
}

func req(name string) Request {
	return Request{Binding: engine.Binding{Pod: types.NamespacedName{Namespace: "a", Name: name}, Node: "n1"}, UID: types.UID(name + "-uid")}
}

var podsGR = schema.GroupResource{Resource: "pods"}

func TestBindRetriesTransientErrors(t *testing.T) {
	cs := fake.NewClientset()
	var calls atomic.Int32
	bindingReactor(cs, &calls, apierrors.NewServiceUnavailable("busy"), apierrors.NewTooManyRequests("slow down", 0))
	rec := newRecorder()
	start(t, cs, rec).Submit(req("p"))
	rec.wait(t, 1)
	if calls.Load() != 3 || len(rec.bound) != 1 || len(rec.outcomes) != 0 {
		t.Errorf("calls %d bound %v outcomes %v; want 3 calls, bound, no failure", calls.Load(), rec.bound, rec.outcomes)
	}
}

func TestBindGivesUpAndReports(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("down")
	cases := map[string]struct {
		errs      []error
		reason    string
		wantCalls int32
	}{
		"retries exhausted": {[]error{unavailable, unavailable, unavailable, unavailable}, "Retries", 4},
		"pod gone":          {[]error{apierrors.NewNotFound(podsGR, "p")}, "NotFound", 1},
		"invalid":           {[]error{apierrors.NewBadRequest("no")}, "Error", 1},
		"bound elsewhere":   {[]error{apierrors.NewConflict(podsGR, "p", errors.New("pod p is already assigned to node n2"))}, "Conflict", 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p-uid"}, Spec: corev1.PodSpec{NodeName: "n2"}})
			var calls atomic.Int32
			bindingReactor(cs, &calls, tc.errs...)
			rec := newRecorder()
			start(t, cs, rec).Submit(req("p"))
			rec.wait(t, 1)
			want := cache.Outcome{Kind: cache.BindFailed, Pod: types.NamespacedName{Namespace: "a", Name: "p"}, UID: "p-uid"}
			if len(rec.outcomes) != 1 || rec.outcomes[0] != want || rec.failed["p"] != tc.reason || calls.Load() != tc.wantCalls {
				t.Errorf("outcomes %v failed %v calls %d; want %v, reason %s, %d calls", rec.outcomes, rec.failed, calls.Load(), want, tc.reason, tc.wantCalls)
			}
		})
	}
}

// A binding whose first answer was lost and whose retry meets "already assigned" to the same
// node succeeded.
func TestConflictOnOurOwnNodeIsSuccess(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p-uid"}, Spec: corev1.PodSpec{NodeName: "n1"}})
	var calls atomic.Int32
	bindingReactor(cs, &calls, apierrors.NewTimeoutError("lost", 1), apierrors.NewConflict(podsGR, "p", errors.New("pod p is already assigned to node n1")))
	rec := newRecorder()
	start(t, cs, rec).Submit(req("p"))
	rec.wait(t, 1)
	if len(rec.bound) != 1 || len(rec.outcomes) != 0 {
		t.Errorf("bound %v outcomes %v", rec.bound, rec.outcomes)
	}
}

// A binding whose every attempt timed out may have been applied all the same: the binder looks
// before it gives the pod up, and a pod found on the binding's node is bound. Forgotten, its
// GPUs would go to another pod while it holds them.
func TestTimedOutBindingThatLandedIsSuccess(t *testing.T) {
	timeout := apierrors.NewTimeoutError("deadline", 0)
	cases := map[string]struct {
		node      string
		wantBound bool
	}{
		"applied":     {"n1", true},
		"not applied": {"", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p-uid"}, Spec: corev1.PodSpec{NodeName: tc.node}})
			var calls atomic.Int32
			bindingReactor(cs, &calls, timeout, timeout, timeout, timeout)
			rec := newRecorder()
			start(t, cs, rec).Submit(req("p"))
			rec.wait(t, 1)
			if got := len(rec.bound) == 1 && len(rec.outcomes) == 0; got != tc.wantBound || calls.Load() != 4 {
				t.Errorf("bound %v outcomes %v calls %d; want bound=%v after 4 calls", rec.bound, rec.outcomes, calls.Load(), tc.wantBound)
			}
			if !tc.wantBound && rec.failed["p"] != "Retries" {
				t.Errorf("failed %v, want Retries", rec.failed)
			}
		})
	}
}

func TestPodInFlightIsNotSubmittedTwice(t *testing.T) {
	cs := fake.NewClientset()
	release := make(chan struct{})
	var calls atomic.Int32
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" {
			calls.Add(1)
			<-release
		}
		return true, nil, nil
	})
	rec := newRecorder()
	b := start(t, cs, rec)
	b.Submit(req("p"))
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.Submit(req("p"), req("p"))
	if got := b.InFlight(); got != 1 {
		t.Errorf("in flight %d, want 1", got)
	}
	close(release)
	rec.wait(t, 1)
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != 1 || len(rec.bound) != 1 {
		t.Errorf("calls %d bound %v; want one binding", calls.Load(), rec.bound)
	}
	b.Submit(req("p")) // finished: a new decision is bound again
	rec.wait(t, 1)
	if calls.Load() != 2 {
		t.Errorf("calls %d after a new submission, want 2", calls.Load())
	}
}

func TestTransient(t *testing.T) {
	// What net.Dial returns when nothing listens.
	dialRefused := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for err, want := range map[error]bool{
		apierrors.NewServiceUnavailable("x"):          true,
		apierrors.NewTooManyRequests("x", 1):          true,
		apierrors.NewInternalError(errors.New("x")):   true,
		context.DeadlineExceeded:                      true,
		dialRefused:                                   true,
		fmt.Errorf("reading: %w", syscall.ECONNRESET): true,
		io.ErrUnexpectedEOF:                           true,
		// The words decide nothing: an error that only says so is not a broken connection.
		errors.New("dial tcp: connection refused"):           false,
		apierrors.NewNotFound(podsGR, "p"):                   false,
		apierrors.NewConflict(podsGR, "p", errors.New("x")):  false,
		apierrors.NewForbidden(podsGR, "p", errors.New("x")): false,
	} {
		if got := Transient(err); got != want {
			t.Errorf("Transient(%v) = %v, want %v", err, got, want)
		}
	}
}
