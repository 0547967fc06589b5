// Package evictor applies the engine's evictions (reclaim, preemption, consolidation, stale
// gangs, loan returns) and deletes fairway's pods left on deleted nodes. For each pod, in this
// order, it:
//
//  1. for a pod a PodDisruptionBudget covers, evicts it as a dry run, so that a refusal leaves
//     the pod untouched;
//  2. adds the DisruptionTarget condition (status subresource) with a reason per cause
//     (FairwayReclaim, FairwayPreempt, FairwayConsolidate, FairwayStaleGang, FairwayLoanReturn,
//     FairwayNodeDeleted)
//     and the engine's message, so the pod's owner and its users see why it goes, and it can
//     checkpoint before its signal (not for a grace period of 0: there is no time to act on it,
//     and the eviction sets the condition itself);
//  3. evicts the pod through the Eviction API (policy/v1), so that the API server enforces
//     PodDisruptionBudgets, with the grace period the engine gave (the pod's own, capped by its
//     queue), guarded by the pod's UID; a pod of a deleted node is deleted instead, and a
//     returned loan is deleted when a budget refuses (see Evict);
//  4. sets the condition again: the API server's eviction replaces its reason with
//     EvictionByEvictionAPI, and fairway's says why (not for a grace period of 0: the pod is
//     gone with the eviction, see restoreReason);
//  5. records events: on the victim ("Preempted by pod team-a/serve-6cc45dbb8-q8fk7 (inference
//     Deployment serve) of priority ...", the engine's message, which names the beneficiary
//     once), related to the beneficiary; and on the beneficiary: its pod when it is a gang of
//     one pod, else its PodGroup.
//
// A refusal by a budget (429 with the DisruptionBudget cause) is not retried: it is reported to
// the loop (EvictionBlocked), which cancels the eviction in the snapshot and blocks the budget
// for a while; if the condition was set already it is set back to False. Any other failure
// (other than the pod being gone already) is reported too (EvictionFailed), and the eviction is
// cancelled so the pod counts as bound again. Transient errors are retried with
// retry.OnError.
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
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/internal/podqueue"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// ReasonNodeDeleted evicts a pod whose node is gone.
const ReasonNodeDeleted = v1alpha1.EvictNodeDeleted

// ConditionReason is the DisruptionTarget condition's reason for an eviction reason.
func ConditionReason(r engine.EvictionReason) string { return v1alpha1.DisruptionReason(r) }

// ConditionEvictionRefused is the reason of a DisruptionTarget condition set back to False
// because a PodDisruptionBudget refused the eviction it announced.
const ConditionEvictionRefused = "FairwayEvictionRefusedByBudget"

// Request is one pod to evict.
type Request struct {
	engine.Eviction
	UID   types.UID
	Queue string
	// Framework is the pod's fairway.dev/framework ("none" when it has none), for metrics.
	Framework string
	// Kind is the pod's kind of work (v1alpha1.KindOf), for metrics.
	Kind string
	// FromEngine is true for the engine's evictions: a failure is reported to the loop
	// (Snapshot.CancelEviction). False for pods on deleted nodes.
	FromEngine bool
	// Budgets are the PodDisruptionBudgets the snapshot counts the pod under; when there are
	// any, a dry-run eviction asks the API server first (see Evict).
	Budgets []types.NamespacedName
	// WokeAt is, for a LoanReturn, when the gpu-agent observed a lender of the GPU do GPU work
	// again (zero when unknown): the start of the activity-to-return latency.
	WokeAt time.Time
	// HoldTaint is the taint value of the gang the engine holds the pod's node for ("" when it
	// holds it for none): the node gets the hold taint (Options.HoldTaint) before the pod is
	// evicted, so that the room it frees is never open to other schedulers.
	HoldTaint string
}

// Observer counts evictions; called concurrently.
type Observer interface {
	Evicted(r *Request)
	EvictionFailed(r *Request, err error)
}

