// Package pipelines holds the Argo Workflow runs that pipeline admission suspended
// (v1alpha1.PipelineAdmissionPeak) and starts each when its peak fits.
//
// The webhook suspends a run at creation, before its first pod, when its peak does not surely
// fit its queue, and marks it v1alpha1.RunHeld. This package turns every such run into facts of
// the engine's snapshot: a pending gang of pods that never exist, one for each pod of the run's
// GPU peak (pipelinerun.Profile.PeakGPUPods), with their requests, node selectors, tolerations,
// queue and priority. The engine then treats the run like any pending gang: in queue order and
// fair share, counted in its queue's demand, with reclaim and preemption to make room. When it
// places the gang, the run fits: the runtime resumes it (clears spec.suspend) instead of binding
// anything, and keeps the capacity the gang took for the run until the run's own pods show up
// (at most Options.StartGrace), so that runs resumed one after the other do not count the same
// GPUs. While it waits, the engine's reason is written to the Workflow (v1alpha1.Run*
// annotations) and recorded in events, so `fairway why workflow/<name>` can say why.
//
// A held run never waits for ever: one whose peak is above its queue's limit, or above what the
// cluster has (more GPUs than all nodes, a pod larger than any node) for Options.NeverFitsAfter,
// is resumed to run pod by pod, as without pipeline admission, with reason RunNeverFits.
//
// The annotations are honoured only where they could have been fairway's decision: the queue
// they name must exist, serve the Workflow's namespace and admit pipelines in the mode of the
// state (v1alpha1.RunAdmissionState.Mode: Peak for a held run, Stages for a staged one). That is
// checked when a run is taken up and again in every cycle, so a run whose queue is deleted, stops
// serving its namespace or turns pipeline admission off is released within one cycle: resumed
// to run pod by pod (a staged run just stops being staged), with reason RunQueueUnavailable on
// the Workflow and in a warning event, never left suspended with no pod and no reason. Keys a
// user forged (past a webhook that was down, or in a namespace it does not serve) thus never
// give a run a hold its queue does not grant.
package pipelines

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/pipelinerun"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Options configure Runs.
type Options struct {
	// StartGrace is how long the capacity of a resumed run's peak stays taken in the snapshot
	// when none of the run's pods shows up. Default 30s.
	StartGrace time.Duration
	// NeverFitsAfter is how long a run is held before a peak above what the cluster has makes it
	// run pod by pod (nodes may still be joining). Default 1m.
	NeverFitsAfter time.Duration
	// StageLead is how long before the expected end of the steps before a GPU stage the stage
	// is held, in queues whose pipelineAdmission is Stages; a stage's hold is also given up
	// when those steps run this long past their expected end. Default 1m.
	StageLead time.Duration
	// KindPollInterval is how often the Workflow kind is looked up again until Argo is
	// installed. Default 10s.
	KindPollInterval time.Duration
	// Engine is the pipeline engine whose runs are held (Argo; cmd/ wires
	// runprofile.Pipelines). Nil: no run is watched, held or staged.
	Engine Engine
	// Priority resolves a priority class to its value (nil when unknown).
	Priority func(class string) *int32
	Events   events.EventRecorder
	Log      logr.Logger
}

// Runs holds the suspended runs. Apply, Rebuild, PodSeen and Decided belong to the scheduling
// loop's goroutine; Start runs the Workflow informer and the writers (leader only).
type Runs struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	queue  *cache.Queue
	opts   Options

	mu      sync.Mutex
	lister  toolscache.GenericLister
	gvr     schema.GroupVersionResource
	pending map[types.NamespacedName]write
	writes  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	// Owned by the loop.
	runs map[types.NamespacedName]*run
	pods map[types.NamespacedName]*run
	// unheld are runs marked held whose queue could not hold them when they were taken up
	// (queueProblem): Decided releases them once the cycle's changes are all applied, so that a
	// Queue event later in the same batch is seen first.
	unheld map[types.NamespacedName]struct{}
	// staged are the runs of Stages queues (stages.go), stagePods the stand-ins of their
	// stage holds, durations what their steps took.
	staged    map[types.NamespacedName]*staged
	stagePods map[types.NamespacedName]*staged
	durations durations
}

