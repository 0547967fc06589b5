package console

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/console/view"
)

// Store is what the console reads: a snapshot of its objects, and a counter of their changes.
type Store interface {
	// Snapshot lists every object the pages show. The objects are shared: read only.
	Snapshot(ctx context.Context) (*view.Snapshot, error)
	// Generation grows with every change of those objects.
	Generation() uint64
}

// SchedulerEventsController is the reporting controller of the scheduler's events, which the
// console's cache selects: its evictions are read from them.
const SchedulerEventsController = "fairway-scheduler"

// CacheStore is a Store over one controller-runtime informer cache, shared with nothing that
// writes: Queues, PodGroups, Pods, Nodes, PriorityClasses and the scheduler's events.
type CacheStore struct {
	cache cache.Cache
	gen   atomic.Uint64
	now   func() time.Time
}

// cachedTypes are the objects the console's cache watches.
func cachedTypes() []client.Object {
	return []client.Object{&fairwayv1.Queue{}, &fairwayv1.PodGroup{}, &corev1.Pod{}, &corev1.Node{},
		&schedulingv1.PriorityClass{}, &eventsv1.Event{}}
}

// NewCacheStore builds the cache. Start must run before Snapshot answers.
func NewCacheStore(cfg *rest.Config, scheme *runtime.Scheme) (*CacheStore, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		// Managed fields are half of an object's size and no page shows them.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&eventsv1.Event{}: {Field: fields.OneTermEqualSelector("reportingController", SchedulerEventsController)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the console's cache: %w", err)
	}
	return &CacheStore{cache: c, now: time.Now}, nil
}

// Start runs the informers until ctx ends, and returns once they have synced (or failed to).
func (s *CacheStore) Start(ctx context.Context) error {
	bump := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.gen.Add(1) },
		UpdateFunc: func(any, any) { s.gen.Add(1) },
		DeleteFunc: func(any) { s.gen.Add(1) },
	}
	for _, obj := range cachedTypes() {
		inf, err := s.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(bump); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- s.cache.Start(ctx) }()
	if !s.cache.WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("the console's cache stopped: %w", err)
		default:
			return fmt.Errorf("the console's cache did not sync: %w", context.Cause(ctx))
		}
	}
	return nil
}

// Generation counts the cache's changes.
func (s *CacheStore) Generation() uint64 { return s.gen.Load() }

// Snapshot lists the cache without copying the objects (they are read only).
func (s *CacheStore) Snapshot(ctx context.Context) (*view.Snapshot, error) {
	var (
		queues fairwayv1.QueueList
		pgs    fairwayv1.PodGroupList
		pods   corev1.PodList
		nodes  corev1.NodeList
		pcs    schedulingv1.PriorityClassList
		events eventsv1.EventList
	)
	for _, l := range []client.ObjectList{&queues, &pgs, &pods, &nodes, &pcs, &events} {
		if err := s.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %T from the cache: %w", l, err)
		}
	}
	return &view.Snapshot{Queues: queues.Items, PodGroups: pgs.Items, Pods: pods.Items, Nodes: nodes.Items,
		PriorityClasses: pcs.Items, Events: events.Items, Now: s.now()}, nil
}
