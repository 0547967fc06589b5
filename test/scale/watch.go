package scale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// appLabel marks the suite's pods (KAI's app: engine-e2e), so the watch sees only them.
const appLabel, appValue = "app", "fairway-scale"

// podWatch follows the suite's pods: when each was first seen bound (the clocks stop there), and
// how many GPUs of bound pods were deleted per namespace since the last reset (evictions: the
// suite deletes nothing inside a measured window). A deleted pod counts once, when the watch first
// sees its deletion; it has stopped, and holds nothing, from when it turns terminal or is removed,
// whichever the watch sees first (a Job's pod stays until the Job controller takes off its
// finalizer).
type podWatch struct {
	inf cache.SharedIndexInformer

	mu      sync.Mutex
	boundAt map[string]time.Time // namespace/name
	seenAt  map[string]time.Time // namespace/name: when the watch first saw the pod
	lostGPU map[string]int64     // namespace: GPUs of bound pods deleted
	counted map[types.UID]bool   // deleted bound pods in lostGPU
	stopped map[types.UID]bool   // deleted bound pods in stops
	// deletions and stops are, per namespace since the last reset, when the watch first and
	// last saw a bound pod deleted, and stop (lastLost): the phases of a reclaim.
	deletions, stops map[string]*span
}

// span is the earliest and the latest of a set of moments.
type span struct{ first, last time.Time }

func (s *span) add(t time.Time) {
	if s.first.IsZero() || t.Before(s.first) {
		s.first = t
	}
	if t.After(s.last) {
		s.last = t
	}
}

// since prints the span relative to start, to the millisecond.
func (s span) since(start time.Time) string {
	if s.first.IsZero() {
		return "none"
	}
	ms := func(t time.Time) string { return t.Sub(start).Round(time.Millisecond).String() }
	return "+" + ms(s.first) + " to +" + ms(s.last)
}

func startWatch(ctx context.Context, cs kubernetes.Interface) (*podWatch, error) {
	sel := labels.SelectorFromSet(labels.Set{appLabel: appValue}).String()
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	w := &podWatch{
		inf:     cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		boundAt: map[string]time.Time{}, seenAt: map[string]time.Time{}, lostGPU: map[string]int64{},
		counted: map[types.UID]bool{}, stopped: map[types.UID]bool{}, deletions: map[string]*span{}, stops: map[string]*span{},
	}
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		if _, seen := w.seenAt[key]; !seen {
			w.seenAt[key] = time.Now()
		}
		if p.Spec.NodeName == "" {
			w.mu.Unlock()
			return
		}
		if _, seen := w.boundAt[key]; !seen {
			w.boundAt[key] = time.Now()
		}
		if p.DeletionTimestamp != nil {
			w.deleted(p, terminal(p))
		}
		w.mu.Unlock()
	}
	gone := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		key := p.Namespace + "/" + p.Name
		if _, bound := w.boundAt[key]; bound || p.Spec.NodeName != "" {
			w.deleted(p, true)
		}
		delete(w.boundAt, key)
		delete(w.seenAt, key)
		delete(w.counted, p.UID)
		delete(w.stopped, p.UID)
	}
	if _, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, o any) { record(o) }, DeleteFunc: gone,
	}); err != nil {
		return nil, err
	}
	go w.inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		return nil, errors.New("the pod watch did not sync")
	}
	return w, nil
}

// pods are the live (not terminating) pods of a namespace the watch holds.
func (w *podWatch) pods(ns string) []*corev1.Pod {
	objs, _ := w.inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p := o.(*corev1.Pod); p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// deleted counts bound pod p, seen deleted, once; and when it has stopped, when it stopped.
// The caller holds w.mu.
func (w *podWatch) deleted(p *corev1.Pod, stopped bool) {
	now := time.Now()
	if !w.counted[p.UID] {
		w.counted[p.UID] = true
		w.lostGPU[p.Namespace] += podGPUs(p)
		spanOf(w.deletions, p.Namespace).add(now)
	}
	if stopped && !w.stopped[p.UID] {
		w.stopped[p.UID] = true
		spanOf(w.stops, p.Namespace).add(now)
	}
}

func spanOf(m map[string]*span, key string) *span {
	s, ok := m[key]
	if !ok {
		s = &span{}
		m[key] = s
	}
	return s
}

// holds reports whether p still holds its node's resources: the watch holds the same pod, and
// it is not terminal (kube-scheduler's informer drops terminal pods; a kubelet admits against
// the pods it has not seen stop).
func (w *podWatch) holds(p *corev1.Pod) bool {
	o, ok, _ := w.inf.GetIndexer().GetByKey(p.Namespace + "/" + p.Name)
	if !ok {
		return false
	}
	q := o.(*corev1.Pod)
	return q.UID == p.UID && !terminal(q)
}

// terminal reports whether p's containers have stopped for good (its phase says so).
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// any reports whether the watch holds a pod of one of namespaces, terminating or not.
func (w *podWatch) any(namespaces ...string) bool {
	for _, ns := range namespaces {
		if objs, _ := w.inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns); len(objs) > 0 {
			return true
		}
	}
	return false
}

