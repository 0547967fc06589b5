// Package podgroups creates a PodGroup for every gang named by a fairway.dev/pod-group
// annotation that has none, owned so that it is garbage-collected with its workload.
//
// Ownership: when the gang's pods have a controller (a Job, a ReplicaSet, an Argo Workflow, a
// RayCluster...) the PodGroup is owned by the controller of the oldest pod, so it goes when that
// object goes. Walking up to the top owner would need a read of an arbitrary kind per gang; the
// direct controller is deleted with the top owner anyway (cascading deletion), so the PodGroup
// goes then too. Bare pods have no controller: the PodGroup is then owned by every pod of the
// gang (non-controller references, added as pods appear), and the garbage collector deletes it
// when the last of them is gone, not with the first.
package podgroups

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
)

// Derive returns the PodGroup a gang's pods call for: name and namespace from their annotation,
// minMember (the largest fairway.dev/min-member), queue, priority class, preemptibility,
// topology and sub-groups (fairway.dev/sub-groups) from the oldest pod, and its owners (see the package documentation). pods must be
// non-empty and share the annotation and the namespace. The queue is not checked against the
// namespaces it serves: the scheduler refuses a gang whose queue does not serve it
// (engine.ReasonForeignQueue), whoever wrote the PodGroup. When the namespace later moves to
// another queue, Follow moves the PodGroup with it.
func Derive(pods []*corev1.Pod) *v1alpha1.PodGroup {
	pods = slices.Clone(pods)
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	first := pods[0]
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: first.Annotations[v1alpha1.PodGroupAnnotation], Namespace: first.Namespace,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		},
		Spec: v1alpha1.PodGroupSpec{
			MinMember:         1,
			Queue:             queueOf(first),
			PriorityClassName: first.Spec.PriorityClassName,
		},
	}
	// A value the label's reader refuses is none (the snapshot reports it on the pod).
	pg.Spec.Preemptibility, _ = v1alpha1.PreemptibilityOf(first.Labels)
	for _, p := range pods {
		if n, _, err := v1alpha1.MinMemberOf(p.Annotations); err == nil && n > pg.Spec.MinMember {
			pg.Spec.MinMember = n
		}
	}
	// A value the annotation's parser refuses leaves the gang without sub-groups; the snapshot
	// reports it on the pods.
	if subs, err := v1alpha1.ParseSubGroups(first.Annotations[v1alpha1.SubGroupsAnnotation]); err == nil {
		pg.Spec.SubGroups = subs
	}
	req, pref := first.Annotations[v1alpha1.TopologyRequiredAnnotation], first.Annotations[v1alpha1.TopologyPreferredAnnotation]
	if req != "" || pref != "" {
		pg.Spec.TopologyConstraint = &v1alpha1.TopologyConstraint{RequiredLevel: req, PreferredLevel: pref}
	}
	pg.OwnerReferences = Owners(pods, nil)
	return pg
}

// queueOf is the queue the pod's labels name; labels that disagree are the snapshot's to report.
func queueOf(p *corev1.Pod) string {
	_, q, _ := v1alpha1.QueueOf(p.Labels)
	return q
}

// Owners returns the owner references a PodGroup of these pods must have, given those it has:
// the controller of the oldest pod that has one, or else every bare pod (pods must be sorted
// oldest first). have is returned unchanged when it already covers them.
func Owners(pods []*corev1.Pod, have []metav1.OwnerReference) []metav1.OwnerReference {
	for _, p := range pods {
		if c := metav1.GetControllerOfNoCopy(p); c != nil {
			if len(have) > 0 {
				return have // owned by a controller (or by pods before the controller appeared)
			}
			ref := *c
			ref.Controller, ref.BlockOwnerDeletion = nil, nil
			return []metav1.OwnerReference{ref}
		}
	}
	out := slices.Clone(have)
	for _, p := range pods {
		if p.DeletionTimestamp != nil || slices.ContainsFunc(out, func(r metav1.OwnerReference) bool { return r.UID == p.UID }) {
			continue
		}
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
	}
	return out
}

// Options configure a Controller.
type Options struct {
	// Workers reconcile gangs concurrently. 2 when 0.
	Workers int
	// AdmissionKey, when set, has PodGroups derived and owned only from pods the webhook sealed
	// with it, as the scheduler places only those: a pod made while the webhook was down (or
	// past it) waits NotAdmitted, and its keys, written by its author, must not shape the gang of
	// the pods that were admitted (queue, minimum, sub-groups, preemptibility).
	AdmissionKey v1alpha1.AdmissionKey
	Log          logr.Logger
}

