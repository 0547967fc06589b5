package runtime

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/scheduler/runtime/status"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

// loop is the one goroutine that owns the snapshot. Each cycle it:
//
//  1. applies what changed since the last cycle (informer events coalesced per object, and
//     the workers' failures) to the snapshot;
//  2. runs the engine;
//  3. hands bindings to the binder and evictions to the evictor (neither blocks);
//  4. runs its side jobs: asks for the release of reservations whose fractional pods are all
//     gone (reservations.go), and for the deletion of fairway's pods left on deleted nodes
//     (orphans.go);
//  5. publishes the engine's report to the status writer and the metrics.
//
// Cycles run on a period and after relevant events (with a short debounce), one at a time.
type loop struct {
	rt   *Runtime
	opts Options
	log  logr.Logger
	api  kubernetes.Interface

	snap *snapshot.Snapshot
	eng  *engine.Engine

	keys     []cache.Key
	outcomes []cache.Outcome

	// clock times the cycles, the debounce and the side jobs' grace periods (Options.Clock).
	clock clock.WithTicker

	// The side jobs, each its own type: reservation pods to release and pods left on deleted
	// nodes.
	resv    *reservations
	orphans *orphans
	// rejects are the kubelet's rejections of fairway's pods and what they correct on their
	// nodes (see rejections).
	rejects *rejections
	expired []string
	// holdTaints are the nodes tainted, or to taint, for gangs that hold capacity there.
	holdTaints *holdTaints

	// hist is the queues' usage history (nil with fair share over time off); usageStatus is
	// what was last taken of it for the Queues' status, at usageSynced.
	hist        *usage.History
	usageStatus map[string]*v1alpha1.QueueUsage
	usageSynced time.Time

	// budgetBackoff spaces the engine's attempts on a PodDisruptionBudget that refused an
	// eviction, per budget.
	budgetBackoff *flowcontrol.Backoff
	// lastState is when the state metrics were last taken; pendingState the result of a later
	// cycle that decided something, whose state stateTimer takes when the gap since lastState
	// ends (see takeState).
	lastState    time.Time
	pendingState *engine.Result
	stateTimer   clock.Timer
	built        atomic.Bool
	// cycles counts the cycles run, for tests that step a fake clock.
	cycles atomic.Int64
	// swaps writes the engine's swap requests for the gpu-agents.
	swaps *swapAsker
}

// Backoff of a PodDisruptionBudget that refused evictions (see blockBudgets): the disruption
// controller updates a budget within seconds of a pod turning ready, and a gang should not
// wait much longer than that.
const (
	budgetBackoffInitial = 5 * time.Second
	budgetBackoffMax     = 2 * time.Minute
)

func newLoop(rt *Runtime, api kubernetes.Interface) *loop {
	return &loop{rt: rt, opts: rt.opts, log: rt.opts.Log.WithName("loop"), api: api, clock: rt.opts.Clock, swaps: newSwapAsker(api, rt.metrics.SwapRequests)}
}

// NeedLeaderElection is true: only the leader schedules.
func (l *loop) NeedLeaderElection() bool { return true }

// Start builds the snapshot from the informer caches and runs cycles until ctx ends.
func (l *loop) Start(ctx context.Context) error {
	// The informers' progress is real time, whatever the loop's clock.
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return l.rt.inf.Synced(), nil
	}); err != nil {
		return nil // stopped before the caches synced
	}
	l.rt.metrics.Leader.Set(1)
	defer l.rt.metrics.Leader.Set(0)
	l.rebuild()
	l.built.Store(true)

	period := l.clock.NewTicker(l.opts.CyclePeriod)
	defer period.Stop()
	debounce := l.clock.NewTimer(time.Hour)
	debounce.Stop()
	l.stateTimer = l.clock.NewTimer(time.Hour)
	l.stateTimer.Stop()
	defer l.stateTimer.Stop()
	for {
		l.cycle(ctx)
		if !l.waitForCycle(ctx, period, debounce) {
			return nil
		}
	}
}

