package cache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Index names of the informers' indexers.
const (
	// IndexPodGroup indexes fairway's pods by <namespace>/<pod group annotation>.
	IndexPodGroup = "podgroup"
	// IndexNode indexes fairway's pods by spec.nodeName.
	IndexNode = "node"
	// IndexClaim indexes fairway's pods by <namespace>/<claim> of every claim they use.
	IndexClaim = "claim"
	// IndexPriorityClass indexes PodGroups by spec.priorityClassName.
	IndexPriorityClass = "priorityclass"
	// IndexStorageClass indexes claims and volumes by their storage class ("" for none).
	IndexStorageClass = "storageclass"
)

// Informers are the scheduler's view of the cluster: client-go shared informers whose objects
// are trimmed before they are stored (see the Trim functions) and whose events go to a Queue.
// They run on every replica, leader or not, so a newly elected leader builds its snapshot from
// warm caches.
//
// Pods come from two watches that never overlap: fairway's own pods (spec.schedulerName=fairway,
// pending or bound, reservation pods included) and every pod another scheduler bound
// (spec.schedulerName!=fairway,spec.nodeName!=), which only take node capacity. A third watch
// has the pending pods of other schedulers, trimmed to the GPUs they ask for: they compete for
// fairway's nodes, and waiting gangs' reasons name them.
type Informers struct {
	Pods        cache.SharedIndexInformer
	ForeignPods cache.SharedIndexInformer
	Nodes       cache.SharedIndexInformer
	Queues      cache.SharedIndexInformer
	// Namespaces keeps namespaces' names and labels, for Queue.spec.namespaceSelector.
	Namespaces      cache.SharedIndexInformer
	PodGroups       cache.SharedIndexInformer
	PriorityClasses cache.SharedIndexInformer
	Claims          cache.SharedIndexInformer
	Volumes         cache.SharedIndexInformer
	StorageClasses  cache.SharedIndexInformer
	// Budgets are the PodDisruptionBudgets, indexed by namespace for their lister.
	Budgets cache.SharedIndexInformer
	budgets policylisters.PodDisruptionBudgetLister

	// PendingForeignPods are other schedulers' pods that wait for a node (TrimPendingForeignPod).
	PendingForeignPods cache.SharedIndexInformer

	// DRA objects (dra.go).
	DeviceClasses, ResourceSlices, ResourceClaims cache.SharedIndexInformer

	// informers are all of the above, in the order of watchedKinds.
	informers []cache.SharedIndexInformer
	queue     *Queue
	log       logr.Logger
	synced    atomic.Bool
}

// New builds the informers (not started): typed ones on cs, fairway's CRDs through crd.
// Events go to q.
func New(cs kubernetes.Interface, crd client.WithWatch, q *Queue, log logr.Logger) (*Informers, error) {
	inf := &Informers{queue: q, log: log}
	for _, w := range inf.watchedKinds(cs, crd) {
		i := newInformer(w.lw, w.obj, w.indexers)
		if err := i.SetTransform(w.trim); err != nil {
			return nil, fmt.Errorf("setting the transform of the %s informer: %w", w.kind, err)
		}
		if _, err := i.AddEventHandler(queueHandler(q, w.kind, w.relevant)); err != nil {
			return nil, fmt.Errorf("adding the event handler of the %s informer: %w", w.kind, err)
		}
		*w.into = i
		inf.informers = append(inf.informers, i)
	}
	inf.budgets = policylisters.NewPodDisruptionBudgetLister(inf.Budgets.GetIndexer())
	return inf, nil
}

// watched is one informer of the scheduler: where it is kept, how its kind is listed and
// watched, what is kept of each object, how it is indexed, and which of its events wake the
// scheduling loop (adds and deletes always do; an update when relevant says so).
type watched struct {
	into     *cache.SharedIndexInformer
	lw       *cache.ListWatch
	obj      runtime.Object
	indexers cache.Indexers
	trim     cache.TransformFunc
	kind     Kind
	relevant func(old, cur any) bool
}

