package runtime

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/runtime/status"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// loop is the one goroutine that owns the snapshot. Each cycle it:
//
//  1. applies what changed since the last cycle (informer events coalesced per object, and
//     the workers' failures) to the snapshot;
//  2. runs the engine;
//  3. hands bindings to the binder and evictions to the evictor (neither blocks);
//  4. asks for the release of reservations whose fractional pods are all gone, and for the
//     deletion of fairway's pods left on deleted nodes;
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

	// reservations are the reservation pods in fairway's namespace, by name.
	reservations map[string]reservation
	releasing    map[types.UID]time.Time
	// goneNodes are nodes deleted while fairway's pods were bound to them, and since when.
	goneNodes map[string]time.Time
	mpsCache  map[string]mpsEntry

	// budgetBackoff spaces the engine's attempts on a PodDisruptionBudget that refused an
	// eviction, per budget.
	budgetBackoff *flowcontrol.Backoff

	lastSweep time.Time
	lastState time.Time
	built     atomic.Bool
}

type reservation struct {
	uid         types.UID
	slot        gpushare.SlotKey
	terminating bool
}

type mpsEntry struct {
	annotation string
	mps        bool
}

// Backoff of a PodDisruptionBudget that refused evictions (see blockBudgets): the disruption
// controller updates a budget within seconds of a pod turning ready, and a gang should not
// wait much longer than that.
const (
	budgetBackoffInitial = 5 * time.Second
	budgetBackoffMax     = 2 * time.Minute
)

func newLoop(rt *Runtime, api kubernetes.Interface) *loop {
	return &loop{rt: rt, opts: rt.opts, log: rt.opts.Log.WithName("loop"), api: api}
}

// NeedLeaderElection is true: only the leader schedules.
func (l *loop) NeedLeaderElection() bool { return true }

// Start builds the snapshot from the informer caches and runs cycles until ctx ends.
func (l *loop) Start(ctx context.Context) error {
	for !l.rt.inf.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.rt.metrics.Leader.Set(1)
	defer l.rt.metrics.Leader.Set(0)
	l.rebuild()
	l.built.Store(true)

	period := time.NewTicker(l.opts.CyclePeriod)
	defer period.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		l.cycle(ctx)
		last := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-period.C:
		case <-l.rt.queue.Wake():
			// A change after a quiet spell is acted on at once; during a burst (the last cycle
			// ended moments ago) the cycle waits the debounce to take more of it.
			if time.Since(last) >= 4*l.opts.Debounce {
				continue
			}
			debounce.Reset(l.opts.Debounce)
			select {
			case <-ctx.Done():
				return nil
			case <-debounce.C:
			}
		}
	}
}

// rebuild makes a new snapshot from the informer caches: what a newly elected leader, or a
// restarted scheduler, starts from.
func (l *loop) rebuild() {
	begin := time.Now()
	l.snap = snapshot.New()
	l.eng = engine.New(l.opts.Engine)
	l.reservations = map[string]reservation{}
	l.releasing = map[types.UID]time.Time{}
	l.goneNodes = map[string]time.Time{}
	l.mpsCache = map[string]mpsEntry{}
	l.budgetBackoff = flowcontrol.NewBackOff(budgetBackoffInitial, budgetBackoffMax)
	// Everything is applied now; events queued so far are applied again at the first cycle,
	// which costs a comparison each.
	for _, k := range l.rt.inf.AllKeys() {
		l.apply(k)
	}
	// Pods bound to nodes that no longer exist were left by a deleted node.
	for _, o := range l.rt.inf.Pods.GetStore().List() {
		if p := o.(*corev1.Pod); p.Spec.NodeName != "" && l.rt.inf.Node(p.Spec.NodeName) == nil {
			if _, ok := l.goneNodes[p.Spec.NodeName]; !ok {
				l.goneNodes[p.Spec.NodeName] = begin
			}
		}
	}
	l.log.Info("Snapshot built from the caches", "nodes", l.snap.NodeCount(), "pods", l.snap.TaskCount(),
		"queues", len(l.snap.Queues()), "reservations", len(l.reservations), "took", time.Since(begin).Round(time.Millisecond))
}

