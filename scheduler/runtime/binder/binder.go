// Package binder applies the engine's bindings: it binds pods through the pods/binding
// subresource from a bounded pool of workers, off the scheduling loop, with retries and
// exponential back-off on transient errors. For a fractional pod it first makes the GPU share
// true on the node (package gpushare): reservation, GPU ConfigMap, GPU annotations.
//
// A pod is never submitted twice while a binding of it is in flight, and the API server accepts
// one binding per pod (the binding carries the pod's UID). Every failure is reported to the loop,
// which forgets the pod's assumed placement so that a later cycle places it again.
package binder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/runtime/internal/podqueue"
)

// Request is one binding with what the binder needs to know about the pod.
type Request struct {
	engine.Binding
	UID     types.UID
	Created time.Time
	// Queue, Framework and Kind (the pod's kind of work) label the latency metric.
	Queue, Framework, Kind string
	// ResourceVersion is the pod's version the placement was planned from (the informer's): a
	// fractional pod's GPU is written only onto that version (gpushare.PodRef.ResourceVersion).
	ResourceVersion string
}

// Observer receives the binder's outcomes, for metrics and events. Every method may be called
// concurrently.
type Observer interface {
	// Bound is called after a successful binding.
	Bound(r *Request, at time.Time)
	// Failed is called when a binding is given up, with the reason's code (never
	// ReasonCanceled: a binding abandoned by a former leader is no failure).
	Failed(r *Request, reason FailureReason, err error)
}

// FailureReason is the short code of a given-up binding: the label of the binding-errors metric
// and what decides whether the pod gets a FailedBinding event. Typed, so that the code's readers
// (metrics, events) compare against the one list below instead of spelling the strings again.
type FailureReason string

// The reasons a binding is given up. The text is the metric's label value: keep it stable.
const (
	// ReasonConflict: the pod has another node already (bound by someone else).
	ReasonConflict FailureReason = "Conflict"
	// ReasonNotFound: the pod, or its GPU reservation, is gone.
	ReasonNotFound FailureReason = "NotFound"
	// ReasonGPUReservation: the GPU of a fractional pod could not be reserved or prepared.
	ReasonGPUReservation FailureReason = "GPUReservation"
	// ReasonResourceClaim: the pod's ResourceClaims could not be allocated.
	ReasonResourceClaim FailureReason = "ResourceClaim"
	// ReasonRetries: transient errors outlasted the retries.
	ReasonRetries FailureReason = "Retries"
	// ReasonError: any other error of the API server.
	ReasonError FailureReason = "Error"
	// ReasonCanceled: the binder stopped (no longer the leader); not reported to the Observer.
	ReasonCanceled FailureReason = "Canceled"
)

// Options configure a Binder.
type Options struct {
	// Workers bound the bindings in flight. DefaultWorkers when 0.
	Workers int
	// SharedWorkers bound the fractional bindings in flight, which may wait for a gpu-agent.
	// DefaultSharedWorkers when 0.
	SharedWorkers int
	// Backoff between attempts of one binding on transient errors.
	Backoff wait.Backoff
	// GPU makes fractional placements true; required for fractional bindings.
	GPU *gpushare.Manager
	// ClaimConflict is the last check of a DRA allocation before it is written (claims.go);
	// none when nil.
	ClaimConflict ClaimConflict
	// Settle is how long after a binding's last attempt failed with a transient error (its
	// answer lost or late) the binder looks whether the API server applied it anyway; at least
	// the writes' server-side deadline (--write-timeout). DefaultSettle when 0.
	Settle time.Duration
	// Pods reads pods from the informer cache: with it, share bindings on one node wait for the
	// kubelet to admit the previous one (admission.go). Nil: they do not wait.
	Pods gpushare.PodReader
	// AdmissionWait bounds that wait; DefaultAdmissionWait when 0. AdmissionPoll is how often
	// the cache is read meanwhile; 20ms when 0.
	AdmissionWait, AdmissionPoll time.Duration
	Observer                     Observer
	Log                          logr.Logger
}

// The default sizes of the worker pools.
const (
	DefaultWorkers       = 32
	DefaultSharedWorkers = 64
)

// DefaultSettle is Options.Settle's default: the scheduler's default --write-timeout.
const DefaultSettle = 5 * time.Second

// DefaultBackoff is the binder's retry of one API call: podqueue.CallBackoff, the evictor's too.
var DefaultBackoff = podqueue.CallBackoff

// Binder is the pool of binding workers. It implements manager.Runnable (leader only).
type Binder struct {
	client kubernetes.Interface
	report func(cache.Outcome)
	opts   Options

	queue  *podqueue.Queue[Request]
	shared chan struct{}
	gate   admissionGate
}