// watchedKinds is the table of what the scheduler watches: one row per informer, the one place
// a kind is added.
func (inf *Informers) watchedKinds(cs kubernetes.Interface, crd client.WithWatch) []watched {
	core, storage, policy, sched := cs.CoreV1(), cs.StorageV1(), cs.PolicyV1(), cs.SchedulingV1()
	own := fields.OneTermEqualSelector("spec.schedulerName", v1alpha1.SchedulerName).String()
	foreign := fields.AndSelectors(
		fields.OneTermNotEqualSelector("spec.schedulerName", v1alpha1.SchedulerName),
		fields.OneTermNotEqualSelector("spec.nodeName", ""),
	).String()
	pendingForeign := fields.AndSelectors(
		fields.OneTermNotEqualSelector("spec.schedulerName", v1alpha1.SchedulerName),
		fields.OneTermEqualSelector("spec.nodeName", ""),
		fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)),
	).String()
	podIndexers := cache.Indexers{IndexPodGroup: indexPodGroup, IndexNode: indexNode, IndexClaim: indexClaim,
		IndexResourceClaim: indexResourceClaim, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	kinds := []watched{
		{&inf.Pods, clientLW[*corev1.PodList](core.Pods(""), own), &corev1.Pod{}, podIndexers,
			transform(TrimPod), KindPod, podChangeRelevant},
		{&inf.ForeignPods, clientLW[*corev1.PodList](core.Pods(""), foreign), &corev1.Pod{}, nil,
			transform(TrimForeignPod), KindPod, podChangeRelevant},
		{&inf.PendingForeignPods, clientLW[*corev1.PodList](core.Pods(""), pendingForeign), &corev1.Pod{}, nil,
			transform(TrimPendingForeignPod), KindPod, func(old, cur any) bool { return false }}, // adds and deletes only
		{&inf.Nodes, clientLW[*corev1.NodeList](core.Nodes(), ""), &corev1.Node{}, nil,
			transform(TrimNode), KindNode, nodeChangeRelevant},
		{&inf.Queues, crdLW[v1alpha1.QueueList](crd), &v1alpha1.Queue{}, nil,
			transform(TrimQueue), KindQueue, generationChanged},
		{&inf.Namespaces, clientLW[*corev1.NamespaceList](core.Namespaces(), ""), &corev1.Namespace{}, nil,
			transform(TrimNamespace), KindNamespace, func(old, cur any) bool {
				return !maps.Equal(old.(*corev1.Namespace).Labels, cur.(*corev1.Namespace).Labels)
			}},
		{&inf.PodGroups, crdLW[v1alpha1.PodGroupList](crd), &v1alpha1.PodGroup{}, cache.Indexers{IndexPriorityClass: indexPriorityClass},
			transform(TrimPodGroup), KindPodGroup, generationChanged},
		{&inf.PriorityClasses, clientLW[*schedulingv1.PriorityClassList](sched.PriorityClasses(), ""), &schedulingv1.PriorityClass{}, nil,
			transform(TrimPriorityClass), KindPriorityClass, func(old, cur any) bool {
				return old.(*schedulingv1.PriorityClass).Value != cur.(*schedulingv1.PriorityClass).Value
			}},
		{&inf.Claims, clientLW[*corev1.PersistentVolumeClaimList](core.PersistentVolumeClaims(""), ""), &corev1.PersistentVolumeClaim{},
			cache.Indexers{IndexStorageClass: indexClaimClass}, transform(TrimClaim), KindClaim, claimChangeRelevant},
		{&inf.Volumes, clientLW[*corev1.PersistentVolumeList](core.PersistentVolumes(), ""), &corev1.PersistentVolume{},
			cache.Indexers{IndexStorageClass: indexVolumeClass}, transform(TrimVolume), KindVolume, func(old, cur any) bool {
				a, b := old.(*corev1.PersistentVolume), cur.(*corev1.PersistentVolume)
				return a.Status.Phase != b.Status.Phase || !equality.Semantic.DeepEqual(a.Spec, b.Spec)
			}},
		{&inf.StorageClasses, clientLW[*storagev1.StorageClassList](storage.StorageClasses(), ""), &storagev1.StorageClass{}, nil,
			transform(TrimStorageClass), KindStorageClass, func(old, cur any) bool { return true }},
		// Budgets are indexed by namespace for their lister.
		{&inf.Budgets, clientLW[*policyv1.PodDisruptionBudgetList](policy.PodDisruptionBudgets(""), ""), &policyv1.PodDisruptionBudget{},
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, transform(TrimBudget), KindBudget, budgetChangeRelevant},
	}
	return append(kinds, inf.draKinds(cs)...)
}

func newInformer(lw cache.ListerWatcher, obj runtime.Object, idx cache.Indexers) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{Indexers: idx})
}

func typedLW(list cache.ListWithContextFunc, w cache.WatchFuncWithContext) *cache.ListWatch {
	return &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: w}
}

// listWatcher is what a typed client-go client of one kind offers (core.Pods(""), core.Nodes(), ...).
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// clientLW lists and watches a kind through its typed client, with fieldSelector when not empty.
func clientLW[L runtime.Object](c listWatcher[L], fieldSelector string) *cache.ListWatch {
	return typedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if fieldSelector != "" {
				o.FieldSelector = fieldSelector
			}
			return c.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if fieldSelector != "" {
				o.FieldSelector = fieldSelector
			}
			return c.Watch(ctx, o)
		})
}