type run struct {
	key       types.NamespacedName
	uid       types.UID
	queue     string
	kfp       bool
	gang      snapshot.GangKey
	pods      []types.NamespacedName
	peak      pipelinerun.Demand
	maxPodGPU int64 // the most whole GPUs one of its peak pods asks for
	heldSince time.Time
	// started is when the runtime resumed it; zero while it is held.
	started time.Time
	seen    bool
	// reason and message are the last written while held.
	reason, message string
	writtenAt       time.Time
}

// write is a change of a run's Workflow for the writers.
type write struct {
	state   v1alpha1.RunAdmissionState
	reason  string
	message string
	resume  bool
	at      time.Time
	// staged: the write is for a Staged run, and applies only while the Workflow is Staged;
	// otherwise only while fairway holds it (heldByFairway).
	staged bool
}

// New returns Runs that enqueue Workflow changes on queue.
func New(dyn dynamic.Interface, mapper meta.RESTMapper, queue *cache.Queue, opts Options) *Runs {
	if opts.StartGrace <= 0 {
		opts.StartGrace = 30 * time.Second
	}
	if opts.NeverFitsAfter <= 0 {
		opts.NeverFitsAfter = time.Minute
	}
	if opts.StageLead <= 0 {
		opts.StageLead = time.Minute
	}
	if opts.KindPollInterval <= 0 {
		opts.KindPollInterval = 10 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Priority == nil {
		opts.Priority = func(string) *int32 { return nil }
	}
	return &Runs{dyn: dyn, mapper: mapper, queue: queue, opts: opts,
		pending: map[types.NamespacedName]write{},
		writes: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "pipeline-runs"}),
		runs: map[types.NamespacedName]*run{}, pods: map[types.NamespacedName]*run{}, unheld: map[types.NamespacedName]struct{}{},
		staged: map[types.NamespacedName]*staged{}, stagePods: map[types.NamespacedName]*staged{}}
}

// NeedLeaderElection is true: only the leader holds and starts runs.
func (r *Runs) NeedLeaderElection() bool { return true }

// Start watches Workflows once Argo's CRD is served and writes the runs' changes until ctx ends.
func (r *Runs) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		r.writes.ShutDown()
	}()
	go r.watch(ctx)
	for r.processNext(ctx) {
	}
	return nil
}

func (r *Runs) watch(ctx context.Context) {
	if r.opts.Engine == nil {
		r.opts.Log.V(1).Info("No pipeline engine wired; no run is held")
		return
	}
	cache.WatchOptional(ctx, r.dyn, r.mapper, r.opts.KindPollInterval, r.opts.Log, []cache.OptionalKind{{
		GVK: r.opts.Engine.RunKind(), Trim: trim, Setup: r.setupInformer,
		Missing:  "Argo Workflows not installed; no run is held until it is",
		Watching: "Watching Argo Workflows for pipeline admission",
	}})
}

// setupInformer wakes the loop on the runs the webhook marked, and keeps the lister.
func (r *Runs) setupInformer(gvr schema.GroupVersionResource, inf informers.GenericInformer) error {
	enqueue := func(obj any, relevant bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			r.queue.Add(cache.Key{Kind: cache.KindWorkflow, Namespace: o.GetNamespace(), Name: o.GetName()}, relevant)
		}
	}
	marked := func(obj any) bool {
		o, ok := obj.(metav1.Object)
		return ok && o.GetAnnotations()[v1alpha1.RunAdmissionAnnotation] != ""
	}
	if _, err := inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if marked(obj) {
				enqueue(obj, true)
			}
		},
		UpdateFunc: func(old, cur any) {
			if marked(old) || marked(cur) {
				enqueue(cur, !statusOnly(old, cur))
			}
		},
		DeleteFunc: func(obj any) { enqueue(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching runs: %w", err)
	}
	r.mu.Lock()
	r.lister, r.gvr = inf.Lister(), gvr
	r.mu.Unlock()
	return nil
}

// statusOnly reports whether a Workflow update is a Staged run's progress that does not end it:
// Argo writes its status with every step, and the next cycle reads it (pods that end wake the
// loop on their own).
func statusOnly(old, cur any) bool {
	a, aok := old.(*unstructured.Unstructured)
	b, bok := cur.(*unstructured.Unstructured)
	if !aok || !bok || !isStaged(a) || !isStaged(b) || workflowFinished(b) {
		return false
	}
	return maps.Equal(a.GetAnnotations(), b.GetAnnotations())
}

