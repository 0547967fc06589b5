package status

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Report is what one cycle decided that status shows. The loop publishes a new Report after
// every cycle and never changes a published one.
type Report struct {
	// Queues by name.
	Queues map[string]*engine.QueueStatus
	// Waiting are the gangs with pods waiting, and why.
	Waiting map[snapshot.GangKey]*engine.GangReason
	// Pending are the waiting pods of each waiting gang, as the snapshot had them after the
	// cycle (pods whose binding is in flight are not among them).
	Pending map[snapshot.GangKey][]types.NamespacedName
	// Usage is the usage history to keep in each Queue's status (status.usage), nil with fair
	// share over time off (status.usage is then cleared). A queue it does not name keeps what
	// its status has.
	Usage map[string]*v1alpha1.QueueUsage
}

// NewReport indexes a cycle's result; snap is the snapshot after the cycle.
func NewReport(res *engine.Result, snap *snapshot.Snapshot) *Report {
	r := &Report{
		Queues:  make(map[string]*engine.QueueStatus, len(res.Queues)),
		Waiting: make(map[snapshot.GangKey]*engine.GangReason, len(res.Unschedulable)),
		Pending: make(map[snapshot.GangKey][]types.NamespacedName, len(res.Unschedulable)),
	}
	for i := range res.Queues {
		r.Queues[res.Queues[i].Name] = &res.Queues[i]
	}
	for i := range res.Unschedulable {
		k := res.Unschedulable[i].Gang
		r.Waiting[k] = &res.Unschedulable[i]
		if g := snap.Gang(k); g != nil {
			keys := make([]types.NamespacedName, 0, len(g.Pending))
			for _, t := range g.Pending {
				keys = append(keys, t.Key)
			}
			r.Pending[k] = keys
		}
	}
	return r
}

// Options configure a Writer.
type Options struct {
	// Interval between two rounds of writes. 2s when 0.
	Interval time.Duration
	// MaxPodWrites bounds the pod condition writes of one round. 200 when 0.
	MaxPodWrites int
	// MinGap is the least time between two rounds when a report asks for one before the next
	// tick (a PodGroup's gang newly waiting, or waiting for another reason). 200ms when 0.
	MinGap time.Duration
	Log    logr.Logger
}

// Writer writes Queue, PodGroup and waiting pods' status at most every Interval, only what
// changed. It implements manager.Runnable (leader only).
type Writer struct {
	crd    client.Client
	core   kubernetes.Interface
	inf    *cache.Informers
	opts   Options
	latest atomic.Pointer[Report]
	// wake asks Start for a round before the next tick.
	wake chan struct{}
}

// NewWriter returns a writer that reads the caches of inf and writes through crd (Queues,
// PodGroups) and core (pods).
func NewWriter(crd client.Client, core kubernetes.Interface, inf *cache.Informers, opts Options) *Writer {
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.MaxPodWrites <= 0 {
		opts.MaxPodWrites = 200
	}
	if opts.MinGap <= 0 {
		opts.MinGap = 200 * time.Millisecond
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Writer{crd: crd, core: core, inf: inf, opts: opts, wake: make(chan struct{}, 1)}
}

// Publish hands over the latest cycle's report; it never blocks. A report that gives a PodGroup's
// gang a reason it did not have in the previous one asks for a round before the next tick, so
// that the answer to "why does my job wait" (and "it cannot be placed") reaches the PodGroup
// within a cycle of the decision rather than up to an interval later. Lone pods do not ask:
// their condition is written only once they have waited an interval anyway (writePods).
func (w *Writer) Publish(r *Report) {
	if prev := w.latest.Swap(r); newReason(prev, r) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// newReason reports whether r gives a PodGroup's gang a reason code prev did not give it.
func newReason(prev, r *Report) bool {
	for k, why := range r.Waiting {
		if !k.PodGroup {
			continue
		}
		if prev == nil {
			return true
		}
		if was, ok := prev.Waiting[k]; !ok || was.Code != why.Code {
			return true
		}
	}
	return false
}

// NeedLeaderElection is true: only the leader writes status.
func (w *Writer) NeedLeaderElection() bool { return true }

// Start writes every Interval, and when a report asks for it (Publish) at most every MinGap,
// until ctx ends.
func (w *Writer) Start(ctx context.Context) error {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.wake:
			if gap := w.opts.MinGap - time.Since(last); gap > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(gap):
				}
			}
		}
		if r := w.latest.Load(); r != nil {
			w.Write(ctx, r)
			last = time.Now()
		}
	}
}

// Write makes one round of writes from r.
func (w *Writer) Write(ctx context.Context, r *Report) {
	now := metav1.Now()
	q, pg, p := w.writeQueues(ctx, r, now), w.writePodGroups(ctx, r, now), w.writePods(ctx, r, now)
	if q+pg+p > 0 {
		w.opts.Log.V(2).Info("Status written", "queues", q, "podGroups", pg, "pods", p)
	}
}