// crdLW lists and watches one of fairway's custom resources through a controller-runtime client.
func crdLW[L any, PL interface {
	*L
	client.ObjectList
}](c client.WithWatch) *cache.ListWatch {
	return typedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := PL(new(L))
			err := c.List(ctx, list, &client.ListOptions{Raw: &o})
			return list, err
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, PL(new(L)), &client.ListOptions{Raw: &o})
		})
}

func queueHandler(q *Queue, kind Kind, relevant func(old, cur any) bool) cache.ResourceEventHandler {
	key := func(obj any) (Key, bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return Key{}, false
		}
		return Key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if k, ok := key(obj); ok {
				q.Add(k, true)
			}
		},
		UpdateFunc: func(old, cur any) {
			if k, ok := key(cur); ok {
				q.Add(k, relevant(old, cur))
			}
		},
		DeleteFunc: func(obj any) {
			if k, ok := key(obj); ok {
				q.Add(k, true)
			}
		},
	}
}

// podChangeRelevant reports whether a pod update may change a decision: it was bound, started
// terminating, finished, changed its gates, labels or fairway annotations, or the gpu-agent
// changed its GPUIdle condition (a lender waking must send its GPU's loans back at once). A pod
// turning Running is not (the snapshot records it at the next cycle anyway).
func podChangeRelevant(old, cur any) bool {
	a, b := old.(*corev1.Pod), cur.(*corev1.Pod)
	terminal := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}
	return a.Spec.NodeName != b.Spec.NodeName || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		terminal(a) != terminal(b) || len(a.Spec.SchedulingGates) != len(b.Spec.SchedulingGates) ||
		!maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) || gpuIdleChanged(a, b) ||
		len(a.Status.ResourceClaimStatuses) != len(b.Status.ResourceClaimStatuses)
}

// gpuIdleChanged reports whether the GPUIdle condition of a pod differs between two versions in
// what the scheduler reads: its status or its transition time (a re-asserted condition, or one
// that flipped twice between updates, changes fairway.dev/gpu-idle-observed, which the
// comparison of annotations sees). The message is for people. It runs on every pod update, so
// it compares in place.
func gpuIdleChanged(a, b *corev1.Pod) bool {
	ca, cb := v1alpha1.GPUIdleConditionOf(a), v1alpha1.GPUIdleConditionOf(b)
	if ca == nil || cb == nil {
		return (ca == nil) != (cb == nil)
	}
	return ca.Status != cb.Status || !ca.LastTransitionTime.Equal(&cb.LastTransitionTime)
}

// claimChangeRelevant reports whether a claim update may change where its pods go: it was bound,
// given a node or a class, its phase changed (Bound, Lost), or it started terminating.
func claimChangeRelevant(old, cur any) bool {
	a, b := old.(*corev1.PersistentVolumeClaim), cur.(*corev1.PersistentVolumeClaim)
	return a.Spec.VolumeName != b.Spec.VolumeName || a.Status.Phase != b.Status.Phase ||
		a.Annotations[volumehelpers.AnnSelectedNode] != b.Annotations[volumehelpers.AnnSelectedNode] ||
		volumehelpers.GetPersistentVolumeClaimClass(a) != volumehelpers.GetPersistentVolumeClaimClass(b) ||
		(a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil)
}

// nodeChangeRelevant reports whether a node update changes what the snapshot reads.
func nodeChangeRelevant(old, cur any) bool {
	a, b := old.(*corev1.Node), cur.(*corev1.Node)
	return a.Spec.Unschedulable != b.Spec.Unschedulable || !maps.Equal(a.Labels, b.Labels) ||
		a.Annotations[v1alpha1.GPUInventoryAnnotation] != b.Annotations[v1alpha1.GPUInventoryAnnotation] ||
		!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable)
}

// budgetChangeRelevant reports whether a PodDisruptionBudget update changes what the snapshot
// reads: its selector, the disruptions it allows or the pods it counts as disrupted.
func budgetChangeRelevant(old, cur any) bool {
	a, b := old.(*policyv1.PodDisruptionBudget), cur.(*policyv1.PodDisruptionBudget)
	return a.Status.DisruptionsAllowed != b.Status.DisruptionsAllowed || !maps.Equal(a.Status.DisruptedPods, b.Status.DisruptedPods) ||
		!equality.Semantic.DeepEqual(a.Spec.Selector, b.Spec.Selector)
}