// trim keeps what the profile and the runtime read: metadata and spec, and of a Staged run's
// status its phase and its nodes' names, types, phases and starts.
func trim(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := cache.SpecOnly(u)
	if u.GetAnnotations()[v1alpha1.RunAdmissionAnnotation] == string(v1alpha1.RunStaged) {
		status := map[string]any{}
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "" {
			status["phase"] = phase
		}
		nodes, _, _ := unstructured.NestedMap(u.Object, "status", "nodes")
		kept := make(map[string]any, len(nodes))
		for id, raw := range nodes {
			if n, ok := raw.(map[string]any); ok {
				kept[id] = map[string]any{"name": n["name"], "type": n["type"], "phase": n["phase"], "startedAt": n["startedAt"]}
			}
		}
		status["nodes"] = kept
		out.Object["status"] = status
	}
	return out, nil
}

func (r *Runs) get(key types.NamespacedName) *unstructured.Unstructured {
	r.mu.Lock()
	lister := r.lister
	r.mu.Unlock()
	if lister == nil {
		return nil
	}
	obj, err := lister.ByNamespace(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// heldByFairway: the webhook (or this runtime) holds the run and it is still suspended.
func heldByFairway(wf *unstructured.Unstructured) bool {
	if wf == nil || wf.GetAnnotations()[v1alpha1.RunAdmissionAnnotation] != string(v1alpha1.RunHeld) {
		return false
	}
	suspended, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend")
	return suspended && wf.GetDeletionTimestamp() == nil
}

// ---- The loop's side -------------------------------------------------------------------------

// Rebuild puts every held run into a new snapshot, and follows every Staged run again (what
// their status says; their pods as they change).
func (r *Runs) Rebuild(snap *snapshot.Snapshot, now time.Time) {
	r.runs = map[types.NamespacedName]*run{}
	r.pods = map[types.NamespacedName]*run{}
	r.unheld = map[types.NamespacedName]struct{}{}
	r.staged = map[types.NamespacedName]*staged{}
	r.stagePods = map[types.NamespacedName]*staged{}
	r.mu.Lock()
	lister := r.lister
	r.mu.Unlock()
	if lister == nil {
		return
	}
	objs, _ := lister.List(labels.Everything())
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && (heldByFairway(u) || isStaged(u)) {
			r.Apply(snap, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, now)
		}
	}
}

// Apply brings one run up to date in the snapshot.
func (r *Runs) Apply(snap *snapshot.Snapshot, key types.NamespacedName, now time.Time) {
	wf := r.get(key)
	if isStaged(wf) || r.staged[key] != nil {
		r.applyStaged(snap, key, wf, now)
	}
	rn := r.runs[key]
	if rn != nil && wf != nil && wf.GetUID() != rn.uid {
		r.release(snap, rn) // a new run of the same name
		rn = nil
	}
	held := heldByFairway(wf)
	switch {
	case held && rn == nil:
		r.hold(snap, wf, now)
	case !held && rn != nil && rn.started.IsZero():
		// Resumed by someone else, or deleted: nothing to hold any more.
		r.release(snap, rn)
	case wf == nil && rn != nil:
		r.release(snap, rn)
	}
}

// queueProblem says why queue cannot hold or stage a run of namespace ns in state, "" when it
// can: the queue does not exist, does not serve ns, or does not admit pipelines in the state's
// mode. The snapshot's view is the scheduler's own (Queue objects and namespaces), not the
// Workflow's word.
func queueProblem(snap *snapshot.Snapshot, ns, queue string, state v1alpha1.RunAdmissionState) string {
	q := snap.Queue(queue)
	switch {
	case queue == "":
		return "the run names no queue"
	case q == nil || !q.Defined:
		return fmt.Sprintf("queue %s does not exist", queue)
	case !q.Serves(ns):
		return fmt.Sprintf("queue %s does not serve namespace %s", queue, ns)
	case q.PipelineAdmission() != state.Mode():
		return fmt.Sprintf("queue %s admits pipelines %s, not %s", queue, q.PipelineAdmission(), state.Mode())
	}
	return ""
}

// releaseUnavailable lets a run whose queue cannot hold or stage it any more (queueProblem) go:
// a held run is resumed to run pod by pod, a staged one is no longer followed; both say why on
// the Workflow and in an event.
func (r *Runs) releaseUnavailable(key types.NamespacedName, why string, staged bool, now time.Time) {
	msg := why + "; the run is released to run pod by pod"
	r.enqueue(key, write{state: v1alpha1.RunPerPod, reason: string(v1alpha1.RunQueueUnavailable), message: msg,
		resume: !staged, staged: staged, at: now})
	r.event(key, corev1.EventTypeWarning, v1alpha1.EventRunPerPod, "Release", "The run is released: "+msg)
	r.opts.Log.V(1).Info("Released a run its queue cannot hold", "workflow", key.String(), "why", why)
}

// hold adds the run's peak to the snapshot as a pending gang.
func (r *Runs) hold(snap *snapshot.Snapshot, wf *unstructured.Unstructured, now time.Time) {
	key := types.NamespacedName{Namespace: wf.GetNamespace(), Name: wf.GetName()}
	log := r.opts.Log.WithValues("workflow", key.String())
	queue := v1alpha1.RunAdmissionOf(wf.GetAnnotations()).Queue
	if queueProblem(snap, key.Namespace, queue, v1alpha1.RunHeld) != "" {
		r.unheld[key] = struct{}{} // Decided releases it
		return
	}
	prof, err := r.opts.Engine.Profile(wf)
	switch {
	case err != nil:
		r.perPod(key, v1alpha1.RunProfileUnknown, "fairway cannot profile the run: "+err.Error(), now)
		return
	case prof.Unbounded:
		r.perPod(key, v1alpha1.RunProfileUnknown, "the run's peak is not known before it starts", now)
		return
	case !prof.Peak.HasGPU() || queue == "":
		r.perPod(key, v1alpha1.RunProfileUnknown, "the run asks for no GPU, or names no queue: nothing to hold it for", now)
		return
	}
	rn := &run{key: key, uid: wf.GetUID(), queue: queue, peak: prof.Peak, heldSince: wf.GetCreationTimestamp().Time,
		gang: snapshot.GangKey{Namespace: key.Namespace, Name: v1alpha1.RunGangName(key.Name), PodGroup: true}}
	if rn.heldSince.IsZero() {
		rn.heldSince = now
	}
	pods := r.peakPods(wf, prof, queue)
	for _, p := range pods {
		rn.kfp = rn.kfp || p.Annotations[v1alpha1.WorkloadKindAnnotation] == string(v1alpha1.KindPipelineStep)
		if q, ok := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(v1alpha1.ResourceGPU)]; ok {
			rn.maxPodGPU = max(rn.maxPodGPU, q.Value())
		}
		for _, c := range p.Spec.Containers[1:] {
			if q, ok := c.Resources.Requests[corev1.ResourceName(v1alpha1.ResourceGPU)]; ok {
				rn.maxPodGPU = max(rn.maxPodGPU, q.Value())
			}
		}
		if err := snap.UpsertStandIn(p); err != nil {
			log.Error(err, "Peak pod not taken into the snapshot", "pod", p.Name)
			continue
		}
		k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		rn.pods = append(rn.pods, k)
		r.pods[k] = rn
	}
	r.runs[key] = rn
	log.V(1).Info("Holding a run until its peak fits", "queue", queue, "peak", prof.Peak.String(), "pods", len(rn.pods))
	r.event(key, corev1.EventTypeNormal, v1alpha1.EventRunHeld, "Hold",
		fmt.Sprintf("The run is held until its peak of %s fits queue %s", prof.Peak, queue))
}