// waitForCycle waits until the next cycle is due (false: ctx ended), taking the state metrics
// meanwhile when their timer says so.
func (l *loop) waitForCycle(ctx context.Context, period clock.Ticker, debounce clock.Timer) bool {
	last := l.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-period.C():
			return true
		case <-l.stateTimer.C():
			l.takePendingState()
		case <-l.rt.queue.Wake():
			// A change after a quiet spell is acted on at once; during a burst (the last cycle
			// ended moments ago) the cycle waits the debounce to take more of it.
			if l.clock.Since(last) >= 4*l.opts.Debounce {
				return true
			}
			debounce.Reset(l.opts.Debounce)
			select {
			case <-ctx.Done():
				return false
			case <-debounce.C():
				return true
			}
		}
	}
}

// rebuild makes a new snapshot from the informer caches: what a newly elected leader, or a
// restarted scheduler, starts from.
func (l *loop) rebuild() {
	begin := l.clock.Now()
	keys := l.rt.inf.AllKeys()
	var nodes, pods int
	for _, k := range keys {
		switch k.Kind {
		case cache.KindNode:
			nodes++
		case cache.KindPod:
			pods++
		}
	}
	l.snap = snapshot.NewSized(nodes, pods)
	l.snap.SetOwnNamespace(l.opts.Namespace)
	l.snap.SetAdmissionKey(l.opts.AdmissionKey)
	l.eng = engine.New(l.opts.Engine)
	l.resv = newReservations(l.rt.gpu, l.log)
	l.orphans = newOrphans(l.rt.inf, l.api, l.rt.evictor, l.opts.OrphanGrace, l.log)
	l.rejects = newRejections()
	l.holdTaints = newHoldTaints(l.rt.holdTaint)
	l.holdTaints.off = l.opts.NoHoldTaints
	l.budgetBackoff = flowcontrol.NewBackOff(budgetBackoffInitial, budgetBackoffMax)
	// Everything is applied now; events queued so far are applied again at the first cycle,
	// which costs a comparison each. Pods the kubelet rejected before are not replayed: nothing
	// says how long ago, and their nodes may have changed since.
	l.rejects.quiet = true
	for _, k := range keys {
		l.apply(k)
	}
	l.rejects.quiet = false
	if l.rt.ext != nil {
		l.rt.ext.Rebuild(l.snap, begin)
	}
	l.restoreUsage(begin)
	// Pods bound to nodes that no longer exist were left by a deleted node.
	for _, o := range l.rt.inf.Pods.GetStore().List() {
		if p := o.(*corev1.Pod); p.Spec.NodeName != "" && l.rt.inf.Node(p.Spec.NodeName) == nil {
			l.orphans.nodeGone(p.Spec.NodeName, begin)
		}
	}
	l.log.Info("Snapshot built from the caches", "nodes", l.snap.NodeCount(), "pods", l.snap.TaskCount(),
		"queues", len(l.snap.Queues()), "reservations", len(l.resv.byName), "took", l.clock.Since(begin).Round(time.Millisecond))
}

func (l *loop) cycle(ctx context.Context) {
	defer l.cycles.Add(1)
	begin := l.clock.Now()
	// 1. Apply changes and outcomes.
	l.keys, l.outcomes = l.rt.queue.Drain(l.keys, l.outcomes)
	for _, o := range l.outcomes {
		l.applyOutcome(o)
	}
	for _, k := range l.keys {
		l.apply(k)
	}
	l.expired = l.rejects.expired(begin, l.expired[:0])
	for _, name := range l.expired {
		l.apply(cache.Key{Kind: cache.KindNode, Name: name}) // a kubelet-rejection backoff ended
	}
	applied := l.clock.Since(begin)
	// 2. Schedule, with what the queues used lately; then remember what they hold now.
	now := l.clock.Now()
	l.hist.Advance(now)
	l.hist.Apply(l.snap)
	res := l.eng.Schedule(l.snap, now)
	if ext := l.rt.ext; ext != nil {
		// Held pipeline runs: the peaks the engine placed start their runs rather than bind.
		// Its stand-ins' bindings go first: Decided may release the stand-ins it started.
		res.Bindings = slices.DeleteFunc(res.Bindings, func(b engine.Binding) bool { return ext.Owns(b.Pod) })
		ext.Decided(l.snap, &res, now)
	}
	if l.hist != nil {
		l.hist.Record(l.snap, res.Capacity)
		l.syncUsage(now)
	}
	// 3. Hand out decisions; put the hold taint on the nodes held for gangs.
	l.dispatch(&res)
	l.askSwaps(ctx, res.SwapRequests)
	l.holdTaints.update(&res, l.snap)
	// 4. Housekeeping: reservations and pods of deleted nodes.
	l.resv.release(l.snap, now)
	l.orphans.sweep(ctx, now)
	// 5. Status and metrics.
	report := status.NewReport(&res, l.snap)
	report.Usage = l.usageStatus
	l.rt.status.Publish(report)
	l.takeState(&res, now)
	took := l.clock.Since(begin)
	l.rt.metrics.CycleDuration.Observe(took.Seconds())
	if v := l.log.V(2); v.Enabled() && (len(l.keys) > 0 || len(res.Bindings)+len(res.Evictions) > 0) {
		v.Info("Cycle", "changes", len(l.keys), "outcomes", len(l.outcomes), "bindings", len(res.Bindings),
			"nominations", len(res.Nominations), "evictions", len(res.Evictions), "waiting", len(res.Unschedulable),
			"apply", applied.Round(time.Microsecond), "took", took.Round(time.Microsecond))
	}
}