func generationChanged(old, cur any) bool {
	return old.(metav1.Object).GetGeneration() != cur.(metav1.Object).GetGeneration()
}

func indexPodGroup(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if pg := p.Annotations[v1alpha1.PodGroupAnnotation]; pg != "" {
		return []string{p.Namespace + "/" + pg}, nil
	}
	return nil, nil
}

func indexNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

func indexClaim(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	names := ClaimNames(p)
	for i, n := range names {
		names[i] = p.Namespace + "/" + n
	}
	return names, nil
}

func indexClaimClass(obj any) ([]string, error) {
	if c, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		return []string{volumehelpers.GetPersistentVolumeClaimClass(c)}, nil
	}
	return nil, nil
}

func indexVolumeClass(obj any) ([]string, error) {
	if v, ok := obj.(*corev1.PersistentVolume); ok {
		return []string{volumehelpers.GetPersistentVolumeClass(v)}, nil
	}
	return nil, nil
}

func indexPriorityClass(obj any) ([]string, error) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok && pg.Spec.PriorityClassName != "" {
		return []string{pg.Spec.PriorityClassName}, nil
	}
	return nil, nil
}

// NeedLeaderElection is false: every replica keeps its caches warm.
func (inf *Informers) NeedLeaderElection() bool { return false }

// Start runs the informers until ctx ends. It implements manager.Runnable.
func (inf *Informers) Start(ctx context.Context) error {
	all := inf.all()
	for _, i := range all {
		go i.RunWithContext(ctx)
	}
	synced := make([]cache.InformerSynced, len(all))
	for i, x := range all {
		synced[i] = x.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // stopped before the caches synced
	}
	inf.synced.Store(true)
	inf.log.Info("Caches synced", "pods", len(inf.Pods.GetStore().ListKeys()), "foreignPods", len(inf.ForeignPods.GetStore().ListKeys()),
		"nodes", len(inf.Nodes.GetStore().ListKeys()), "queues", len(inf.Queues.GetStore().ListKeys()), "podGroups", len(inf.PodGroups.GetStore().ListKeys()))
	<-ctx.Done()
	return nil
}

func (inf *Informers) all() []cache.SharedIndexInformer { return inf.informers }

// Synced reports whether every informer has synced once.
func (inf *Informers) Synced() bool { return inf.synced.Load() }

// AllKeys returns the key of every stored object, for a full rebuild of the snapshot.
func (inf *Informers) AllKeys() []Key {
	var out []Key
	add := func(kind Kind, s cache.Store) {
		for _, k := range s.ListKeys() {
			ns, name, _ := cache.SplitMetaNamespaceKey(k)
			out = append(out, Key{Kind: kind, Namespace: ns, Name: name})
		}
	}
	add(KindNode, inf.Nodes.GetStore())
	add(KindQueue, inf.Queues.GetStore())
	add(KindPodGroup, inf.PodGroups.GetStore())
	add(KindBudget, inf.Budgets.GetStore())
	add(KindDeviceClass, inf.DeviceClasses.GetStore())
	add(KindResourceSlice, inf.ResourceSlices.GetStore())
	add(KindResourceClaim, inf.ResourceClaims.GetStore())
	add(KindPod, inf.Pods.GetStore())
	add(KindPod, inf.ForeignPods.GetStore())
	add(KindPod, inf.PendingForeignPods.GetStore())
	slices.SortFunc(out, CompareKeys)
	return out
}

func get[T any](s cache.Store, key string) *T {
	obj, ok, err := s.GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	t, _ := obj.(*T)
	return t
}

func nsKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Pod returns a pod from either watch, nil when neither has it. The object is shared: never
// modify it.
func (inf *Informers) Pod(namespace, name string) *corev1.Pod {
	if p := get[corev1.Pod](inf.Pods.GetStore(), nsKey(namespace, name)); p != nil {
		return p
	}
	return get[corev1.Pod](inf.ForeignPods.GetStore(), nsKey(namespace, name))
}

// Node returns a node, or nil.
func (inf *Informers) Node(name string) *corev1.Node {
	return get[corev1.Node](inf.Nodes.GetStore(), name)
}

// NamespaceList returns the namespaces' names and labels. The objects are shared: never modify them.
func (inf *Informers) NamespaceList() []*corev1.Namespace {
	objs := inf.Namespaces.GetStore().List()
	out := make([]*corev1.Namespace, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Namespace))
	}
	return out
}

// Queue returns a Queue, or nil.
func (inf *Informers) Queue(name string) *v1alpha1.Queue {
	return get[v1alpha1.Queue](inf.Queues.GetStore(), name)
}