// Options configure an Evictor.
type Options struct {
	// Workers bound the evictions in flight. DefaultWorkers when 0.
	Workers int
	// Backoff between attempts on transient errors.
	Backoff  wait.Backoff
	Events   EventSink
	Observer Observer
	Log      logr.Logger
	// Transient classifies errors worth retrying.
	Transient func(error) bool
	// HoldTaint puts the hold taint on a node for a gang and returns once the API server has the
	// taint (package holdtaint); nil taints nothing.
	HoldTaint func(ctx context.Context, node, value string) error
}

// DefaultWorkers is the evictions in flight at most, as many as the binder's bindings. An
// eviction waits on the API server for two or three writes, so a reclaim of thousands of pods
// goes as fast as the pool is wide until the API server's CPU is the limit: on 2 vCPUs, 2,000
// evictions took 80 s with 8 workers and 45 s with 64 (issue 37's reclaim-large, 500 nodes).
// kube-scheduler deletes a preemption's victims 16 at a time.
const DefaultWorkers = 32

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
		opts.Workers = DefaultWorkers
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = podqueue.CallBackoff
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
	case isBudgetErr(err):
		log.V(1).Info("Eviction refused by a PodDisruptionBudget; the engine tries again later", "budgets", r.Budgets)
		if e.opts.Observer != nil {
			e.opts.Observer.EvictionFailed(r, err)
		}
		if r.FromEngine {
			o := cache.Outcome{Kind: cache.EvictionBlocked, Pod: r.Pod, UID: r.UID}
			if len(r.Budgets) > 0 {
				o.Budget = r.Budgets[0]
			}
			if r.Beneficiary != nil {
				o.Beneficiary = *r.Beneficiary
			}
			e.report(o)
		}
	default:
		log.Error(err, "Eviction failed")
		if e.opts.Observer != nil {
			e.opts.Observer.EvictionFailed(r, err)
		}
		if r.FromEngine {
			o := cache.Outcome{Kind: cache.EvictionFailed, Pod: r.Pod, UID: r.UID}
			if r.Beneficiary != nil {
				o.Beneficiary = *r.Beneficiary
			}
			e.report(o)
		}
	}
}

var errGone = errors.New("pod is gone")

// BudgetError is an eviction the API server refused because of a PodDisruptionBudget (429, or
// 403 for a budget that allows fewer than none, both with the DisruptionBudget cause). It is not
// retried here: the loop cancels the eviction in the snapshot and blocks the budget for a while.
type BudgetError struct{ Err error }

func (e *BudgetError) Error() string {
	return "refused by a PodDisruptionBudget: " + e.Err.Error()
}

func (e *BudgetError) Unwrap() error { return e.Err }

// isBudgetRefusal reports whether the API server refused an eviction for a PodDisruptionBudget,
// from the status cause it sets (never from the message).
func isBudgetRefusal(err error) bool {
	return (apierrors.IsTooManyRequests(err) || apierrors.IsForbidden(err)) &&
		apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause)
}

func isBudgetErr(err error) bool {
	_, ok := errors.AsType[*BudgetError](err)
	return ok
}

