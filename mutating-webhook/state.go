package mutatingwebhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// queueNamespacesField indexes Queues by the namespaces they list, so that finding a pod's
// queue is a map lookup in the cache rather than a scan of every queue. queueSelectorField
// indexes the queues that also select namespaces by label (spec.namespaceSelector) under
// hasSelector: only those are matched against the namespace's labels.
const (
	queueNamespacesField = "spec.namespaces"
	queueSelectorField   = "spec.namespaceSelector"
	hasSelector          = "set"
)

// indexQueues registers the queueNamespacesField and queueSelectorField indexes on the cache.
func indexQueues(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &fairwayv1.Queue{}, queueNamespacesField, func(o client.Object) []string {
		return o.(*fairwayv1.Queue).Spec.Namespaces
	})
	if err != nil {
		return err
	}
	return indexer.IndexField(ctx, &fairwayv1.Queue{}, queueSelectorField, func(o client.Object) []string {
		if o.(*fairwayv1.Queue).Spec.NamespaceSelector != nil {
			return []string{hasSelector}
		}
		return nil
	})
}

// namespaceMeta is the metadata-only form in which the webhook watches namespaces (their
// labels, for spec.namespaceSelector).
func namespaceMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
}

// selectorQueues returns the queues that select namespaces by label, as matchers, and
// whether there are any. A queue whose selector is malformed (the CRD refuses empty ones; the
// API server cannot check the rest) serves its listed namespaces only.
func selectorQueues(ctx context.Context, reader client.Reader) (map[string]fairwayv1.NamespaceMatcher, error) {
	var list fairwayv1.QueueList
	if err := reader.List(ctx, &list, client.MatchingFields{queueSelectorField: hasSelector}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	out := make(map[string]fairwayv1.NamespaceMatcher, len(list.Items))
	for i := range list.Items {
		if m, err := fairwayv1.NewNamespaceMatcher(&list.Items[i].Spec); err == nil && m.HasSelector() {
			out[list.Items[i].Name] = m
		}
	}
	return out, nil
}

// cachedState is the ClusterState of a running webhook, read from the manager's informer cache:
// Queues (indexed by namespace), PriorityClasses, and the largest GPU memory over the nodes'
// metadata.
type cachedState struct {
	reader client.Reader
	gpus   *gpuMemoryIndex
}

var _ ClusterState = (*cachedState)(nil)

func (s *cachedState) QueuesServing(ctx context.Context, namespace string) ([]string, error) {
	var list fairwayv1.QueueList
	if err := s.reader.List(ctx, &list, client.MatchingFields{queueNamespacesField: namespace}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	selecting, err := selectorQueues(ctx, s.reader)
	if err != nil {
		return nil, err
	}
	if len(selecting) > 0 {
		ns := namespaceMeta()
		if err := s.reader.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
			return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
		}
		for name, m := range selecting {
			if !slices.Contains(names, name) && m.Serves(namespace, ns.Labels) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *cachedState) QueueExists(ctx context.Context, name string) (bool, error) {
	return exists(s.reader.Get(ctx, types.NamespacedName{Name: name}, &fairwayv1.Queue{}))
}

func (s *cachedState) QueueAdmit(ctx context.Context, name string) (fairwayv1.AdmitPolicy, error) {
	q := &fairwayv1.Queue{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: name}, q, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return fairwayv1.DefaultAdmitPolicy, nil
		}
		return "", err
	}
	return q.Spec.Admit.Effective(), nil
}

func (s *cachedState) QueuePolicies(ctx context.Context, name string) ([]fairwayv1.PolicyLevel, error) {
	return fairwayv1.PolicyChain(name, func(name string) (*fairwayv1.QueueSpec, error) {
		q := &fairwayv1.Queue{}
		// The policies are only read, so the cache's objects need no copy.
		if err := s.reader.Get(ctx, types.NamespacedName{Name: name}, q, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("reading queue %s: %w", name, err)
		}
		return &q.Spec, nil
	})
}

// Queue implements QueueReader from the cache.
func (s *cachedState) Queue(ctx context.Context, name string) (*fairwayv1.Queue, error) {
	q := &fairwayv1.Queue{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: name}, q); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return q, nil
}

func (s *cachedState) LargestGPUMemoryMiB() int64 { return s.gpus.largest() }

func (s *cachedState) PriorityClassExists(ctx context.Context, name string) (bool, error) {
	return exists(s.reader.Get(ctx, types.NamespacedName{Name: name}, &schedulingv1.PriorityClass{}))
}

func (s *cachedState) GlobalDefaultPriorityClass(ctx context.Context) (string, error) {
	var list schedulingv1.PriorityClassList
	if err := s.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing priority classes: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].GlobalDefault {
			return list.Items[i].Name, nil
		}
	}
	return "", nil
}

