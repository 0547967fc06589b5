package runtime

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/scheduler/runtime/pipelines"
)

// Options configure the scheduler runtime. Zero fields take the defaults documented on them.
type Options struct {
	// Namespace is fairway's own namespace: reservation pods live there. Default fairway-system.
	Namespace string
	// AdmissionKey, when set, places only pending pods sealed by the webhook with it
	// (snapshot.Snapshot.SetAdmissionKey).
	AdmissionKey v1alpha1.AdmissionKey

	// CyclePeriod is the longest time between two cycles. Default 1s.
	CyclePeriod time.Duration
	// Debounce is how long a cycle waits after the first relevant event, to take the events
	// that come with it. Default 20ms.
	Debounce time.Duration

	// BindWorkers bound the bindings in flight. Default binder.DefaultWorkers (32).
	BindWorkers int
	// EvictWorkers bound the evictions in flight. Default evictor.DefaultWorkers (32).
	EvictWorkers int
	// WriteTimeout is the server-side deadline of the scheduling client's writes
	// (--write-timeout): a binding whose answer was lost is looked at this long after, when it
	// can no longer land (binder.Options.Settle). Default binder.DefaultSettle.
	WriteTimeout time.Duration

	// StatusInterval is how often Queue, PodGroup and waiting pods' status is written (only what
	// changed). Default 2s.
	StatusInterval time.Duration

	// UsageHalfLife turns on fair share over time: each queue's usage is kept with this
	// half-life (package usage) in its status, and the engine divides the capacity above
	// guarantees against queues that used more than their weight entitles them to. Default 0:
	// fair share from the current cycle alone.
	UsageHalfLife time.Duration
	// UsageSyncPeriod is how often the usage history is written to the Queues' status: what a
	// restart or a new leader may lose of it. Default 1m.
	UsageSyncPeriod time.Duration

	// ReservationImage is the image of reservation pods. Default v1alpha1.DefaultReservationImage.
	ReservationImage string
	// ReservationPriorityClass is the priority class of reservation pods. Default
	// system-node-critical.
	ReservationPriorityClass string
	// ReservationTimeout bounds the wait for a gpu-agent to report a new reservation's GPU;
	// the binding is then given up and retried in a later cycle. Default 60s.
	ReservationTimeout time.Duration

	// VolumeBindTimeout bounds the wait for the claims of a placed pod to be bound (a
	// provisioner at work); its gang then goes back to pending. Default 10m, kube-scheduler's
	// bindTimeoutSeconds.
	VolumeBindTimeout time.Duration

	// OrphanGrace is how long fairway's pods (and reservations) bound to a deleted node are left
	// before the runtime deletes them, so their gangs are handled and their owners re-create
	// them. Default 30s.
	OrphanGrace time.Duration

	// PipelineStageLead is how long before the expected end of the steps before a GPU stage a
	// Staged run's stage is held (pipelineAdmission Stages; pipelines.Options.StageLead).
	// Default 1m.
	PipelineStageLead time.Duration

	// NoHoldTaints leaves nodes without the hold taint while capacity is held on them for a
	// gang: only for clusters where no other scheduler places pods on fairway's nodes
	// (docs/coexistence.md).
	NoHoldTaints bool

	// GangShapers are the adapters whose gangs follow their owner objects (podgroups.Follower);
	// the scheduler binary passes every adapter of adapters/registry that implements
	// adapters.GangShaper. Nil: gangs keep the size their pods were admitted with.
	GangShapers []adapters.GangShaper

	// Pipelines is the pipeline engine whose runs pipeline admission holds and stages
	// (pipelines.Engine); the scheduler binary passes the Argo adapter's runprofile.Pipelines.
	// Nil: no run is held or staged.
	Pipelines pipelines.Engine

	// Engine configures the scheduling engine; its Logger defaults to Log, and
	// SharesNeedInventory is always set (fractional pods go only to nodes with a gpu-agent).
	Engine engine.Options

	Log logr.Logger

	// Clock is the scheduling loop's clock: its cycle period and debounce, the time it gives
	// the engine, and its side jobs' grace periods. Nil: the wall clock. Tests set a fake one
	// (k8s.io/utils/clock/testing) and step it instead of sleeping. The workers (binder,
	// evictor, reservation manager) keep the wall clock: their waits are on the API server.
	Clock clock.WithTicker
}

// DefaultOptions are the defaults documented on Options: the one place they are written. The
// scheduler's flags take their defaults from it.
func DefaultOptions() Options { return Options{}.withDefaults() }

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = v1alpha1.DefaultNamespace
	}
	if o.CyclePeriod <= 0 {
		o.CyclePeriod = time.Second
	}
	if o.Debounce <= 0 {
		o.Debounce = 20 * time.Millisecond
	}
	if o.BindWorkers <= 0 {
		o.BindWorkers = binder.DefaultWorkers
	}
	if o.EvictWorkers <= 0 {
		o.EvictWorkers = evictor.DefaultWorkers
	}
	if o.UsageSyncPeriod <= 0 {
		o.UsageSyncPeriod = time.Minute
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 2 * time.Second
	}
	if o.ReservationImage == "" {
		o.ReservationImage = v1alpha1.DefaultReservationImage
	}
	if o.ReservationPriorityClass == "" {
		o.ReservationPriorityClass = "system-node-critical"
	}
	if o.ReservationTimeout <= 0 {
		o.ReservationTimeout = time.Minute
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = 30 * time.Second
	}
	if o.PipelineStageLead <= 0 {
		o.PipelineStageLead = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Engine.Logger.GetSink() == nil {
		o.Engine.Logger = o.Log.WithName("engine")
	}
	// The device of a shared GPU comes from the node's gpu-agent: shares go where one runs.
	o.Engine.SharesNeedInventory = true
	return o
}