// stateGap is the shortest time between two takings of the state metrics after cycles that
// decided something. Taking them walks every queue, node and pod of the snapshot; during a burst
// a cycle binds a few pods every few tens of milliseconds, and taking them after each such cycle
// was a third of the loop's CPU (issue 41). A Prometheus scrape every 15 s or more sees no
// difference.
const stateGap = 250 * time.Millisecond

// takeState takes the state metrics after the cycle at now when a second has passed since they
// were last taken, or when the cycle decided something and stateGap has passed. A cycle that
// decided something within the gap leaves its result to the state timer, which takes it when
// the gap ends unless a later cycle took the state first: the state after the last decisions is
// always published, at most stateGap late.
func (l *loop) takeState(res *engine.Result, now time.Time) {
	since := now.Sub(l.lastState)
	decided := len(res.Bindings)+len(res.Evictions) > 0
	switch {
	case since >= time.Second || ((decided || l.pendingState != nil) && since >= stateGap):
		l.pendingState = nil
		l.lastState = now
		l.rt.metrics.SetState(l.metricsState(res))
	case decided || l.pendingState != nil:
		if l.pendingState == nil && l.stateTimer != nil {
			l.stateTimer.Reset(stateGap - since)
		}
		l.pendingState = res
	}
}

// takePendingState takes the state metrics of the last cycle when the state timer fires. The
// snapshot is as that cycle left it: only cycles change it, on this goroutine.
func (l *loop) takePendingState() {
	if l.pendingState == nil {
		return // a cycle took the state since the timer was set
	}
	res := l.pendingState
	l.pendingState = nil
	l.lastState = l.clock.Now()
	l.rt.metrics.SetState(l.metricsState(res))
}

// restoreUsage starts the usage history from what the Queues' status kept (a restarted
// scheduler, or a new leader, goes on where the last one wrote).
func (l *loop) restoreUsage(now time.Time) {
	l.hist, l.usageStatus, l.usageSynced = usage.New(l.opts.UsageHalfLife), nil, time.Time{}
	if l.hist == nil {
		return
	}
	restored := 0
	for _, o := range l.rt.inf.Queues.GetStore().List() {
		q := o.(*v1alpha1.Queue)
		if t, ok := usage.FromStatus(q.Status.Usage); ok {
			l.hist.Restore(q.Name, t, now)
			restored++
		}
	}
	l.log.Info("Usage history restored from Queue status", "queues", restored, "halfLife", l.opts.UsageHalfLife)
}

// syncUsage takes the history for the Queues' status every UsageSyncPeriod: status writes stay
// few, and a new leader loses at most that much of it.
func (l *loop) syncUsage(now time.Time) {
	if l.usageStatus != nil && now.Sub(l.usageSynced) < l.opts.UsageSyncPeriod {
		return
	}
	l.usageSynced = now
	m := make(map[string]*v1alpha1.QueueUsage, len(l.snap.Queues()))
	for _, q := range l.snap.Queues() {
		if t, ok := l.hist.Totals(q.Name); ok {
			m[q.Name] = usage.ToStatus(t, l.hist.HalfLife())
		}
	}
	l.usageStatus = m
}