// seen is when the watch first saw each live pod of ns, by name.
func (w *podWatch) seen(ns string) map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Time{}
	for _, p := range w.pods(ns) {
		if at, ok := w.seenAt[p.Namespace+"/"+p.Name]; ok {
			out[p.Name] = at
		}
	}
	return out
}

// resetLost starts counting deleted bound pods afresh.
func (w *podWatch) resetLost() {
	w.mu.Lock()
	clear(w.lostGPU)
	clear(w.deletions)
	clear(w.stops)
	w.mu.Unlock()
}

// phases says when, relative to start, bound pods of ns were seen deleted and seen to stop
// (since the last reset), and when the pods of boundNs that keep matches were first seen bound:
// where a reclaim's time went.
func (w *podWatch) phases(start time.Time, ns, boundNs string, keep func(*corev1.Pod) bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var bound span
	for _, p := range w.pods(boundNs) {
		if t, ok := w.boundAt[p.Namespace+"/"+p.Name]; ok && (keep == nil || keep(p)) {
			bound.add(t)
		}
	}
	del, stop := *spanOf(w.deletions, ns), *spanOf(w.stops, ns)
	return fmt.Sprintf("victims seen deleted %s, stopped %s; bound %s", del.since(start), stop.since(start), bound.since(start))
}

// lastLost is when a deleted bound pod of ns was last seen to stop, since the last reset.
func (w *podWatch) lastLost(ns string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return spanOf(w.stops, ns).last
}

// lost is the GPUs of bound pods of ns deleted since the last reset.
func (w *podWatch) lost(ns string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lostGPU[ns]
}

// waitCreated waits until ns holds at least n live pods (KAI: ForAtLeastNPodCreation).
func (w *podWatch) waitCreated(ctx context.Context, ns string, n int, timeout time.Duration) error {
	return poll(ctx, 100*time.Millisecond, timeout, fmt.Sprintf("%d pods in %s", n, ns), func() (bool, error) {
		return len(w.pods(ns)) >= n, nil
	})
}

// waitRunning waits until at least n live pods of ns run (kwok has played their kubelet).
func (w *podWatch) waitRunning(ctx context.Context, ns string, n int, timeout time.Duration) error {
	return poll(ctx, 100*time.Millisecond, timeout, fmt.Sprintf("%d running pods in %s", n, ns), func() (bool, error) {
		running := 0
		for _, p := range w.pods(ns) {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running >= n, nil
	})
}

// waitBound waits until exactly n live pods of ns match keep and all are bound (KAI:
// waitForAllJobsToSchedule), and returns when the last of them was first seen bound.
func (w *podWatch) waitBound(ctx context.Context, ns string, n int, keep func(*corev1.Pod) bool, timeout time.Duration) (time.Time, error) {
	var last time.Time
	var seen, bound int
	err := poll(ctx, 50*time.Millisecond, timeout, fmt.Sprintf("%d bound pods in %s", n, ns), func() (bool, error) {
		seen, bound, last = 0, 0, time.Time{}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range w.pods(ns) {
			if keep != nil && !keep(p) {
				continue
			}
			seen++
			if at, ok := w.boundAt[p.Namespace+"/"+p.Name]; ok {
				bound++
				if at.After(last) {
					last = at
				}
			}
		}
		return seen == n && bound == n, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("%w (%d pods, %d bound)", err, seen, bound)
	}
	return last, nil
}

// podGPUs is the whole GPUs a pod asks for (KAI's pods set limits only).
func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[fairwayv1.ResourceGPU]; ok {
			n += q.Value()
		}
	}
	return n
}