// peakPods are the pods that stand for a run's GPU peak in the snapshot: copies of the pods of
// Profile.PeakGPUPods as the webhook would admit them (queue, gang, kind, priority), named
// v1alpha1.RunPodName, in one gang (v1alpha1.RunGangName) whose minimum is all of them.
func (r *Runs) peakPods(wf *unstructured.Unstructured, prof *pipelinerun.Profile, queue string) []*corev1.Pod {
	return r.standInPods(wf, prof, prof.PeakGPUPods, queue, v1alpha1.RunGangName(wf.GetName()),
		func(i int) string { return v1alpha1.RunPodName(wf.GetName(), i) })
}

// standInPods are copies of the set's pods as the webhook would admit them, named name(i), in
// one gang whose minimum is all of them, as old as the run.
func (r *Runs) standInPods(wf *unstructured.Unstructured, prof *pipelinerun.Profile, set []pipelinerun.PodCount, queue string,
	gang string, name func(int) string) []*corev1.Pod {
	var n int64
	for _, pc := range set {
		n += pc.Count
	}
	out := make([]*corev1.Pod, 0, n)
	for _, pc := range set {
		step := prof.Steps[pc.Step]
		for range pc.Count {
			p := step.Pod.DeepCopy()
			i := len(out)
			p.Name, p.Namespace = name(i), wf.GetNamespace()
			p.UID = types.UID(string(wf.GetUID()) + "-" + p.Name)
			p.CreationTimestamp = wf.GetCreationTimestamp()
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Labels[v1alpha1.QueueLabel] = queue
			p.Annotations[v1alpha1.PodGroupAnnotation] = gang
			v1alpha1.SetMinMember(p.Annotations, int32(n))
			p.Annotations[v1alpha1.WorkloadKindAnnotation] = string(r.opts.Engine.StepKind(p))
			p.Spec.SchedulerName = v1alpha1.SchedulerName
			if p.Spec.PriorityClassName == "" {
				p.Spec.PriorityClassName = v1alpha1.PriorityClassTraining
			}
			p.Spec.Priority = r.opts.Priority(p.Spec.PriorityClassName)
			out = append(out, p)
		}
	}
	return out
}