func exists(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// gpuMemoryIndex keeps the largest fairway.dev/gpu-memory label over all nodes, fed by a
// metadata-only node informer: node status churn never reaches it, and a request reads one
// number.
type gpuMemoryIndex struct {
	mu     sync.RWMutex
	byNode map[string]int64
	max    int64
}

func newGPUMemoryIndex() *gpuMemoryIndex { return &gpuMemoryIndex{byNode: map[string]int64{}} }

func (g *gpuMemoryIndex) largest() int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.max
}

// set records a node's GPU memory from its labels (0 or absent: no GPUs reported).
func (g *gpuMemoryIndex) set(node string, labels map[string]string) {
	mib, err := strconv.ParseInt(labels[fairwayv1.GPUMemoryLabel], 10, 64)
	if err != nil || mib < 0 {
		mib = 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.byNode[node]; ok && old == mib {
		return
	}
	if mib == 0 {
		delete(g.byNode, node)
	} else {
		g.byNode[node] = mib
	}
	g.recompute()
}

func (g *gpuMemoryIndex) remove(node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byNode, node)
	g.recompute()
}

func (g *gpuMemoryIndex) recompute() {
	g.max = 0
	for _, m := range g.byNode {
		g.max = max(g.max, m)
	}
}

// handler feeds the index from informer events on nodes as PartialObjectMetadata.
func (g *gpuMemoryIndex) handler() toolscache.ResourceEventHandler {
	meta := func(obj any) (metav1.Object, bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, ok := obj.(metav1.Object)
		return m, ok
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m, ok := meta(obj); ok {
				g.set(m.GetName(), m.GetLabels())
			}
		},
		UpdateFunc: func(_, obj any) {
			if m, ok := meta(obj); ok {
				g.set(m.GetName(), m.GetLabels())
			}
		},
		DeleteFunc: func(obj any) {
			if m, ok := meta(obj); ok {
				g.remove(m.GetName())
			}
		},
	}
}

// missingKindTTL is how long a kind the API server did not serve is answered from memory, so that
// pods naming a framework whose CRDs are not installed do not cost a discovery call each.
const missingKindTTL = 30 * time.Second

// cachedObjects is the adapters.ObjectReader of a running webhook: framework objects come from
// informers on unstructured objects, started for installed kinds at start-up (see warmInformers)
// and on first use otherwise. An object the informer has not seen is read once from the API
// server: a RayCluster's first pods are created a moment after the RayCluster itself, and the
// webhook's informer may lag the operator's by that moment.
type cachedObjects struct {
	cache   cache.Cache
	live    client.Reader
	mapper  meta.RESTMapper
	timeout time.Duration

	mu      sync.Mutex
	missing map[schema.GroupVersionKind]time.Time
}

var _ adapters.ObjectReader = (*cachedObjects)(nil)

func newCachedObjects(c cache.Cache, live client.Reader, mapper meta.RESTMapper, timeout time.Duration) *cachedObjects {
	return &cachedObjects{cache: c, live: live, mapper: mapper, timeout: timeout, missing: map[schema.GroupVersionKind]time.Time{}}
}

func (o *cachedObjects) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if !o.served(gvk) {
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, namespace, name, adapters.ErrKindNotInstalled)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := o.cache.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && o.live != nil {
		err = o.live.Get(ctx, key, obj)
	}
	if meta.IsNoMatchError(err) {
		o.markMissing(gvk)
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, namespace, name, adapters.ErrKindNotInstalled)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return obj, nil
}

// served reports whether the API server serves gvk, remembering a "no" for missingKindTTL.
func (o *cachedObjects) served(gvk schema.GroupVersionKind) bool {
	o.mu.Lock()
	at, known := o.missing[gvk]
	o.mu.Unlock()
	if known && time.Since(at) < missingKindTTL {
		return false
	}
	if _, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		o.markMissing(gvk)
		return false
	}
	return true
}

func (o *cachedObjects) markMissing(gvk schema.GroupVersionKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.missing[gvk] = time.Now()
}

// warmInformers starts the informers of the framework kinds the API server serves, once the
// manager's cache runs, so that the first pod of a workload is not the one that waits for a list.
type warmInformers struct {
	cache  cache.Cache
	mapper meta.RESTMapper
	kinds  []schema.GroupVersionKind
	log    logr.Logger
}

func (w *warmInformers) Start(ctx context.Context) error {
	if !w.cache.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	for _, gvk := range w.kinds {
		if _, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			w.log.V(1).Info("Framework kind not installed; its pods get no gang size until it is", "kind", gvk.String())
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if _, err := w.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			w.log.Error(err, "Starting informer", "kind", gvk.String())
			continue
		}
		w.log.V(1).Info("Watching framework kind", "kind", gvk.String())
	}
	return nil
}

// NeedLeaderElection: every replica serves admission, so every replica warms its cache.
func (w *warmInformers) NeedLeaderElection() bool { return false }