// New returns a binder that binds through cs and reports failures to report.
func New(cs kubernetes.Interface, report func(cache.Outcome), opts Options) *Binder {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.SharedWorkers <= 0 {
		opts.SharedWorkers = DefaultSharedWorkers
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.AdmissionWait <= 0 {
		opts.AdmissionWait = DefaultAdmissionWait
	}
	if opts.AdmissionPoll <= 0 {
		opts.AdmissionPoll = 20 * time.Millisecond
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Binder{
		client: cs, report: report, opts: opts,
		queue:  podqueue.New(func(r *Request) types.NamespacedName { return r.Pod }),
		shared: make(chan struct{}, opts.SharedWorkers),
	}
}

// NeedLeaderElection is true: only the leader binds.
func (b *Binder) NeedLeaderElection() bool { return true }

// Submit queues bindings; it never blocks. A pod whose binding is already in flight is skipped:
// the engine only binds a pod it sees pending, so a duplicate means the first attempt's outcome
// has not reached the loop yet, and that outcome settles the pod.
func (b *Binder) Submit(reqs ...Request) {
	b.queue.Add(reqs, func(r *Request) {
		b.opts.Log.V(1).Info("Binding already in flight; not submitting it again", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name))
	})
}

// InFlight is the number of bindings submitted and not finished.
func (b *Binder) InFlight() int { return b.queue.InFlight() }

// Start runs the workers until ctx ends.
func (b *Binder) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range b.opts.Workers {
		wg.Go(func() { b.work(ctx) })
	}
	wg.Wait()
	return nil
}