// PodSeen tells Runs that a pod of the cluster exists (after the snapshot took it): the first
// pod of a resumed run gives back the capacity its peak held; a pod of a Staged run is recorded,
// and takes the place held for its stage.
func (r *Runs) PodSeen(snap *snapshot.Snapshot, pod *corev1.Pod, now time.Time) {
	if len(r.runs) == 0 && len(r.staged) == 0 || r.opts.Engine == nil {
		return
	}
	name := r.opts.Engine.RunOf(pod)
	if name == "" {
		return
	}
	if sr := r.staged[types.NamespacedName{Namespace: pod.Namespace, Name: name}]; sr != nil {
		r.seePod(snap, sr, pod, now)
	}
	if rn := r.runs[types.NamespacedName{Namespace: pod.Namespace, Name: name}]; rn != nil && !rn.started.IsZero() {
		rn.seen = true
	}
}

// Owns reports whether a pod of the snapshot stands for a held run or a held stage (no such
// pod exists).
func (r *Runs) Owns(pod types.NamespacedName) bool {
	if _, ok := r.pods[pod]; ok {
		return true
	}
	_, ok := r.stagePods[pod]
	return ok
}

// Decided acts on a cycle's result, which it only reads (the loop drops the bindings of the pods
// Owns names before it calls Decided): it resumes the runs whose peak the engine placed, writes
// why the others wait, and lets runs that can never fit run pod by pod.
func (r *Runs) Decided(snap *snapshot.Snapshot, res *engine.Result, now time.Time) {
	if len(r.runs) == 0 && len(r.staged) == 0 && len(r.unheld) == 0 {
		return
	}
	defer r.settleUnheld(snap, now)
	for _, sr := range r.staged {
		if why := queueProblem(snap, sr.key.Namespace, sr.queue, v1alpha1.RunStaged); why != "" {
			r.forgetStaged(snap, sr)
			r.releaseUnavailable(sr.key, why, true, now)
		}
	}
	if len(r.staged) > 0 {
		r.decideStaged(snap, res, now)
	}
	var reasons map[snapshot.GangKey]*engine.GangReason
	var capacity *clusterGPUs
	for _, rn := range r.runs {
		if !rn.started.IsZero() {
			if rn.seen || now.Sub(rn.started) >= r.opts.StartGrace {
				r.release(snap, rn)
			}
			continue
		}
		// Before placed: a peak the engine placed under a queue that lost Peak is not a
		// run admitted whole.
		if why := queueProblem(snap, rn.key.Namespace, rn.queue, v1alpha1.RunHeld); why != "" {
			r.releaseUnavailable(rn.key, why, false, now)
			r.release(snap, rn)
			continue
		}
		if placed(snap, rn) {
			rn.started = now
			nodes := r.nodesOf(snap, rn)
			msg := fmt.Sprintf("its peak of %s fits queue %s (on %s)", rn.peak, rn.queue, nodes)
			r.enqueue(rn.key, write{state: v1alpha1.RunAdmitted, reason: string(v1alpha1.RunPeakFits), message: msg, resume: true, at: now})
			r.event(rn.key, corev1.EventTypeNormal, v1alpha1.EventRunStarted, "Start", "The run starts: "+msg)
			r.opts.Log.V(1).Info("Starting a held run: its peak fits", "workflow", rn.key.String(), "queue", rn.queue, "nodes", nodes)
			continue
		}
		if capacity == nil {
			capacity = gpusOf(snap)
		}
		if why := neverFits(snap, rn.queue, rn.peak.GPUMilli, rn.maxPodGPU, capacity, now.Sub(rn.heldSince) >= r.opts.NeverFitsAfter); why != "" {
			r.enqueue(rn.key, write{state: v1alpha1.RunPerPod, reason: string(v1alpha1.RunNeverFits), message: why, resume: true, at: now})
			r.event(rn.key, corev1.EventTypeWarning, v1alpha1.EventRunPerPod, "Start", "The run starts pod by pod: "+why)
			r.opts.Log.V(1).Info("A held run can never fit; it runs pod by pod", "workflow", rn.key.String(), "why", why)
			r.release(snap, rn)
			continue
		}
		if reasons == nil {
			reasons = make(map[snapshot.GangKey]*engine.GangReason, len(r.runs))
			for i := range res.Unschedulable {
				if g := &res.Unschedulable[i]; g.Gang.PodGroup {
					reasons[g.Gang] = g
				}
			}
		}
		g := reasons[rn.gang]
		if g == nil {
			continue
		}
		code, msg := string(g.Code), g.Message
		// A new code is written at once; a new message of the same code at most every 30s
		// (messages count pods and nodes, which change with every cycle).
		if code != rn.reason || (msg != rn.message && now.Sub(rn.writtenAt) >= 30*time.Second) {
			if code != rn.reason {
				r.event(rn.key, corev1.EventTypeNormal, v1alpha1.EventRunHeld, "Hold", fmt.Sprintf("The run waits for its peak of %s: %s: %s", rn.peak, code, msg))
			}
			rn.reason, rn.message, rn.writtenAt = code, msg, now
			r.enqueue(rn.key, write{state: v1alpha1.RunHeld, reason: code, message: msg, at: now})
		}
	}
}