func (l *loop) cycle(ctx context.Context) {
	begin := time.Now()
	// 1. Apply changes and outcomes.
	l.keys, l.outcomes = l.rt.queue.Drain(l.keys, l.outcomes)
	for _, o := range l.outcomes {
		l.applyOutcome(o)
	}
	for _, k := range l.keys {
		l.apply(k)
	}
	applied := time.Since(begin)
	// 2. Schedule.
	now := time.Now()
	res := l.eng.Schedule(l.snap, now)
	// 3. Hand out decisions.
	l.dispatch(&res)
	// 4. Housekeeping: reservations and pods of deleted nodes.
	l.releaseReservations(now)
	if now.Sub(l.lastSweep) >= time.Second {
		l.lastSweep = now
		l.sweepGoneNodes(ctx, now)
	}
	// 5. Status and metrics.
	l.rt.status.Publish(status.NewReport(&res, l.snap))
	if now.Sub(l.lastState) >= time.Second || len(res.Bindings)+len(res.Evictions) > 0 {
		l.lastState = now
		l.rt.metrics.SetState(l.metricsState(&res))
	}
	took := time.Since(begin)
	l.rt.metrics.CycleDuration.Observe(took.Seconds())
	if v := l.log.V(2); v.Enabled() && (len(l.keys) > 0 || len(res.Bindings)+len(res.Evictions) > 0) {
		v.Info("Cycle", "changes", len(l.keys), "outcomes", len(l.outcomes), "bindings", len(res.Bindings),
			"nominations", len(res.Nominations), "evictions", len(res.Evictions), "waiting", len(res.Unschedulable),
			"apply", applied.Round(time.Microsecond), "took", took.Round(time.Microsecond))
	}
}

