package podgroups

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
)

// Follower keeps the gangs of framework objects the size their owners ask for. A gang's size is
// fixed when its first pods are admitted, but a RayCluster is scaled (by its user, or by the Ray
// autoscaler through workerGroupSpecs[].replicas), an elastic PyTorchJob's workers come and go,
// a JobSet's replicated jobs change: without this, a gang scaled below its first size would be
// evicted as stale, and one scaled above it would start a second time. So the Follower watches
// the owner kinds of the adapters that implement adapters.GangShaper (informers on unstructured
// objects, started only once the kind's CRD is served, checked again every KindPollInterval so
// that an operator installed after the scheduler is picked up), and writes each shape's minMember
// and subGroups to the PodGroup the runtime created for it. Topology constraints that sub-groups
// carry are kept by name. PodGroups the runtime did not create (not labelled
// app.kubernetes.io/managed-by=fairway) are their authors' and are never written.
//
// Shrinking then never makes a running gang stale (its minimum drops with its pods), and a
// gang that grows keeps running while its new members are placed (snapshot.Gang.Stale).
//
// It implements manager.Runnable (leader only) and needs get, list and watch on the owner kinds
// and patch on PodGroups.
type Follower struct {
	client client.Client
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	inf    *cache.Informers
	opts   FollowerOptions
	kinds  []*ownerKind
	queue  workqueue.TypedRateLimitingInterface[ownerKey]

	mu sync.Mutex
	// owners maps a PodGroup to the object whose shape it has, learnt from the shapes: the
	// runtime may create the PodGroup after the owner was reconciled, and its creation must
	// bring the owner back.
	owners map[types.NamespacedName]ownerKey
}

// FollowerOptions configure a Follower.
type FollowerOptions struct {
	// Workers reconcile owners concurrently. 2 when 0.
	Workers int
	// KindPollInterval is how often kinds whose CRD is not served yet are looked up again.
	// 10s when 0.
	KindPollInterval time.Duration
	Log              logr.Logger
}

type ownerKind struct {
	gvk    schema.GroupVersionKind
	shaper adapters.GangShaper
	// lister is nil until the kind's informer runs.
	lister toolscache.GenericLister
}

type ownerKey struct {
	kind      int
	namespace string
	name      string
}

// NewFollower returns a Follower of the owner kinds of shapers, reading PodGroups from inf and
// writing them through c; dyn and mapper serve the owner kinds. Call it before inf starts.
func NewFollower(c client.Client, dyn dynamic.Interface, mapper meta.RESTMapper, inf *cache.Informers, shapers []adapters.GangShaper, opts FollowerOptions) (*Follower, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.KindPollInterval <= 0 {
		opts.KindPollInterval = 10 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	f := &Follower{client: c, dyn: dyn, mapper: mapper, inf: inf, opts: opts, owners: map[types.NamespacedName]ownerKey{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[ownerKey](),
			workqueue.TypedRateLimitingQueueConfig[ownerKey]{Name: "podgroup-owners"})}
	for _, s := range shapers {
		for _, gvk := range s.GangOwnerKinds() {
			if !slices.ContainsFunc(f.kinds, func(k *ownerKind) bool { return k.gvk == gvk }) {
				f.kinds = append(f.kinds, &ownerKind{gvk: gvk, shaper: s})
			}
		}
	}
	if _, err := inf.PodGroups.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				f.mu.Lock()
				owner, known := f.owners[types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}]
				f.mu.Unlock()
				if known {
					f.queue.Add(owner)
				}
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watching pod groups for their owners: %w", err)
	}
	return f, nil
}

// NeedLeaderElection is true: only the leader writes PodGroups.
func (f *Follower) NeedLeaderElection() bool { return true }

// Start follows owners until ctx ends.
func (f *Follower) Start(ctx context.Context) error {
	if !startQueue(ctx, f.inf, f.queue.ShutDown) || len(f.kinds) == 0 {
		return nil
	}
	go f.watchKinds(ctx)
	work(ctx, f.opts.Workers, f.queue, f.Reconcile, func(key ownerKey, err error) {
		f.opts.Log.Error(err, "Following a gang's owner", "kind", f.kinds[key.kind].gvk.Kind, "owner", klog.KRef(key.namespace, key.name))
	})
	return nil
}