// settleUnheld releases the runs marked held that their queue cannot hold, and holds those whose
// queue can now (its change came after the run's in the same cycle).
func (r *Runs) settleUnheld(snap *snapshot.Snapshot, now time.Time) {
	for key := range r.unheld {
		delete(r.unheld, key)
		wf := r.get(key)
		if !heldByFairway(wf) || r.runs[key] != nil {
			continue
		}
		if why := queueProblem(snap, key.Namespace, v1alpha1.RunAdmissionOf(wf.GetAnnotations()).Queue, v1alpha1.RunHeld); why != "" {
			r.releaseUnavailable(key, why, false, now)
			continue
		}
		r.hold(snap, wf, now)
	}
}

func placed(snap *snapshot.Snapshot, rn *run) bool {
	if len(rn.pods) == 0 {
		return false
	}
	for _, k := range rn.pods {
		if t := snap.Task(k); t == nil || t.NodeName == "" {
			return false
		}
	}
	return true
}

func (r *Runs) nodesOf(snap *snapshot.Snapshot, rn *run) string {
	var nodes []string
	for _, k := range rn.pods {
		if t := snap.Task(k); t != nil && !slices.Contains(nodes, t.NodeName) {
			nodes = append(nodes, t.NodeName)
		}
	}
	slices.Sort(nodes)
	b, _ := json.Marshal(nodes)
	return string(b)
}

// clusterGPUs is what the snapshot's nodes have.
type clusterGPUs struct {
	total, largest int64
}

func gpusOf(snap *snapshot.Snapshot) *clusterGPUs {
	c := &clusterGPUs{}
	for _, n := range snap.Nodes() {
		if n == nil {
			continue
		}
		g := int64(len(n.Slots))
		c.total += g
		c.largest = max(c.largest, g)
	}
	return c
}