func (l *loop) applyOutcome(o cache.Outcome) {
	t := l.snap.Task(o.Pod)
	if t == nil || (o.UID != "" && t.UID != o.UID) {
		return
	}
	switch o.Kind {
	case cache.BindFailed:
		_ = l.snap.Forget(o.Pod) // not assumed any more: the informer has the truth already
		// Updates were skipped while it was assumed (its claims may have a node now).
		l.apply(cache.Key{Kind: cache.KindPod, Namespace: o.Pod.Namespace, Name: o.Pod.Name})
	case cache.EvictionFailed:
		_ = l.snap.CancelEviction(o.Pod)
		l.shrinkHolds(o.Beneficiary, t)
	case cache.EvictionBlocked:
		_ = l.snap.CancelEviction(o.Pod)
		l.blockBudgets(o)
		l.shrinkHolds(o.Beneficiary, t)
	}
}

// shrinkHolds takes off the capacity held for the gang an eviction was for what the pod would
// have freed, as the eviction did not happen: kept, the hold would keep other gangs off the
// capacity that did free up (two gangs nominated on one node, one of them waiting for a pod
// that stays, would wait for each other).
func (l *loop) shrinkHolds(k snapshot.GangKey, victim *snapshot.Task) {
	if k.Name == "" {
		return
	}
	if g := l.snap.Gang(k); g != nil {
		l.snap.ShrinkHolds(g, victim)
	}
}

// blockBudgets backs off the PodDisruptionBudgets that refused an eviction: until the backoff
// ends, the engine takes none of their pods and the gangs that need them say they wait for the
// budget. Each refusal of a budget doubles its wait (budgetBackoffInitial up to
// budgetBackoffMax); a budget that has not refused for a while starts again from the initial
// wait.
func (l *loop) blockBudgets(o cache.Outcome) {
	var keys []types.NamespacedName
	if o.Budget.Name != "" {
		keys = append(keys, o.Budget)
	} else {
		// The snapshot did not know the budget when the engine chose the pod: read it now.
		if p := l.rt.inf.Pod(o.Pod.Namespace, o.Pod.Name); p != nil {
			for _, b := range l.rt.inf.PodBudgets(p) {
				keys = append(keys, types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
				l.snap.UpsertBudget(keys[len(keys)-1], b.Status.DisruptionsAllowed)
			}
		}
	}
	now := l.clock.Now()
	for _, k := range keys {
		id := k.String()
		l.budgetBackoff.Next(id, now)
		until := now.Add(l.budgetBackoff.Get(id))
		if err := l.snap.BlockBudget(k, until); err != nil {
			l.log.V(1).Info("PodDisruptionBudget not blocked", "budget", id, "err", err.Error())
			continue
		}
		l.log.V(2).Info("PodDisruptionBudget refused an eviction; its pods wait", "budget", id, "pod", o.Pod.String(), "until", until)
	}
}

// apply brings one object of the snapshot up to date with the caches.
func (l *loop) apply(k cache.Key) {
	inf := l.rt.inf
	switch k.Kind {
	case cache.KindPod:
		if fp := inf.PendingForeignPod(k.Namespace, k.Name); fp != nil {
			l.snap.UpsertForeignPending(k.NamespacedName(), fp.Spec.SchedulerName, cache.PendingForeignGPUs(fp))
		} else {
			l.snap.DeleteForeignPending(k.NamespacedName())
		}
		p := inf.Pod(k.Namespace, k.Name)
		if k.Namespace == l.opts.Namespace {
			l.resv.track(k.Name, p)
		}
		if p == nil {
			l.snap.DeletePod(k.NamespacedName())
			return
		}
		if err := l.snap.UpsertPod(cache.WithVolumeConstraints(p, inf)); err != nil {
			l.log.V(1).Info("Pod not taken into the snapshot", "pod", klog.KObj(p), "err", err.Error())
			return
		}
		if p.Status.Phase == corev1.PodFailed {
			l.kubeletRejected(p)
		}
		if l.rt.ext != nil {
			l.rt.ext.PodSeen(l.snap, p, l.clock.Now())
		}
		l.applyPodBudgets(k.NamespacedName(), p)
	case cache.KindNode:
		n := inf.Node(k.Name)
		l.holdTaints.observe(k.Name, n)
		if n == nil {
			l.snap.DeleteNode(k.Name)
			l.orphans.nodeGone(k.Name, l.clock.Now())
			return
		}
		l.orphans.nodeBack(k.Name)
		if err := l.snap.UpsertNode(l.rejects.adjust(n, l.clock.Now())); err != nil {
			l.log.V(1).Info("Node taken with a problem", "node", k.Name, "err", err.Error())
		}
	case cache.KindQueue:
		if q := inf.Queue(k.Name); q != nil {
			if err := l.snap.UpsertQueueSpec(l.queueSpec(q)); err != nil {
				l.log.Error(err, "Queue not taken into the snapshot", "queue", k.Name)
			}
		} else {
			l.snap.DeleteQueue(k.Name)
		}
	case cache.KindNamespace:
		// A namespace that appears, goes or changes labels changes what selectors select.
		for _, obj := range inf.Queues.GetStore().List() {
			if q := obj.(*v1alpha1.Queue); q.Spec.NamespaceSelector != nil {
				l.apply(cache.Key{Kind: cache.KindQueue, Name: q.Name})
			}
		}
	case cache.KindPodGroup:
		pg := inf.PodGroup(k.Namespace, k.Name)
		if pg == nil {
			l.snap.DeletePodGroup(k.Namespace, k.Name)
			return
		}
		spec := snapshot.GangSpecFromPodGroup(pg)
		if name := pg.Spec.PriorityClassName; name != "" {
			if pc := inf.PriorityClass(name); pc != nil {
				v := pc.Value
				spec.Priority = &v
			}
		}
		if err := l.snap.UpsertGangSpec(k.NamespacedName(), spec); err != nil {
			l.log.Error(err, "Pod group not taken into the snapshot", "podGroup", klog.KObj(pg))
		}
	case cache.KindPriorityClass:
		for _, pg := range inf.PodGroupsByClass(k.Name) {
			l.apply(cache.Key{Kind: cache.KindPodGroup, Namespace: pg.Namespace, Name: pg.Name})
		}
	case cache.KindClaim:
		for _, p := range inf.PodsByIndex(cache.IndexClaim, k.Namespace+"/"+k.Name) {
			l.apply(cache.Key{Kind: cache.KindPod, Namespace: p.Namespace, Name: p.Name})
		}
	case cache.KindBudget:
		if b := inf.Budget(k.Namespace, k.Name); b != nil {
			l.snap.UpsertBudget(k.NamespacedName(), b.Status.DisruptionsAllowed)
		} else {
			l.snap.DeleteBudget(k.NamespacedName())
		}
		// Which pods it covers may have changed (selector, disrupted pods): ask each pod again.
		for _, p := range inf.PodsInNamespace(k.Namespace) {
			if l.snap.Task(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}) != nil {
				l.applyPodBudgets(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p)
			}
		}
	case cache.KindVolume, cache.KindStorageClass:
		l.applyVolumeChange(k)
	case cache.KindWorkflow:
		if l.rt.ext != nil {
			l.rt.ext.Apply(l.snap, k.NamespacedName(), l.clock.Now())
		}
	case cache.KindDeviceClass, cache.KindResourceSlice, cache.KindResourceClaim:
		l.applyDRA(k)
	}
}

