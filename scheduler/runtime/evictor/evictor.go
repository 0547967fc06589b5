// Package evictor applies the engine's evictions (reclaim, preemption, consolidation, stale
// gangs) and deletes fairway's pods left on deleted nodes. For each pod, in this order, it:
//
//  1. adds the DisruptionTarget condition (status subresource) with a reason per cause
//     (FairwayReclaim, FairwayPreempt, FairwayConsolidate, FairwayStaleGang, FairwayLoanReturn,
//     FairwayNodeDeleted)
//     and the engine's message, so the pod's owner and its users see why it goes;
//  2. deletes the pod with the grace period the engine gave (the time to checkpoint), guarded
//     by the pod's UID;
//  3. records events: on the victim ("Preempted by team-a/train because ...") and on the
//     beneficiary's PodGroup, or on the beneficiary pod when it has none.
//
// A failure (other than the pod being gone already) is reported to the loop, which cancels the
// eviction in the snapshot so the pod counts as bound again.
package evictor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/internal/podqueue"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// ReasonNodeDeleted evicts a pod whose node is gone.
const ReasonNodeDeleted engine.EvictionReason = "NodeDeleted"

// ConditionReason is the DisruptionTarget condition's reason for an eviction reason.
func ConditionReason(r engine.EvictionReason) string { return "Fairway" + string(r) }

// Request is one pod to evict.
type Request struct {
	engine.Eviction
	UID   types.UID
	Queue string
	// Framework is the pod's fairway.dev/framework ("none" when it has none), for metrics.
	Framework string
	// FromEngine is true for the engine's evictions: a failure is reported to the loop
	// (Snapshot.CancelEviction). False for pods on deleted nodes.
	FromEngine bool
	// WokeAt is, for a LoanReturn, when the gpu-agent observed a lender of the GPU do GPU work
	// again (zero when unknown): the start of the activity-to-return latency.
	WokeAt time.Time
}

// Observer counts evictions; called concurrently.
type Observer interface {
	Evicted(r *Request)
	EvictionFailed(r *Request, err error)
}

// Options configure an Evictor.
type Options struct {
	// Workers bound the evictions in flight. 8 when 0.
	Workers int
	// Backoff between attempts on transient errors.
	Backoff  wait.Backoff
	Events   EventSink
	Observer Observer
	Log      logr.Logger
	// Transient classifies errors worth retrying.
	Transient func(error) bool
}

// Evictor is the pool of eviction workers. It implements manager.Runnable (leader only).
type Evictor struct {
	client kubernetes.Interface
	report func(cache.Outcome)
	opts   Options

	queue *podqueue.Queue[Request]
}

// New returns an evictor writing through cs and reporting failures to report.
func New(cs kubernetes.Interface, report func(cache.Outcome), opts Options) *Evictor {
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 2 * time.Second}
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Transient == nil {
		opts.Transient = func(error) bool { return false }
	}
	return &Evictor{client: cs, report: report, opts: opts,
		queue: podqueue.New(func(r *Request) types.NamespacedName { return r.Pod })}
}

// NeedLeaderElection is true: only the leader evicts.
func (e *Evictor) NeedLeaderElection() bool { return true }

// Submit queues evictions in the given order; it never blocks. A pod already being evicted is
// skipped.
func (e *Evictor) Submit(reqs ...Request) { e.queue.Add(reqs, nil) }

// Start runs the workers until ctx ends.
func (e *Evictor) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range e.opts.Workers {
		wg.Go(func() {
			for {
				r, ok := e.queue.Next(ctx)
				if !ok {
					return
				}
				err := e.Evict(ctx, &r)
				e.queue.Done(&r)
				e.done(&r, err)
			}
		})
	}
	wg.Wait()
	return nil
}

