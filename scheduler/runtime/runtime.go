package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/runtime/holdtaint"
	"github.com/fairway-sched/fairway/scheduler/runtime/metrics"
	"github.com/fairway-sched/fairway/scheduler/runtime/pipelines"
	"github.com/fairway-sched/fairway/scheduler/runtime/podgroups"
	"github.com/fairway-sched/fairway/scheduler/runtime/status"
	"github.com/fairway-sched/fairway/scheduler/runtime/volumebinder"
)

// Clients are the API clients of the runtime. Each has its own rate limiter, as in
// kube-scheduler, so that status writes and events never slow bindings down.
type Clients struct {
	// Scheduling binds, evicts and manages reservations and GPU ConfigMaps.
	Scheduling kubernetes.Interface
	// Status writes waiting pods' conditions and serves the informers.
	Status kubernetes.Interface
	// Events records events (events.k8s.io).
	Events kubernetes.Interface
	// CRD lists and watches Queues and PodGroups, creates PodGroups and writes their status.
	CRD client.WithWatch
}

// Runtime is the scheduler process around the engine: informers, the scheduling loop, the
// binder, the evictor, GPU reservations, PodGroups, status and metrics. Every long-lived part is
// a manager.Runnable; SetupWithManager adds them.
type Runtime struct {
	opts Options

	queue     *cache.Queue
	inf       *cache.Informers
	gpu       *gpushare.Manager
	binder    *binder.Binder
	volumes   *volumebinder.Binder
	evictor   *evictor.Evictor
	holdTaint *holdtaint.Reconciler
	pgs       *podgroups.Controller
	status    *status.Writer
	metrics   *metrics.Metrics
	loop      *loop
	// runs are the pipeline runs held for pipeline admission; nil until SetupWithManager.
	runs *pipelines.Runs
	// ext is the loop's extension (Extension): runs, once set; nil before.
	ext Extension

	broadcaster events.EventBroadcaster
	recorder    events.EventRecorderLogger
	events      *eventSink
}

// New wires a runtime. Nothing runs until the manager starts it.
func New(c Clients, opts Options) (*Runtime, error) {
	opts = opts.withDefaults()
	log := opts.Log
	r := &Runtime{opts: opts, queue: cache.NewQueue(), metrics: metrics.New()}
	var err error
	if r.inf, err = cache.New(c.Status, c.CRD, r.queue, log.WithName("cache")); err != nil {
		return nil, err
	}
	r.broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: c.Events.EventsV1()})
	r.recorder = r.broadcaster.NewRecorder(scheme(), "fairway-scheduler")
	sink := &eventSink{rec: r.recorder}
	r.events = sink
	r.gpu = gpushare.New(c.Scheduling, r.inf, gpushare.Options{
		Namespace: opts.Namespace, Image: opts.ReservationImage, PriorityClassName: opts.ReservationPriorityClass,
		Timeout: opts.ReservationTimeout, Settle: opts.WriteTimeout, Log: log.WithName("gpushare"),
	})
	r.binder = binder.New(c.Scheduling, r.queue.Report, binder.Options{
		Workers: opts.BindWorkers, GPU: r.gpu, Observer: &bindObserver{m: r.metrics, events: sink}, Log: log.WithName("binder"),
		ClaimConflict: r.inf.ClaimConflict, Settle: opts.WriteTimeout, Pods: r.inf,
	})
	r.volumes = volumebinder.New(c.Scheduling, r.inf, r.binder.Submit, r.queue.Report, volumebinder.Options{
		Timeout: opts.VolumeBindTimeout, Observer: &bindObserver{m: r.metrics, events: sink}, Log: log.WithName("volumes"),
		Waiting: sink.WaitingForVolumes,
	})
	r.holdTaint = holdtaint.New(c.Scheduling, r.inf.Node, log.WithName("holdtaint"))
	evOpts := evictor.Options{
		Workers: opts.EvictWorkers, Events: sink, Observer: &evictObserver{m: r.metrics}, Log: log.WithName("evictor"),
		Transient: binder.Transient, HoldTaint: r.holdTaint.Ensure,
	}
	if opts.NoHoldTaints {
		evOpts.HoldTaint = nil
	}
	r.evictor = evictor.New(c.Scheduling, r.queue.Report, evOpts)
	if r.pgs, err = podgroups.New(c.CRD, r.inf, podgroups.Options{AdmissionKey: opts.AdmissionKey, Log: log.WithName("podgroups")}); err != nil {
		return nil, err
	}
	r.status = status.NewWriter(c.CRD, c.Status, r.inf, status.Options{Interval: opts.StatusInterval, Log: log.WithName("status")})
	r.loop = newLoop(r, c.Status)
	r.metrics.SetPods(r.podInfos)
	return r, nil
}

// Metrics returns the runtime's metrics.
func (r *Runtime) Metrics() *metrics.Metrics { return r.metrics }

// SetupWithManager adds every part of the runtime to mgr, registers the metrics with reg, and
// adds the readiness check: ready once the caches have synced and, on the leader, once the
// snapshot has been built from them.
func (r *Runtime) SetupWithManager(mgr manager.Manager, reg prometheus.Registerer) error {
	if err := r.metrics.Register(reg); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the client of framework objects: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	// The optional kinds' watchers look up kinds that may never be served; the probe keeps each
	// look-up from reloading the whole discovery (cache.ProbeServed).
	mapper := cache.ProbeServed(mgr.GetRESTMapper(), dc)
	r.runs = pipelines.New(dyn, mapper, r.queue, pipelines.Options{
		Events: r.recorder, Log: r.opts.Log.WithName("pipelines"), StageLead: r.opts.PipelineStageLead, Engine: r.opts.Pipelines,
		Priority: func(class string) *int32 {
			if pc := r.inf.PriorityClass(class); pc != nil {
				v := pc.Value
				return &v
			}
			return nil
		},
	})
	r.ext = r.runs
	runs := []manager.Runnable{r.inf, r.loop, r.binder, r.volumes, r.evictor, r.holdTaint, r.gpu, r.pgs, r.status, manager.RunnableFunc(r.runEvents), r.runs}
	if len(r.opts.GangShapers) > 0 {
		f, err := podgroups.NewFollower(r.pgs.Client(), dyn, mapper, r.inf, r.opts.GangShapers,
			podgroups.FollowerOptions{Log: r.opts.Log.WithName("podgroup-owners")})
		if err != nil {
			return err
		}
		runs = append(runs, f)
	}
	for _, run := range runs {
		if err := mgr.Add(run); err != nil {
			return err
		}
	}
	elected := mgr.Elected()
	if err := mgr.AddReadyzCheck("scheduler", func(*http.Request) error {
		if !r.inf.Synced() {
			return errors.New("caches not synced")
		}
		select {
		case <-elected:
			if !r.loop.built.Load() {
				return errors.New("leader: snapshot not built yet")
			}
		default:
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil })
}

// runEvents sends recorded events to the API server until ctx ends (every replica: only the
// leader records any).
func (r *Runtime) runEvents(ctx context.Context) error {
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	r.broadcaster.Shutdown()
	return nil
}

// Informers returns the runtime's informers (for tests and tools).
func (r *Runtime) Informers() *cache.Informers { return r.inf }