// PodGroup returns a PodGroup, or nil.
func (inf *Informers) PodGroup(namespace, name string) *v1alpha1.PodGroup {
	return get[v1alpha1.PodGroup](inf.PodGroups.GetStore(), nsKey(namespace, name))
}

// PriorityClass returns a PriorityClass, or nil.
func (inf *Informers) PriorityClass(name string) *schedulingv1.PriorityClass {
	return get[schedulingv1.PriorityClass](inf.PriorityClasses.GetStore(), name)
}

// Claim returns a PersistentVolumeClaim, or nil (VolumeLookup).
func (inf *Informers) Claim(namespace, name string) *corev1.PersistentVolumeClaim {
	return get[corev1.PersistentVolumeClaim](inf.Claims.GetStore(), nsKey(namespace, name))
}

// Volume returns a PersistentVolume, or nil (VolumeLookup).
func (inf *Informers) Volume(name string) *corev1.PersistentVolume {
	return get[corev1.PersistentVolume](inf.Volumes.GetStore(), name)
}

// Budget returns a PodDisruptionBudget, or nil.
func (inf *Informers) Budget(namespace, name string) *policyv1.PodDisruptionBudget {
	return get[policyv1.PodDisruptionBudget](inf.Budgets.GetStore(), nsKey(namespace, name))
}

// PodBudgets returns the PodDisruptionBudgets whose allowance evicting the pod would use, sorted:
// those whose selector matches the pod, less those that list the pod among their disrupted pods
// (the API server counted its eviction already; kube-scheduler's preemption skips them
// likewise). Matching is client-go's lister's, which is the API server's eviction's for
// policy/v1: a nil selector matches nothing, an empty one every pod of the namespace.
// kube-scheduler's preemption lets an empty selector match nothing; fairway follows the API
// server, which is what refuses the eviction.
func (inf *Informers) PodBudgets(p *corev1.Pod) []*policyv1.PodDisruptionBudget {
	if keys, err := inf.Budgets.GetIndexer().IndexKeys(cache.NamespaceIndex, p.Namespace); err != nil || len(keys) == 0 {
		return nil // the common case, asked at every pod update: no budget in the namespace
	}
	all, err := inf.budgets.GetPodPodDisruptionBudgets(p)
	if err != nil {
		return nil // none matches
	}
	out := all[:0]
	for _, b := range all {
		if _, disrupted := b.Status.DisruptedPods[p.Name]; !disrupted {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b *policyv1.PodDisruptionBudget) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PodsInNamespace returns fairway's pods of a namespace. The objects are shared.
func (inf *Informers) PodsInNamespace(namespace string) []*corev1.Pod {
	return inf.PodsByIndex(cache.NamespaceIndex, namespace)
}

// PodsByIndex returns fairway's pods under an index value (IndexPodGroup, IndexNode,
// IndexClaim). The objects are shared.
func (inf *Informers) PodsByIndex(index, value string) []*corev1.Pod {
	return byIndex[corev1.Pod](inf.Pods.GetIndexer(), index, value)
}

// PodGroupsByClass returns the PodGroups naming a priority class.
func (inf *Informers) PodGroupsByClass(class string) []*v1alpha1.PodGroup {
	return byIndex[v1alpha1.PodGroup](inf.PodGroups.GetIndexer(), IndexPriorityClass, class)
}

// StorageClass returns a StorageClass, or nil (VolumeLookup).
func (inf *Informers) StorageClass(name string) *storagev1.StorageClass {
	return get[storagev1.StorageClass](inf.StorageClasses.GetStore(), name)
}

// VolumesOfClass returns the volumes of a storage class, "" for none (VolumeLookup).
func (inf *Informers) VolumesOfClass(class string) []*corev1.PersistentVolume {
	return byIndex[corev1.PersistentVolume](inf.Volumes.GetIndexer(), IndexStorageClass, class)
}

// ClaimsOfClass returns the claims of a storage class, "" for none.
func (inf *Informers) ClaimsOfClass(class string) []*corev1.PersistentVolumeClaim {
	return byIndex[corev1.PersistentVolumeClaim](inf.Claims.GetIndexer(), IndexStorageClass, class)
}

// AnyNode reports whether some node satisfies match (VolumeLookup).
func (inf *Informers) AnyNode(match func(*corev1.Node) bool) bool {
	for _, o := range inf.Nodes.GetStore().List() {
		if n, ok := o.(*corev1.Node); ok && match(n) {
			return true
		}
	}
	return false
}

func byIndex[T any](idx cache.Indexer, index, value string) []*T {
	objs, err := idx.ByIndex(index, value)
	if err != nil {
		return nil
	}
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

var _ VolumeLookup = (*Informers)(nil)