// Evict evicts one pod: DisruptionTarget condition, eviction (the Eviction API, so that the
// API server enforces PodDisruptionBudgets), the condition again, events.
//
// A pod the snapshot knows to be covered by a budget is first evicted as a dry run: if the
// budget refuses, nothing has been said to the pod. If the real eviction is refused all the
// same (the budget changed meanwhile), the condition is set back to False, so the workload
// does not checkpoint and stop for an eviction that does not come.
//
// The API server's eviction sets DisruptionTarget itself, with the reason
// EvictionByEvictionAPI, replacing fairway's; fairway's reason (why: reclaim, preemption, ...)
// is what the workload and its users need, so it is set once more after the eviction. The
// pod is terminating by then and its kubelet has been told; workloads that watch for the
// condition see fairway's reason before and after the signal.
//
// Pods of deleted nodes are deleted, not evicted: nothing runs them any more. Loans returned to
// the idle notebooks that lent their GPU are evicted too, so that the API server counts the
// disruption against the borrower's budgets and audits it as an eviction, but a budget cannot
// keep the GPU from its owner: a loan never had a claim to the GPU, the notebook's user is
// waiting for it, and waiting for a budget would break idle lending's one promise (see
// returnLoan).
func (e *Evictor) Evict(ctx context.Context, r *Request) error {
	switch r.Reason {
	case ReasonNodeDeleted:
		return e.deletePod(ctx, r)
	case engine.EvictLoanReturn:
		return e.returnLoan(ctx, r)
	}
	if r.HoldTaint != "" && e.opts.HoldTaint != nil {
		// Evicting without the taint is what fairway did before it had one: better than not
		// evicting; the loop asks for the taint again after its next cycle.
		if err := e.opts.HoldTaint(ctx, r.Node, r.HoldTaint); err != nil {
			e.opts.Log.Error(err, "Evicting on a node without the hold taint for the gang", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "node", r.Node)
		}
	}
	if r.OverridesBudget != nil {
		return e.overrideBudget(ctx, r)
	}
	if len(r.Budgets) > 0 {
		if err := e.evict(ctx, r, true); err != nil {
			return e.evictionError(err)
		}
	}
	// With a grace period of 0 nothing can act on the condition before the kill (the kubelet
	// kills at once) and the eviction writes DisruptionTarget itself in the same request, the
	// type a Job's podFailurePolicy matches; the why is in the victim's event. Skipping the write
	// halves fairway's requests per victim where they cost most: reclaims of thousands of such
	// pods (issue 37's reclaim-large evicts 2,000).
	announce := r.GracePeriod > 0
	if announce {
		if err := e.setCondition(ctx, r, corev1.ConditionTrue, ConditionReason(r.Reason), conditionMessage(r)); err != nil {
			return err
		}
	}
	if err := e.evict(ctx, r, false); err != nil {
		err = e.evictionError(err)
		if _, refused := errors.AsType[*BudgetError](err); refused && announce {
			if cerr := e.setCondition(ctx, r, corev1.ConditionFalse, ConditionEvictionRefused,
				"fairway's eviction was refused by a PodDisruptionBudget; it will be tried again later"); cerr != nil && !errors.Is(cerr, errGone) {
				e.opts.Log.Error(cerr, "Setting the DisruptionTarget condition back to False", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name))
			}
		}
		return err
	}
	e.restoreReason(ctx, r)
	e.record(r)
	return nil
}

// restoreReason sets fairway's DisruptionTarget reason again after the API server's eviction
// replaced it, for the grace period the pod lives on. With a grace period of 0 there is none
// (and fairway wrote no reason before, see Evict): the eviction deletes the pod in the same
// request and its kubelet kills it at once, and a pod a finalizer keeps a moment longer (a Job's
// tracking finalizer) is read by its controller, whose podFailurePolicy matches the condition's
// type, not its reason.
func (e *Evictor) restoreReason(ctx context.Context, r *Request) {
	if r.GracePeriod <= 0 {
		return
	}
	if err := e.setCondition(ctx, r, corev1.ConditionTrue, ConditionReason(r.Reason), conditionMessage(r)); err != nil && !errors.Is(err, errGone) {
		// The pod is evicted; only the condition's reason is the API server's.
		e.opts.Log.V(1).Info("Could not restore fairway's DisruptionTarget reason after the eviction", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "err", err.Error())
	}
}

// evictionError classifies an error of the Eviction API.
func (e *Evictor) evictionError(err error) error {
	switch {
	case isBudgetRefusal(err):
		return &BudgetError{Err: err}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return errGone // deleted, or a new pod with the name (the UID precondition)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The API server creates nothing in a namespace being deleted, evictions included; the
		// namespace controller deletes the pod anyway.
		return errGone
	}
	return fmt.Errorf("evicting: %w", err)
}

// evict calls the Eviction API with the engine's grace period, guarded by the pod's UID.
func (e *Evictor) evict(ctx context.Context, r *Request, dryRun bool) error {
	grace := int64(r.GracePeriod / time.Second)
	opts := &metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace), Preconditions: &metav1.Preconditions{UID: &r.UID}}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: r.Pod.Namespace, Name: r.Pod.Name}, DeleteOptions: opts}
	return e.retry(ctx, func() error { return e.client.PolicyV1().Evictions(r.Pod.Namespace).Evict(ctx, ev) })
}