// Controller creates and owns PodGroups. It implements manager.Runnable (leader only).
type Controller struct {
	client client.Client
	inf    *cache.Informers
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

// New returns a controller reading the caches of inf and writing through c. Call it before the
// informers start so it sees every pod.
func New(c client.Client, inf *cache.Informers, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	ctl := &Controller{client: c, inf: inf, opts: opts, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "podgroups"})}
	enqueuePod := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if pg := p.Annotations[v1alpha1.PodGroupAnnotation]; pg != "" {
				ctl.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: pg})
			}
		}
	}
	if _, err := inf.Pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueuePod,
		UpdateFunc: func(old, cur any) {
			o, c := old.(*corev1.Pod), cur.(*corev1.Pod)
			// A pod that stops running may let its gang follow its namespace's queue (Follow).
			if o.Annotations[v1alpha1.PodGroupAnnotation] != c.Annotations[v1alpha1.PodGroupAnnotation] || runs(o) != runs(c) {
				enqueuePod(cur)
			}
		},
		DeleteFunc: enqueuePod,
	}); err != nil {
		return nil, err
	}
	// A namespace moved to another queue (a Queue's namespaces or selector, a namespace's labels)
	// moves its gangs (Follow): look at the PodGroups of the namespaces concerned again.
	enqueueNamespace := func(ns string) {
		for _, o := range inf.PodGroups.GetStore().List() {
			if pg, ok := o.(*v1alpha1.PodGroup); ok && (ns == "" || pg.Namespace == ns) && pg.Labels[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue {
				ctl.queue.Add(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
			}
		}
	}
	if _, err := inf.Queues.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { enqueueNamespace("") },
		UpdateFunc: func(old, cur any) {
			// Spec changes only (queues' status is written all the time); they are rare.
			if o, ok := old.(*v1alpha1.Queue); !ok || o.Generation != cur.(*v1alpha1.Queue).Generation {
				enqueueNamespace("")
			}
		},
		DeleteFunc: func(any) { enqueueNamespace("") },
	}); err != nil {
		return nil, err
	}
	if _, err := inf.Namespaces.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ook := old.(*corev1.Namespace)
			if ns, ok := cur.(*corev1.Namespace); ok && (!ook || !maps.Equal(o.Labels, ns.Labels)) {
				enqueueNamespace(ns.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := inf.PodGroups.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				ctl.queue.Add(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
			}
		},
	}); err != nil {
		return nil, err
	}
	return ctl, nil
}

// Client is the client the controller writes PodGroups through.
func (c *Controller) Client() client.Client { return c.client }

// NeedLeaderElection is true: only the leader creates PodGroups.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start reconciles gangs until ctx ends. Gangs seen before it started are already queued.
func (c *Controller) Start(ctx context.Context) error {
	if !startQueue(ctx, c.inf, c.queue.ShutDown) {
		return nil
	}
	work(ctx, c.opts.Workers, c.queue, c.Reconcile, func(key types.NamespacedName, err error) {
		c.opts.Log.Error(err, "Reconciling a pod group", "podGroup", klog.KRef(key.Namespace, key.Name))
	})
	return nil
}

// startQueue ties a work queue to ctx (shutDown when it ends) and waits for the informers'
// first sync, so that workers never reconcile against a partial cache; false when ctx ended
// first. The Controller and the Follower both start so.
func startQueue(ctx context.Context, inf *cache.Informers, shutDown func()) bool {
	go func() {
		<-ctx.Done()
		shutDown()
	}()
	for !inf.Synced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// work runs n workers over q until it is shut down, and returns when all have stopped. Each key
// goes to reconcile: on success the rate limiter forgets it, on failure it is logged (unless ctx
// ended, which fails everything) and comes back rate-limited.
func work[K comparable](ctx context.Context, n int, q workqueue.TypedRateLimitingInterface[K],
	reconcile func(context.Context, K) error, logFailure func(K, error)) {
	next := func() bool {
		key, quit := q.Get()
		if quit {
			return false
		}
		defer q.Done(key)
		if err := reconcile(ctx, key); err != nil {
			if ctx.Err() == nil {
				logFailure(key, err)
			}
			q.AddRateLimited(key)
			return true
		}
		q.Forget(key)
		return true
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for next() {
			}
		})
	}
	wg.Wait()
}