// applyPodBudgets tells the snapshot which PodDisruptionBudgets evicting the pod would use.
func (l *loop) applyPodBudgets(key types.NamespacedName, p *corev1.Pod) {
	t := l.snap.Task(key)
	if t == nil {
		return
	}
	var keys []types.NamespacedName
	for _, b := range l.rt.inf.PodBudgets(p) {
		bk := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
		l.snap.UpsertBudget(bk, b.Status.DisruptionsAllowed)
		keys = append(keys, bk)
	}
	if len(keys) == 0 && len(t.Budgets) == 0 {
		return
	}
	if err := l.snap.SetPodBudgets(key, keys); err != nil {
		l.log.V(1).Info("PodDisruptionBudgets of a pod not recorded", "pod", key.String(), "err", err.Error())
	}
}

// queueSpec is the snapshot's form of q, serving the namespaces it lists and those its
// namespaceSelector matches now (v1alpha1.NamespaceMatcher, as the webhook resolves them).
func (l *loop) queueSpec(q *v1alpha1.Queue) snapshot.QueueSpec {
	spec := snapshot.QueueSpecFromQueue(q)
	if q.Spec.NamespaceSelector == nil {
		return spec
	}
	m, err := v1alpha1.NewNamespaceMatcher(&q.Spec)
	if err != nil {
		l.log.Error(err, "Queue serves its listed namespaces only", "queue", q.Name)
		return spec
	}
	served := slices.Clone(spec.Namespaces)
	for _, ns := range l.rt.inf.NamespaceList() {
		if m.Serves(ns.Name, ns.Labels) {
			served = append(served, ns.Name)
		}
	}
	slices.Sort(served)
	spec.Namespaces = slices.Compact(served)
	return spec
}