func (w *Writer) writeQueues(ctx context.Context, r *Report, now metav1.Time) int {
	var queues []*v1alpha1.Queue
	children := map[string][]string{}
	for _, o := range w.inf.Queues.GetStore().List() {
		q := o.(*v1alpha1.Queue)
		queues = append(queues, q)
		if q.Spec.Parent != "" {
			children[q.Spec.Parent] = append(children[q.Spec.Parent], q.Name)
		}
	}
	n := 0
	for _, q := range queues {
		kids := children[q.Name]
		slices.Sort(kids)
		want := QueueStatus(&q.Status, r.Queues[q.Name], kids, now)
		if r.Usage != nil {
			want.Usage = q.Status.Usage
			if u, ok := r.Usage[q.Name]; ok {
				want.Usage = u
			}
		}
		if equality.Semantic.DeepEqual(q.Status, want) {
			continue
		}
		obj := q.DeepCopy()
		obj.Status = want
		if err := w.crd.Status().Update(ctx, obj); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				w.opts.Log.Error(err, "Writing queue status", "queue", q.Name)
			}
			continue
		}
		n++
	}
	return n
}

func (w *Writer) writePodGroups(ctx context.Context, r *Report, now metav1.Time) int {
	n := 0
	for _, o := range w.inf.PodGroups.GetStore().List() {
		pg := o.(*v1alpha1.PodGroup)
		pods := w.inf.PodsByIndex(cache.IndexPodGroup, pg.Namespace+"/"+pg.Name)
		reason := r.Waiting[snapshot.GangKey{Namespace: pg.Namespace, Name: pg.Name, PodGroup: true}]
		want := PodGroupStatus(&pg.Status, pg.Spec.MinMember, pods, reason, now)
		if equality.Semantic.DeepEqual(pg.Status, want) {
			continue
		}
		obj := pg.DeepCopy()
		obj.Status = want
		if err := w.crd.Status().Update(ctx, obj); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				w.opts.Log.Error(err, "Writing pod group status", "podGroup", klog.KObj(pg))
			}
			continue
		}
		n++
	}
	return n
}

// writePods sets PodScheduled=False with the engine's reason on pods that have waited at least
// one interval (a pod bound a moment after it was created needs no condition), at most
// MaxPodWrites of them a round, pods fairway has not told why first, then pods whose code
// changed, then pods whose message did: so that no tenant's many waiting pods, whose messages
// may change every cycle, keep another team's new pod from being told why.
//
// The round's pods are those r says wait; each is written with the reason of the newest report,
// and not at all when that report no longer says it waits (a newer cycle may have bound it: a
// condition written after the binding would contradict it). Until the round followed newer
// reports it ended at the first one, and a busy scheduler, whose cycles end every few tens of
// milliseconds, wrote a pod or two a round: under load 400 waiting pods of KAI's
// pending-background scale spec were not all told why within two minutes.
func (w *Writer) writePods(ctx context.Context, r *Report, now metav1.Time) int {
	type candidate struct {
		pod  *corev1.Pod
		gang snapshot.GangKey
		rank int
	}
	var cands []candidate
	minAge := w.opts.Interval
	for key, reason := range r.Waiting {
		cond := PodUnschedulable(reason, now)
		for _, k := range r.Pending[key] {
			p := w.inf.Pod(k.Namespace, k.Name)
			if p == nil || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || now.Sub(p.CreationTimestamp.Time) < minAge || !PodConditionDiffers(p, cond) {
				continue
			}
			cands = append(cands, candidate{pod: p, gang: key, rank: toldRank(p, reason.Code)})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.rank, b.rank) })
	n := 0
	for _, c := range cands {
		if n >= w.opts.MaxPodWrites || ctx.Err() != nil {
			break
		}
		latest := w.latest.Load()
		if latest == nil {
			latest = r
		}
		reason, ok := latest.Waiting[c.gang]
		if !ok || !slices.Contains(latest.Pending[c.gang], types.NamespacedName{Namespace: c.pod.Namespace, Name: c.pod.Name}) {
			continue
		}
		cond := PodUnschedulable(reason, now)
		if !PodConditionDiffers(c.pod, cond) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": c.pod.UID},
			"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
		})
		_, err := w.core.CoreV1().Pods(c.pod.Namespace).Patch(ctx, c.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) && ctx.Err() == nil {
				w.opts.Log.V(1).Info("Writing a waiting pod's condition", "pod", klog.KObj(c.pod), "err", err.Error())
			}
			continue
		}
		n++
	}
	return n
}

// toldRank orders the waiting pods a round writes: 0 for a pod fairway has not told why it waits
// (no PodScheduled condition of fairway's), 1 for one told another code, 2 for one told this
// code with another message.
func toldRank(p *corev1.Pod, code engine.ReasonCode) int {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		told, _, ok := v1alpha1.ParsePodScheduledMessage(c.Message)
		switch {
		case !ok:
			return 0
		case told != code:
			return 1
		default:
			return 2
		}
	}
	return 0
}