// admitted: no key is set, or the webhook sealed p with it.
func (c *Controller) admitted(p *corev1.Pod) bool {
	return c.opts.AdmissionKey == nil || c.opts.AdmissionKey.VerifyAdmission(p) == nil
}

// Reconcile creates the PodGroup of a gang that has pods and none, adds bare pods to the
// owners of a PodGroup the runtime created, and moves such a PodGroup to its namespace's queue
// when the namespace moved (Follow).
func (c *Controller) Reconcile(ctx context.Context, key types.NamespacedName) error {
	var pods, all []*corev1.Pod
	for _, p := range c.inf.PodsByIndex(cache.IndexPodGroup, key.Namespace+"/"+key.Name) {
		// The index is per namespace already; the check keeps it so should the index change:
		// a PodGroup's queue (and owners) must never come from a pod of another namespace.
		if p.Namespace != key.Namespace {
			continue
		}
		all = append(all, p)
		if p.DeletionTimestamp == nil && c.admitted(p) {
			pods = append(pods, p)
		}
	}
	cur := c.inf.PodGroup(key.Namespace, key.Name)
	if cur != nil && cur.Labels[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue {
		if err := c.follow(ctx, cur, all); err != nil {
			return err
		}
	}
	if len(pods) == 0 {
		return nil
	}
	if cur == nil {
		pg := Derive(pods)
		err := c.client.Create(ctx, pg)
		switch {
		case err == nil:
			c.opts.Log.V(1).Info("Created a pod group", "podGroup", klog.KObj(pg), "minMember", pg.Spec.MinMember, "queue", pg.Spec.Queue)
			return nil
		case apierrors.IsAlreadyExists(err):
			return nil // the cache is behind; its event brings us back if needed
		}
		return err
	}
	if cur.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
		return nil // someone else's: leave its owners alone
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	want := Owners(pods, cur.OwnerReferences)
	if len(want) == len(cur.OwnerReferences) {
		return nil
	}
	patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj := cur.DeepCopy()
	obj.OwnerReferences = want
	if err := c.client.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// follow writes Follow's decision to a PodGroup the runtime created. The patch carries the
// PodGroup's resourceVersion: one written meanwhile (a pod came, the Follower wrote its shape)
// is looked at again from the cache.
func (c *Controller) follow(ctx context.Context, cur *v1alpha1.PodGroup, pods []*corev1.Pod) error {
	queue, class, ok := Follow(cur, pods, informerServing{c.inf})
	if !ok {
		return nil
	}
	patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj := cur.DeepCopy()
	obj.Spec.Queue, obj.Spec.PriorityClassName = queue, class
	if err := c.client.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("moving pod group %s/%s from queue %s to %s: %w", cur.Namespace, cur.Name, cur.Spec.Queue, queue, err)
	}
	c.opts.Log.Info("A pod group follows its namespace to another queue", "podGroup", klog.KObj(cur),
		"from", cur.Spec.Queue, "to", queue, "priorityClass", class)
	return nil
}

// informerServing resolves the namespaces queues serve from the informers' Queues and
// Namespaces, as the scheduling loop does (loop.queueSpec).
type informerServing struct{ inf *cache.Informers }

func (s informerServing) Serves(queue, ns string) bool {
	q := s.inf.Queue(queue)
	if q == nil {
		return false
	}
	m, _ := v1alpha1.NewNamespaceMatcher(&q.Spec) // a malformed selector: the listed namespaces only
	return m.Serves(ns, s.labels(ns))
}

func (s informerServing) QueuesServing(ns string) []string {
	var out []string
	labels := s.labels(ns)
	for _, o := range s.inf.Queues.GetStore().List() {
		if q, ok := o.(*v1alpha1.Queue); ok {
			if m, _ := v1alpha1.NewNamespaceMatcher(&q.Spec); m.Serves(ns, labels) {
				out = append(out, q.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (s informerServing) labels(ns string) map[string]string {
	if o, ok, _ := s.inf.Namespaces.GetStore().GetByKey(ns); ok {
		if n, ok := o.(*corev1.Namespace); ok {
			return n.Labels
		}
	}
	return nil
}