// setCondition patches the pod's DisruptionTarget condition (status subresource), guarded by
// its UID.
func (e *Evictor) setCondition(ctx context.Context, r *Request, status corev1.ConditionStatus, reason, message string) error {
	cond, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": r.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now(),
		}}},
	})
	if err != nil {
		return err
	}
	pods := e.client.CoreV1().Pods(r.Pod.Namespace)
	if err := e.retry(ctx, func() error {
		_, err := pods.Patch(ctx, r.Pod.Name, types.StrategicMergePatchType, cond, metav1.PatchOptions{}, "status")
		return err
	}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return errGone // deleted, or a new pod with the name
		}
		return fmt.Errorf("setting the DisruptionTarget condition: %w", err)
	}
	return nil
}

// returnLoan evicts a pod on loan with the loan's short grace, after its DisruptionTarget
// condition, and deletes it when a PodDisruptionBudget refuses: the budget is asked (and, when it
// allows the eviction, charged), but it cannot keep a lent GPU from the notebook that lent it,
// as the kubelet's node-pressure evictions ignore budgets. No dry run comes first, since the
// pod goes either way. The override is an event on the pod (LoanReturnedPastBudget) and a log
// line, so the budget's owner sees why the budget was not honoured.
func (e *Evictor) returnLoan(ctx context.Context, r *Request) error {
	return e.evictPastBudget(ctx, r, pastBudget{
		log:    "A PodDisruptionBudget refused a loan return; deleting the pod on loan anyway",
		reason: ReasonLoanReturnedPastBudget,
		note:   "A PodDisruptionBudget refused the eviction, but the GPU was only lent while its owner was idle and goes back to it: deleted with the loan's grace period",
	})
}

// ReasonLoanReturnedPastBudget is the event reason on a pod on loan deleted although a
// PodDisruptionBudget refused its eviction.
const ReasonLoanReturnedPastBudget = string(v1alpha1.EvictLoanReturnedPastBudget)

// ReasonGuaranteePastBudget is the event reason on an over-quota pod deleted although a
// PodDisruptionBudget refused its eviction: the queue it was reclaimed for waited its
// reclaim.budgetTimeout (engine.Eviction.OverridesBudget).
const ReasonGuaranteePastBudget = string(v1alpha1.EvictGuaranteePastBudget)

// overrideBudget takes back borrowed capacity a PodDisruptionBudget has delayed for longer than
// the claimant queue's reclaim.budgetTimeout, as returnLoan takes back a lent GPU: the Eviction
// API first (a budget that allows the eviction now is charged as usual), the pod deleted with
// its grace period when the budget still refuses. The DisruptionTarget condition (the engine's
// message names the budget), an event on the pod and a log line say which budget was
// overridden and why.
func (e *Evictor) overrideBudget(ctx context.Context, r *Request) error {
	return e.evictPastBudget(ctx, r, pastBudget{
		log:    "A PodDisruptionBudget delayed a guaranteed reclaim past the claimant's budget timeout; deleting the over-quota pod",
		reason: ReasonGuaranteePastBudget,
		note: fmt.Sprintf("PodDisruptionBudget %s refused the eviction, but this pod runs on borrowed capacity that %s is owed within its guarantee, and the budget delayed it past the queue's reclaim.budgetTimeout: deleted with its grace period",
			*r.OverridesBudget, claimant(r)),
	})
}

// pastBudget says how an eviction that a budget may not stop tells its override.
type pastBudget struct{ log, reason, note string }