func (l *loop) applyOutcome(o cache.Outcome) {
	t := l.snap.Task(o.Pod)
	if t == nil || (o.UID != "" && t.UID != o.UID) {
		return
	}
	switch o.Kind {
	case cache.BindFailed:
		_ = l.snap.Forget(o.Pod) // not assumed any more: the informer has the truth already
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
	now := time.Now()
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
		p := inf.Pod(k.Namespace, k.Name)
		if k.Namespace == l.opts.Namespace {
			l.trackReservation(k.Name, p)
		}
		if p == nil {
			l.snap.DeletePod(k.NamespacedName())
			return
		}
		if err := l.snap.UpsertPod(cache.WithVolumeConstraints(p, inf)); err != nil {
			l.log.V(1).Info("Pod not taken into the snapshot", "pod", klog.KObj(p), "err", err.Error())
			return
		}
		l.applyPodBudgets(k.NamespacedName(), p)
	case cache.KindNode:
		n := inf.Node(k.Name)
		if n == nil {
			l.snap.DeleteNode(k.Name)
			if len(inf.PodsByIndex(cache.IndexNode, k.Name)) > 0 {
				if _, ok := l.goneNodes[k.Name]; !ok {
					l.goneNodes[k.Name] = time.Now()
				}
			}
			return
		}
		delete(l.goneNodes, k.Name)
		if err := l.snap.UpsertNode(n); err != nil {
			l.log.V(1).Info("Node taken with a problem", "node", k.Name, "err", err.Error())
		}
	case cache.KindQueue:
		if q := inf.Queue(k.Name); q != nil {
			if err := l.snap.UpsertQueue(q); err != nil {
				l.log.Error(err, "Queue not taken into the snapshot", "queue", k.Name)
			}
		} else {
			l.snap.DeleteQueue(k.Name)
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
	case cache.KindVolume:
		if pv := inf.Volume(k.Name); pv != nil && pv.Spec.ClaimRef != nil {
			l.apply(cache.Key{Kind: cache.KindClaim, Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name})
		}
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

// trackReservation records (or forgets) a reservation pod of fairway's namespace.
func (l *loop) trackReservation(name string, p *corev1.Pod) {
	if p == nil || p.Labels[v1alpha1.ReservationLabel] != "true" {
		delete(l.reservations, name)
		return
	}
	slot := -1
	if v, ok := p.Annotations[snapshot.ReservationSlotAnnotation]; ok {
		if i, err := strconv.Atoi(v); err == nil && i >= 0 {
			slot = i
		}
	}
	l.reservations[name] = reservation{uid: p.UID, slot: gpushare.SlotKey{Node: p.Spec.NodeName, Slot: slot}, terminating: p.DeletionTimestamp != nil}
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
				r.GPUConfigMap = p.Annotations[v1alpha1.GPUConfigMapAnnotation]
			}
			if b.Shared != nil {
				r.MPS = l.nodeMPS(b.Node)
			}
			reqs = append(reqs, r)
		}
		l.rt.binder.Submit(reqs...)
	}
	if len(res.Evictions) > 0 {
		reqs := make([]evictor.Request, 0, len(res.Evictions))
		for _, e := range res.Evictions {
			t := l.snap.Task(e.Pod)
			if t == nil {
				continue
			}
			r := evictor.Request{Eviction: e, UID: t.UID, FromEngine: true, Framework: frameworkOf(inf.Pod(e.Pod.Namespace, e.Pod.Name))}
			for _, b := range t.Budgets {
				if !b.Gone() {
					r.Budgets = append(r.Budgets, b.Key)
				}
			}
			if e.Reason == engine.EvictLoanReturn {
				r.WokeAt = lenderWokeAt(t)
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

// nodeMPS reports whether the node's gpu-agent runs MPS (its inventory says so).
func (l *loop) nodeMPS(node string) bool {
	n := l.rt.inf.Node(node)
	if n == nil {
		return false
	}
	ann := n.Annotations[v1alpha1.GPUInventoryAnnotation]
	if e, ok := l.mpsCache[node]; ok && e.annotation == ann {
		return e.mps
	}
	var inv v1alpha1.GPUInventory
	mps := json.Unmarshal([]byte(ann), &inv) == nil && inv.MPS
	l.mpsCache[node] = mpsEntry{annotation: ann, mps: mps}
	return mps
}

// releaseReservations asks for the deletion of reservations that hold a slot no fractional pod
// uses any more (bound, assumed or leaving), and of reservations on nodes that are gone. The
// manager refuses a release that an Acquire overtook.
func (l *loop) releaseReservations(now time.Time) {
	for name, r := range l.reservations {
		if r.terminating {
			continue
		}
		n := l.snap.Node(r.slot.Node)
		if n != nil && r.slot.Slot >= 0 {
			if s := n.Slot(r.slot.Slot); s != nil && (s.Sharers > 0 || s.Loans > 0) {
				continue
			}
		}
		if at, ok := l.releasing[r.uid]; ok && now.Sub(at) < 5*time.Second {
			continue
		}
		l.releasing[r.uid] = now
		if v := l.log.V(2); v.Enabled() {
			var st any
			if n != nil && r.slot.Slot >= 0 {
				if s := n.Slot(r.slot.Slot); s != nil {
					st = *s
				}
			}
			v.Info("Releasing a GPU reservation", "node", r.slot.Node, "slot", r.slot.Slot, "uid", r.uid, "nodeKnown", n != nil, "gpu", st)
		}
		l.rt.gpu.RequestRelease(r.slot, name, r.uid, l.rt.gpu.Generation(r.slot))
	}
	for uid, at := range l.releasing {
		if now.Sub(at) > time.Minute {
			delete(l.releasing, uid)
		}
	}
}

// sweepGoneNodes deletes fairway's pods that were left on a deleted node for longer than the
// grace period, after confirming with the API server that the node is gone. Their gangs then
// run below their minimum (and are evicted whole by the engine after its grace period) or wait,
// and their owners re-create them.
func (l *loop) sweepGoneNodes(ctx context.Context, now time.Time) {
	for node, since := range l.goneNodes {
		if now.Sub(since) < l.opts.OrphanGrace {
			continue
		}
		pods := l.rt.inf.PodsByIndex(cache.IndexNode, node)
		if len(pods) == 0 {
			delete(l.goneNodes, node)
			continue
		}
		var reqs []evictor.Request
		for _, p := range pods {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			reqs = append(reqs, evictor.Request{
				Eviction: engine.Eviction{Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, Node: node,
					Reason: evictor.ReasonNodeDeleted, Message: "node " + node + " was deleted"},
				UID: p.UID, Queue: p.Labels[v1alpha1.QueueLabel], Framework: frameworkOf(p),
			})
		}
		if len(reqs) == 0 {
			continue
		}
		// Look again in a few seconds if pods are still there then.
		l.goneNodes[node] = now.Add(5*time.Second - l.opts.OrphanGrace)
		go func() {
			// Off the loop: one read to be sure the node is gone, not just missing from a cache.
			if _, err := l.api.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				l.log.Info("Deleting fairway's pods left on a deleted node", "node", node, "pods", len(reqs))
				l.rt.evictor.Submit(reqs...)
			}
		}()
	}
}