func (b *Binder) work(ctx context.Context) {
	for {
		r, ok := b.queue.Next(ctx)
		if !ok {
			return
		}
		if r.Shared == nil {
			b.finish(&r, b.bind(ctx, &r))
			continue
		}
		// Fractional bindings may wait for a gpu-agent; they run beside the pool.
		select {
		case b.shared <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go func() {
			defer func() { <-b.shared }()
			b.bindSharedGated(ctx, &r)
		}()
	}
}

// failure is a given-up binding with a reason code.
type failure struct {
	reason FailureReason
	err    error
}

func (f *failure) Error() string { return string(f.reason) + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func (b *Binder) finish(r *Request, err error) {
	b.queue.Done(r)
	if err == nil {
		// No logger with the pod's values unless the line is written: building one encodes
		// them, once per bound pod.
		if v := b.opts.Log.V(3); v.Enabled() {
			v.Info("Bound", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "node", r.Node)
		}
		if b.opts.Observer != nil {
			b.opts.Observer.Bound(r, time.Now())
		}
		return
	}
	log := b.opts.Log.WithValues("pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "node", r.Node)
	reason := ReasonError
	var f *failure
	if errors.As(err, &f) {
		reason = f.reason
	}
	if reason == ReasonCanceled {
		log.V(2).Info("Binding abandoned: no longer the leader")
	} else {
		log.Info("Binding failed; the pod goes back to pending", "reason", reason, "err", err.Error())
	}
	if b.opts.Observer != nil && reason != ReasonCanceled {
		b.opts.Observer.Failed(r, reason, err)
	}
	b.report(cache.Outcome{Kind: cache.BindFailed, Pod: r.Pod, UID: r.UID})
}

// bind writes the pod's ResourceClaims (claims.go), then posts the binding, retrying transient
// errors.
func (b *Binder) bind(ctx context.Context, r *Request) error {
	if len(r.Claims) == 0 {
		return b.bindPod(ctx, r)
	}
	allocated, err := b.reserveClaims(ctx, r)
	if err == nil {
		err = b.bindPod(ctx, r)
	} else {
		err = &failure{ReasonResourceClaim, err}
	}
	if err != nil && ctx.Err() == nil {
		b.releaseClaims(ctx, r, allocated)
	}
	return err
}

// bindPod posts the binding, retrying transient errors.
func (b *Binder) bindPod(ctx context.Context, r *Request) error { return b.bindPodAt(ctx, r, "") }

// bindPodAt posts the binding, with the pod's resourceVersion as a precondition when rv is set
// (the API server refuses the binding with a Conflict when the pod changed since).
func (b *Binder) bindPodAt(ctx context.Context, r *Request, rv string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Pod.Namespace, Name: r.Pod.Name, UID: r.UID, ResourceVersion: rv},
		Target:     corev1.ObjectReference{Kind: "Node", Name: r.Node},
	}
	attempts := 0
	err := retry.OnError(b.opts.Backoff, b.retriable(ctx, r, &attempts), func() error {
		attempts++
		return b.client.CoreV1().Pods(r.Pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return &failure{ReasonCanceled, ctx.Err()}
	case apierrors.IsNotFound(err):
		return &failure{ReasonNotFound, err}
	case apierrors.IsConflict(err):
		// The API server answers a binding of a pod that has a node with a Conflict (whatever
		// its message says). Maybe an earlier attempt of ours succeeded and its answer was lost.
		if p, gerr := b.client.CoreV1().Pods(r.Pod.Namespace).Get(ctx, r.Pod.Name, metav1.GetOptions{}); gerr == nil &&
			p.UID == r.UID && p.Spec.NodeName == r.Node {
			return nil
		}
		return &failure{ReasonConflict, err}
	case Transient(err):
		// The last attempt's answer was lost or came late, and the API server may have applied
		// it all the same (a write past its deadline can still commit in etcd). Forgetting the
		// placement now would give the pod's GPUs to another pod while it holds them: look
		// once the write can no longer land.
		if b.boundAfterSettling(ctx, r) {
			return nil
		}
		if ctx.Err() != nil {
			return &failure{ReasonCanceled, ctx.Err()}
		}
		return &failure{ReasonRetries, fmt.Errorf("gave up after %d attempts: %w", attempts, err)}
	}
	return &failure{ReasonError, err}
}

// boundAfterSettling waits Options.Settle, then reports whether the pod is bound to r's node
// (an ambiguous attempt was applied). Until it returns the pod stays in flight, so the loop
// keeps its placement assumed and plans nothing else onto its GPUs.
func (b *Binder) boundAfterSettling(ctx context.Context, r *Request) bool {
	t := time.NewTimer(b.opts.Settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	p, err := b.client.CoreV1().Pods(r.Pod.Namespace).Get(ctx, r.Pod.Name, metav1.GetOptions{})
	if err != nil {
		return false // the informer will show the pod's node, if it has one
	}
	if p.UID == r.UID && p.Spec.NodeName == r.Node {
		b.opts.Log.Info("A binding whose answer was lost was applied", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "node", r.Node)
		return true
	}
	return false
}

// bindSharedGated binds a share under its node's admission lock (admission.go), reports the
// outcome, and on success keeps the lock until the kubelet has admitted the pod.
func (b *Binder) bindSharedGated(ctx context.Context, r *Request) {
	if err := b.gate.lock(ctx, r.Node); err != nil {
		b.finish(r, &failure{ReasonCanceled, err})
		return
	}
	defer b.gate.unlock(r.Node)
	err := b.bindShared(ctx, r)
	b.finish(r, err)
	if err == nil {
		b.waitAdmitted(ctx, r)
	}
}

// bindShared makes the GPU share true on the node, then binds.
func (b *Binder) bindShared(ctx context.Context, r *Request) error {
	if b.opts.GPU == nil {
		return &failure{ReasonGPUReservation, errors.New("fractional GPUs are not configured")}
	}
	slot := gpushare.SlotKey{Node: r.Node, Slot: r.Shared.Index}
	grant, done, err := b.opts.GPU.Acquire(ctx, slot)
	if err != nil {
		if ctx.Err() != nil {
			return &failure{ReasonCanceled, err}
		}
		return &failure{ReasonGPUReservation, err}
	}
	defer done()
	// A loan joins the GPU's reservation like any fractional pod.
	pod := gpushare.PodRef{Namespace: r.Pod.Namespace, Name: r.Pod.Name, UID: r.UID, ResourceVersion: r.ResourceVersion, Loan: r.Shared.Loan}
	var rv string
	if err := b.retry(ctx, r, func() (err error) {
		rv, err = b.opts.GPU.Prepare(ctx, pod, grant, r.Shared.Index)
		return err
	}); err != nil {
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsInvalid(err):
			return &failure{ReasonNotFound, err}
		case errors.Is(err, gpushare.ErrPodChanged):
			return &failure{ReasonConflict, err}
		}
		return &failure{ReasonGPUReservation, err}
	}
	if len(r.Claims) > 0 {
		return b.bind(ctx, r)
	}
	// The binding names the version Prepare left: if anything bound or changed the pod since,
	// the API server refuses it, and the GPU annotations stay those of the binding that won.
	if r.ResourceVersion == "" {
		rv = ""
	}
	return b.bindPodAt(ctx, r, rv)
}

// retry runs f until it succeeds, fails for good, or the back-off runs out.
func (b *Binder) retry(ctx context.Context, r *Request, f func() error) error {
	attempts := 0
	return retry.OnError(b.opts.Backoff, b.retriable(ctx, r, &attempts), func() error {
		attempts++
		return f()
	})
}

// retriable is retry.OnError's test for r: a transient error while ctx lasts. It logs the
// retry. retry.OnError sleeps without ctx, so a cancelled binding ends after at most one
// back-off step (Backoff.Cap): its next API call fails at once with ctx's error.
func (b *Binder) retriable(ctx context.Context, r *Request, attempts *int) func(error) bool {
	return func(err error) bool {
		if ctx.Err() != nil || !Transient(err) {
			return false
		}
		b.opts.Log.V(2).Info("API call failed; retrying", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "attempt", *attempts, "err", err.Error())
		return true
	}
}

// Transient reports whether an API error is worth retrying: timeouts, throttling, server errors
// and broken connections. It decides by the error's type (API status reason, net.Error, errno),
// never by its message.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err)
}