func (e *Evictor) done(r *Request, err error) {
	log := e.opts.Log.WithValues("pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "reason", r.Reason)
	switch {
	case err == nil:
		log.V(2).Info("Evicted", "gracePeriod", r.GracePeriod)
		if e.opts.Observer != nil {
			e.opts.Observer.Evicted(r)
		}
	case errors.Is(err, errGone):
		log.V(2).Info("Pod already gone")
	default:
		log.Error(err, "Eviction failed")
		if e.opts.Observer != nil {
			e.opts.Observer.EvictionFailed(r, err)
		}
		if r.FromEngine {
			e.report(cache.Outcome{Kind: cache.EvictionFailed, Pod: r.Pod, UID: r.UID})
		}
	}
}

var errGone = errors.New("pod is gone")

// Evict evicts one pod: DisruptionTarget condition, deletion, events.
func (e *Evictor) Evict(ctx context.Context, r *Request) error {
	pods := e.client.CoreV1().Pods(r.Pod.Namespace)
	cond, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": r.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ConditionReason(r.Reason),
			Message: conditionMessage(r), LastTransitionTime: metav1.Now(),
		}}},
	})
	if err != nil {
		return err
	}
	if err := e.retry(ctx, func() error {
		_, err := pods.Patch(ctx, r.Pod.Name, types.StrategicMergePatchType, cond, metav1.PatchOptions{}, "status")
		return err
	}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return errGone // deleted, or a new pod with the name
		}
		return fmt.Errorf("setting the DisruptionTarget condition: %w", err)
	}
	grace := int64(r.GracePeriod / time.Second)
	if err := e.retry(ctx, func() error {
		return pods.Delete(ctx, r.Pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace), Preconditions: &metav1.Preconditions{UID: &r.UID}})
	}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return errGone
		}
		return fmt.Errorf("deleting: %w", err)
	}
	e.record(r)
	return nil
}

func (e *Evictor) retry(ctx context.Context, f func() error) error {
	b := e.opts.Backoff
	for {
		err := f()
		if err == nil || !e.opts.Transient(err) || b.Steps <= 1 || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.Step()):
		}
	}
}

// conditionMessage is the DisruptionTarget message: who benefits and why.
func conditionMessage(r *Request) string {
	if r.Beneficiary != nil {
		return fmt.Sprintf("%s by %s: %s", verb(r.Reason), gangName(*r.Beneficiary), r.Message)
	}
	return r.Message
}

// verb is the past participle of an eviction reason, for messages.
func verb(r engine.EvictionReason) string {
	switch r {
	case engine.EvictReclaim:
		return "Reclaimed"
	case engine.EvictPreempt:
		return "Preempted"
	case engine.EvictConsolidate:
		return "Moved to make room"
	case engine.EvictStaleGang:
		return "Evicted with its stale gang"
	case engine.EvictLoanReturn:
		return "Returned the lent GPU"
	case ReasonNodeDeleted:
		return "Deleted with its node"
	}
	return "Evicted"
}

func gangName(k snapshot.GangKey) string {
	if k.PodGroup {
		return k.Namespace + "/" + k.Name
	}
	return k.Namespace + "/" + k.Name + " (pod)"
}

// EventSink is what the evictor records events with.
type EventSink interface {
	// Victim records an event on the evicted pod.
	Victim(pod types.NamespacedName, uid types.UID, reason, note string)
	// Beneficiary records an event on the gang that gets the capacity.
	Beneficiary(gang snapshot.GangKey, reason, note string)
}

func (e *Evictor) record(r *Request) {
	if e.opts.Events == nil {
		return
	}
	reason := string(r.Reason)
	if r.Beneficiary == nil {
		e.opts.Events.Victim(r.Pod, r.UID, reason, conditionMessage(r))
		return
	}
	b := gangName(*r.Beneficiary)
	e.opts.Events.Victim(r.Pod, r.UID, reason, fmt.Sprintf("%s by %s because %s", verb(r.Reason), b, r.Message))
	e.opts.Events.Beneficiary(*r.Beneficiary, "EvictingForThis",
		fmt.Sprintf("Evicting %s/%s on node %s (%s, grace %v): %s", r.Pod.Namespace, r.Pod.Name, r.Node, r.Reason, r.GracePeriod, r.Message))
}