// neverFits says why GPUs asked by a run in queue can never fit, "" when they may: peak above
// the queue's (or an ancestor's) limit, or, once the cluster has been given time (nodes may
// still be joining), above all its GPUs or a pod above its largest node.
func neverFits(snap *snapshot.Snapshot, queue string, peak, maxPodGPU int64, c *clusterGPUs, cluster bool) string {
	for q := snap.Queue(queue); q != nil; q = q.Parent {
		if l := q.Limit.At(snapshot.DimGPU); l != snapshot.NoLimit && peak > l {
			return fmt.Sprintf("its peak of %s is above queue %s's limit of %s", gpurequest.FormatGPUs(peak), q.Name, gpurequest.FormatGPUs(l))
		}
	}
	if !cluster {
		return ""
	}
	if peak > c.total*1000 {
		return fmt.Sprintf("its peak of %s is above the %s of the cluster's nodes", gpurequest.FormatGPUs(peak), gpurequest.FormatGPUs(c.total*1000))
	}
	if maxPodGPU > c.largest {
		return fmt.Sprintf("one of its steps asks for %s, and no node has more than %d", gpurequest.FormatGPUs(maxPodGPU*1000), c.largest)
	}
	return ""
}

// release takes the run's pods out of the snapshot and forgets it.
func (r *Runs) release(snap *snapshot.Snapshot, rn *run) {
	for _, k := range rn.pods {
		snap.DeletePod(k)
		delete(r.pods, k)
	}
	delete(r.runs, rn.key)
}

// perPod lets a run the runtime will not hold run pod by pod.
func (r *Runs) perPod(key types.NamespacedName, reason v1alpha1.RunAdmissionReason, msg string, now time.Time) {
	r.enqueue(key, write{state: v1alpha1.RunPerPod, reason: string(reason), message: msg, resume: true, at: now})
	r.event(key, corev1.EventTypeWarning, v1alpha1.EventRunPerPod, "Start", "The run starts pod by pod: "+msg)
}

func (r *Runs) event(key types.NamespacedName, typ, reason, action, note string) {
	if r.opts.Events == nil {
		return
	}
	if wf := r.get(key); wf != nil {
		r.opts.Events.Eventf(wf, nil, typ, reason, action, "%s", note)
	}
}

// ---- The writers -----------------------------------------------------------------------------

func (r *Runs) enqueue(key types.NamespacedName, w write) {
	r.mu.Lock()
	prev, had := r.pending[key]
	if had && prev.resume && !w.resume {
		w.resume = true // a resume is never dropped by a later note
	}
	r.pending[key] = w
	r.mu.Unlock()
	r.writes.Add(key)
}

func (r *Runs) processNext(ctx context.Context) bool {
	key, quit := r.writes.Get()
	if quit {
		return false
	}
	defer r.writes.Done(key)
	r.mu.Lock()
	w, ok := r.pending[key]
	delete(r.pending, key)
	r.mu.Unlock()
	if !ok {
		return true
	}
	if err := r.write(ctx, key, w); err != nil {
		if ctx.Err() == nil {
			r.opts.Log.Error(err, "Writing a run's admission", "workflow", key.String())
		}
		r.mu.Lock()
		if _, newer := r.pending[key]; !newer {
			r.pending[key] = w
		}
		r.mu.Unlock()
		r.writes.AddRateLimited(key)
		return true
	}
	r.writes.Forget(key)
	return true
}

// write patches the run's annotations and, to start it, clears spec.suspend. A run that is no
// longer held by fairway (its user resumed or deleted it) is left alone, and so is a Staged run
// that is no longer Staged.
func (r *Runs) write(ctx context.Context, key types.NamespacedName, w write) error {
	if wf := r.get(key); w.staged || w.state == v1alpha1.RunStaged {
		if !isStaged(wf) || w.resume {
			return nil
		}
	} else if !heldByFairway(wf) {
		return nil
	}
	r.mu.Lock()
	gvr := r.gvr
	r.mu.Unlock()
	ann := map[string]any{}
	for k, v := range (v1alpha1.RunAdmission{State: w.state, Reason: w.reason, Message: w.message, Time: w.at}).Annotations() {
		ann[k] = v
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": ann}}
	if w.resume {
		patch["spec"] = map[string]any{"suspend": nil}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = r.dyn.Resource(gvr).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "fairway-scheduler"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