// evictPastBudget sets the DisruptionTarget condition, evicts, and deletes the pod when a
// PodDisruptionBudget refuses, telling it in a log line and an event (see returnLoan and
// overrideBudget).
func (e *Evictor) evictPastBudget(ctx context.Context, r *Request, past pastBudget) error {
	if err := e.setCondition(ctx, r, corev1.ConditionTrue, ConditionReason(r.Reason), conditionMessage(r)); err != nil {
		return err
	}
	err := e.evict(ctx, r, false)
	if err != nil {
		err = e.evictionError(err)
	}
	if _, refused := errors.AsType[*BudgetError](err); refused {
		e.opts.Log.Info(past.log, "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "budgets", r.Budgets, "err", err.Error())
		if e.opts.Events != nil {
			e.opts.Events.Victim(r.Pod, r.UID, claimantRef(r), past.reason, past.note)
		}
		return e.deleteOnly(ctx, r)
	}
	if err != nil {
		return err
	}
	e.restoreReason(ctx, r)
	e.record(r)
	return nil
}

// claimant names the beneficiary of an eviction for messages: its pod when it is a gang of one
// pod, else its gang.
func claimant(r *Request) string {
	switch {
	case r.Beneficiary == nil:
		return "another queue"
	case r.BeneficiaryPod != nil:
		return "pod " + r.BeneficiaryPod.String()
	}
	return gangName(*r.Beneficiary)
}

// claimantRef is the object an eviction's beneficiary events go on, and its victim's event is
// related to: the beneficiary's pod when it is a gang of one pod, else its PodGroup (or its
// lone pod); nil without a beneficiary.
func claimantRef(r *Request) *corev1.ObjectReference {
	switch {
	case r.Beneficiary == nil:
		return nil
	case r.BeneficiaryPod != nil:
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: r.BeneficiaryPod.Namespace, Name: r.BeneficiaryPod.Name}
	case r.Beneficiary.PodGroup:
		return &corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PodGroup", Namespace: r.Beneficiary.Namespace, Name: r.Beneficiary.Name}
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: r.Beneficiary.Namespace, Name: r.Beneficiary.Name}
}

// deletePod deletes a pod whose node is gone, after its condition, guarded by its UID.
func (e *Evictor) deletePod(ctx context.Context, r *Request) error {
	if err := e.setCondition(ctx, r, corev1.ConditionTrue, ConditionReason(r.Reason), conditionMessage(r)); err != nil {
		return err
	}
	return e.deleteOnly(ctx, r)
}

// deleteOnly deletes the pod with the request's grace period, guarded by its UID, and records
// the events.
func (e *Evictor) deleteOnly(ctx context.Context, r *Request) error {
	grace := int64(r.GracePeriod / time.Second)
	pods := e.client.CoreV1().Pods(r.Pod.Namespace)
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

// retry runs f until it succeeds or fails with an error that is not transient (a budget's
// refusal never is), with the evictor's backoff.
func (e *Evictor) retry(ctx context.Context, f func() error) error {
	return retry.OnError(e.opts.Backoff, func(err error) bool {
		return ctx.Err() == nil && !isBudgetRefusal(err) && e.opts.Transient(err)
	}, f)
}

// conditionMessage is the DisruptionTarget message, and the victim's event: the engine's message,
// which says why and names who benefits, once ("preempted by pod team-a/serve-... (inference
// Deployment serve) of priority 100 ..."), as a sentence.
func conditionMessage(r *Request) string {
	return sentence(r.Message)
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func gangName(k snapshot.GangKey) string {
	if k.PodGroup {
		return "gang " + k.Namespace + "/" + k.Name
	}
	return "pod " + k.Namespace + "/" + k.Name
}

// EventSink is what the evictor records events with.
type EventSink interface {
	// Victim records an event on the evicted pod, related to the beneficiary (nil for none).
	Victim(pod types.NamespacedName, uid types.UID, related *corev1.ObjectReference, reason, note string)
	// Beneficiary records an event on the object that gets the capacity (claimantRef).
	Beneficiary(ref *corev1.ObjectReference, reason, note string)
}

func (e *Evictor) record(r *Request) {
	if e.opts.Events == nil {
		return
	}
	ref := claimantRef(r)
	e.opts.Events.Victim(r.Pod, r.UID, ref, string(r.Reason), conditionMessage(r))
	if ref == nil {
		return
	}
	e.opts.Events.Beneficiary(ref, "EvictingForThis",
		fmt.Sprintf("Evicting %s/%s on node %s (%s, grace %v): %s", r.Pod.Namespace, r.Pod.Name, r.Node, r.Reason, r.GracePeriod, r.Message))
}