// dispatch hands the cycle's bindings and evictions to the workers.
func (l *loop) dispatch(res *engine.Result) {
	inf := l.rt.inf
	if len(res.Bindings) > 0 {
		reqs := make([]binder.Request, 0, len(res.Bindings))
		for _, b := range res.Bindings {
			t := l.snap.Task(b.Pod)
			if t == nil {
				continue
			}
			r := binder.Request{Binding: b, UID: t.UID, Created: t.Created}
			if t.Gang != nil {
				r.Queue = t.Gang.QueueName()
			}
			if p := inf.Pod(b.Pod.Namespace, b.Pod.Name); p != nil {
				r.Framework = p.Labels[v1alpha1.FrameworkLabel]
				r.Kind = string(v1alpha1.KindOf(p))
				r.ResourceVersion = p.ResourceVersion
			}
			reqs = append(reqs, r)
		}
		l.rt.volumes.Submit(reqs...) // the pod binder gets them once their volumes are ready
	}
	if len(res.Evictions) > 0 {
		reqs := make([]evictor.Request, 0, len(res.Evictions))
		for _, e := range res.Evictions {
			t := l.snap.Task(e.Pod)
			if t == nil {
				continue
			}
			victim := inf.Pod(e.Pod.Namespace, e.Pod.Name)
			r := evictor.Request{Eviction: e, UID: t.UID, FromEngine: true, Framework: frameworkOf(victim), Kind: kindOf(victim)}
			for _, b := range t.Budgets {
				if !b.Gone() {
					r.Budgets = append(r.Budgets, b.Key)
				}
			}
			if e.Reason == engine.EvictLoanReturn {
				r.WokeAt = lenderWokeAt(t)
			} else if e.Beneficiary != nil {
				r.HoldTaint = l.holdTaints.value(res, e.Node)
			}
			if t.Gang != nil {
				r.Queue = t.Gang.QueueName()
			}
			if v := l.log.V(2); v.Enabled() {
				ben := ""
				if e.Beneficiary != nil {
					ben = e.Beneficiary.String()
				}
				v.Info("Evicting", "pod", e.Pod.String(), "reason", e.Reason, "for", ben, "node", e.Node, "grace", e.GracePeriod, "budgets", r.Budgets)
			}
			reqs = append(reqs, r)
		}
		l.rt.evictor.Submit(reqs...)
	}
	if v := l.log.V(2); v.Enabled() {
		for _, n := range res.Nominations {
			v.Info("Gang nominated on capacity being freed", "gang", n.Gang.String(), "nodes", n.Nodes, "pods", n.Pods)
		}
	}
}

// askSwaps writes the cycle's swap requests onto the idle pods that do not carry them yet.
func (l *loop) askSwaps(ctx context.Context, reqs []engine.SwapRequest) {
	if len(reqs) == 0 {
		return
	}
	current := func(k types.NamespacedName) (string, bool) {
		p := l.rt.inf.Pod(k.Namespace, k.Name)
		if p == nil {
			return "", false
		}
		return p.Annotations[v1alpha1.GPUSwapRequestAnnotation], true
	}
	l.swaps.ask(ctx, reqs, current, func(err error) { l.log.Error(err, "Swap request") })
}

// lenderWokeAt is when the gpu-agent last observed a pod sharing the GPU of loan t turn active
// (its GPUIdle condition False), as precisely as the condition says (v1alpha1.GPUIdleObserved);
// zero when none did (the GPU went back for another reason).
func lenderWokeAt(t *snapshot.Task) time.Time {
	var at time.Time
	if t.Node == nil || t.GPUs.Shared < 0 {
		return at
	}
	for _, h := range t.Node.Tasks {
		if h.GPUs.Shared != t.GPUs.Shared || h.GPUs.Loan || h.Req.Reservation || !h.Interactive || h.Idle {
			continue
		}
		if w := h.WokeAt(); w.After(at) {
			at = w
		}
	}
	return at
}