// watchKinds starts the informer of every owner kind the API server serves, and looks again for
// the others every KindPollInterval until all run.
func (f *Follower) watchKinds(ctx context.Context) {
	kinds := make([]cache.OptionalKind, len(f.kinds))
	for i, k := range f.kinds {
		kinds[i] = cache.OptionalKind{
			GVK: k.gvk, Trim: cache.TrimToSpec, // GangShapes reads the metadata and the spec
			Setup:    func(_ schema.GroupVersionResource, inf informers.GenericInformer) error { return f.setupKind(i, inf) },
			Missing:  "Owner kind not served; its gangs keep their admission size until it is",
			Watching: "Following gang owners",
		}
	}
	cache.WatchOptional(ctx, f.dyn, f.mapper, f.opts.KindPollInterval, f.opts.Log, kinds)
}

// setupKind queues the owners of kind i as their specs change, and keeps the kind's lister.
func (f *Follower) setupKind(i int, inf informers.GenericInformer) error {
	k := f.kinds[i]
	enqueue := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			f.queue.Add(ownerKey{kind: i, namespace: o.GetNamespace(), name: o.GetName()})
		}
	}
	if _, err := inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Status updates (a RayCluster's, every few seconds) leave the generation alone.
		UpdateFunc: func(old, cur any) {
			if o, c := old.(metav1.Object), cur.(metav1.Object); o.GetGeneration() != c.GetGeneration() {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	// The lister is set before the informer runs: its first events are queued at once, and an
	// owner reconciled before the store holds it simply comes back with its own event.
	f.mu.Lock()
	k.lister = inf.Lister()
	f.mu.Unlock()
	return nil
}

// Reconcile writes the shapes of one owner object to the PodGroups the runtime made for them.
func (f *Follower) Reconcile(ctx context.Context, key ownerKey) error {
	k := f.kinds[key.kind]
	f.mu.Lock()
	lister := k.lister
	f.mu.Unlock()
	if lister == nil {
		return nil
	}
	obj, err := lister.ByNamespace(key.namespace).Get(key.name)
	if apierrors.IsNotFound(err) {
		f.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", k.gvk.Kind, key.namespace, key.name, err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%s %s/%s: unexpected type %T", k.gvk.Kind, key.namespace, key.name, obj)
	}
	for _, shape := range k.shaper.GangShapes(u) {
		name := types.NamespacedName{Namespace: key.namespace, Name: shape.PodGroup}
		f.mu.Lock()
		f.owners[name] = key
		f.mu.Unlock()
		if err := f.follow(ctx, name, shape); err != nil {
			return err
		}
	}
	return nil
}

func (f *Follower) forget(key ownerKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for pg, owner := range f.owners {
		if owner == key {
			delete(f.owners, pg)
		}
	}
}

// follow patches one PodGroup to the shape, when the runtime created it and it differs.
func (f *Follower) follow(ctx context.Context, name types.NamespacedName, shape adapters.GangShape) error {
	cur := f.inf.PodGroup(name.Namespace, name.Name)
	if cur == nil || cur.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || cur.DeletionTimestamp != nil {
		return nil
	}
	subs := WithTopology(shape.SubGroups, cur.Spec.SubGroups)
	if cur.Spec.MinMember == shape.MinMember && slices.EqualFunc(cur.Spec.SubGroups, subs, subGroupEqual) {
		return nil
	}
	obj := cur.DeepCopy()
	obj.Spec.MinMember, obj.Spec.SubGroups = shape.MinMember, subs
	patch := client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
	if err := f.client.Patch(ctx, obj, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("resizing pod group %s: %w", name, err)
	}
	f.opts.Log.V(1).Info("Resized a gang to its owner", "podGroup", klog.KObj(obj), "minMember", shape.MinMember,
		"was", cur.Spec.MinMember, "subGroups", v1alpha1.FormatSubGroups(subs))
	return nil
}

// WithTopology returns subs with the topology constraint of the sub-group of the same name in
// have: adapters derive minimums, and a constraint someone set on a sub-group stays.
func WithTopology(subs, have []v1alpha1.SubGroup) []v1alpha1.SubGroup {
	out := slices.Clone(subs)
	for i := range out {
		if j := slices.IndexFunc(have, func(h v1alpha1.SubGroup) bool { return h.Name == out[i].Name }); j >= 0 && have[j].TopologyConstraint != nil {
			tc := *have[j].TopologyConstraint
			out[i].TopologyConstraint = &tc
		}
	}
	return out
}

func subGroupEqual(a, b v1alpha1.SubGroup) bool {
	return a.Name == b.Name && a.MinMember == b.MinMember &&
		(a.TopologyConstraint == nil) == (b.TopologyConstraint == nil) &&
		(a.TopologyConstraint == nil || *a.TopologyConstraint == *b.TopologyConstraint)
}
