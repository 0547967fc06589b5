package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fairway-sched/fairway/adapters/argo/runprofile"
	"github.com/fairway-sched/fairway/adapters/registry"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	schedruntime "github.com/fairway-sched/fairway/scheduler/runtime"
	"github.com/fairway-sched/fairway/scheduler/runtime/leasefence"
)

// schedulerFlags are the command-line settings of `fairway scheduler`.
type schedulerFlags struct {
	kubeconfig string
	// admissionKeyFile holds the webhook's admission key (runtime.Options.AdmissionKey).
	admissionKeyFile string
	qps              float32
	burst            int
	leaderElect      bool
	leaderID         string
	lease            time.Duration
	renew            time.Duration
	retry            time.Duration
	writeTimeout     time.Duration
	metricsAddr      string
	probeAddr        string
	pprofAddr        string
	placement        string
	loanGrace        time.Duration
	opts             schedruntime.Options
}

func newSchedulerCommand() *cobra.Command {
	f := &schedulerFlags{}
	// The defaults are the runtime's (schedruntime.DefaultOptions), written once there.
	d, de := schedruntime.DefaultOptions(), engine.DefaultOptions()
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run fairway's scheduler: gangs, queues with quotas and fair share, fractional GPUs",
		Long: `Run fairway's scheduler. It schedules the pods whose spec.schedulerName is fairway: it watches
them, the nodes, Queues, PodGroups and PriorityClasses, runs a scheduling cycle on every relevant
change (and every --cycle-period), binds pods, evicts for reclaim, preemption and consolidation,
holds shared GPUs with reservation pods, creates PodGroups and keeps Queue and PodGroup status.

Run two replicas: they elect a leader on a Lease in --namespace; the other keeps its caches warm
and takes over when the leader goes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			return runScheduler(ctrl.SetupSignalHandler(), f, log)
		},
	}
	fl := cmd.Flags()
	o := &f.opts
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig file; $KUBECONFIG, then the in-cluster configuration, when empty.")
	fl.StringVar(&o.Namespace, "namespace", d.Namespace, "fairway's namespace: the leader election Lease and the GPU reservation pods live there.")
	fl.StringVar(&f.admissionKeyFile, "admission-key-file", "", "File with the webhook's admission key (--admission-key-file of `fairway webhook`): only pods sealed with it are placed; the others wait with reason "+string(v1alpha1.ReasonNotAdmitted)+". Empty places pods without checking, for a scheduler run without the webhook.")
	fl.Float32Var(&f.qps, "kube-api-qps", 100, "QPS of each client talking to the API server (bindings and evictions; status; events).")
	fl.IntVar(&f.burst, "kube-api-burst", 200, "Burst of each client talking to the API server.")
	fl.BoolVar(&f.leaderElect, "leader-elect", true, "Elect a leader among replicas on a Lease; only the leader schedules.")
	fl.StringVar(&f.leaderID, "leader-elect-id", "fairway-scheduler", "Name of the leader election Lease.")
	fl.DurationVar(&f.lease, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the last renewal before taking over.")
	fl.DurationVar(&f.renew, "leader-elect-renew-deadline", 10*time.Second, "How long the leader tries to renew before it gives up leadership (and exits).")
	fl.DurationVar(&f.retry, "leader-elect-retry-period", 2*time.Second, "How often candidates try to acquire or renew the Lease.")
	fl.DurationVar(&f.writeTimeout, "write-timeout", 5*time.Second, "Server-side deadline of every binding, eviction and reservation write. With leader election, a write is sent only while it would end before the Lease could pass to another replica (package leasefence): it must be below the lease duration minus the retry period.")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":9410", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":9411", "Address of /healthz and /readyz; 0 disables them.")
	fl.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints; off when empty.")
	fl.DurationVar(&o.CyclePeriod, "cycle-period", d.CyclePeriod, "Longest time between two scheduling cycles.")
	fl.DurationVar(&o.Debounce, "cycle-debounce", d.Debounce, "How long a cycle waits after the first relevant change, to take the changes that come with it.")
	fl.IntVar(&o.BindWorkers, "bind-workers", d.BindWorkers, "Bindings in flight at most.")
	fl.IntVar(&o.EvictWorkers, "evict-workers", d.EvictWorkers, "Evictions in flight at most.")
	fl.DurationVar(&o.StatusInterval, "status-update-interval", d.StatusInterval, "How often Queue, PodGroup and waiting pods' status is written (only what changed).")
	fl.StringVar(&o.ReservationImage, "reservation-image", d.ReservationImage, "Image of the pods that hold shared GPUs for the kubelet.")
	fl.StringVar(&o.ReservationPriorityClass, "reservation-priority-class", d.ReservationPriorityClass, "Priority class of the GPU reservation pods.")
	fl.DurationVar(&o.ReservationTimeout, "reservation-timeout", d.ReservationTimeout, "How long a fractional binding waits for the node's gpu-agent to report the GPU of its reservation.")
	fl.DurationVar(&o.VolumeBindTimeout, "volume-bind-timeout", d.VolumeBindTimeout, "How long a placed pod waits for its PersistentVolumeClaims to be bound (a provisioner at work) before it goes back to pending; kube-scheduler's bindTimeoutSeconds.")
	fl.BoolVar(&o.NoHoldTaints, "no-hold-taints", false, "Leave nodes without the hold taint while capacity there is held for a gang (fairway.dev/held keeps other schedulers' pods off it); only where no other scheduler uses fairway's nodes.")
	// The flag's name before the hold taint was named so; kept for the command lines that use it.
	fl.BoolVar(&o.NoHoldTaints, "no-node-reservations", false, "Old name of --no-hold-taints.")
	if err := fl.MarkDeprecated("no-node-reservations", "use --no-hold-taints"); err != nil {
		panic(err) // the flag is defined just above
	}
	fl.DurationVar(&o.OrphanGrace, "orphan-pod-grace-period", d.OrphanGrace, "How long fairway's pods bound to a deleted node are left before they are deleted.")
	fl.DurationVar(&o.PipelineStageLead, "pipeline-stage-lead", d.PipelineStageLead, "How long before the steps before a GPU stage are expected to end the stage's capacity is held (Queue spec.pipelineAdmission Stages).")
	fl.DurationVar(&o.UsageHalfLife, "fair-share-usage-half-life", d.UsageHalfLife, "Fair share over time: keep each queue's usage with this half-life (in its status) and divide the capacity above guarantees against queues that used more than their weight entitles them to (docs/fair-share.md). 0: fair share from the current cycle alone.")
	fl.DurationVar(&o.UsageSyncPeriod, "fair-share-usage-sync-period", d.UsageSyncPeriod, "How often the usage history is written to the Queues' status: what a restart or a new leader may lose of it.")
	fl.Float64Var(&o.Engine.FairShareUsageWeight, "fair-share-usage-weight", de.FairShareUsageWeight, "How strongly recent usage moves fair share over time (k in docs/fair-share.md); only with --fair-share-usage-half-life.")
	fl.StringVar(&f.placement, "placement", string(de.Placement), "Node choice: binpack (fill nodes, keep whole nodes free for big gangs; where pods share GPUs, the node that fragments GPUs least) or spread.")
	fl.DurationVar(&o.Engine.EvictionGracePeriod, "eviction-grace-period", de.EvictionGracePeriod, "Grace period of an eviction of a pod whose spec sets no terminationGracePeriodSeconds (the API server always sets one); every other pod gets its own, capped by its queue's spec.maxEvictionGracePeriod.")
	fl.DurationVar(&f.loanGrace, "loan-return-grace-period", de.LoanReturnGracePeriod, "Grace period of a pod on loan on an idle notebook's GPU when the notebook does GPU work again (0: killed at once).")
	fl.DurationVar(&o.Engine.StaleGangGracePeriod, "stale-gang-grace-period", de.StaleGangGracePeriod, "How long a gang may run below its minimum before the rest of it is evicted.")
	fl.DurationVar(&o.Engine.StarvationThreshold, "starvation-threshold", de.StarvationThreshold, "How long a gang may wait before the capacity it needs is held for it (negative: never).")
	fl.DurationVar(&o.Engine.HoldTTL, "hold-ttl", de.HoldTTL, "How long capacity freed for a gang stays held if the gang is not placed.")
	gfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(gfs)
	fl.AddGoFlagSet(gfs)
	return cmd
}

func runScheduler(ctx context.Context, f *schedulerFlags, log logr.Logger) error {
	switch engine.Placement(f.placement) {
	case engine.BinPack, engine.Spread:
		f.opts.Engine.Placement = engine.Placement(f.placement)
	default:
		return fmt.Errorf("--placement must be %s or %s", engine.BinPack, engine.Spread)
	}
	switch {
	case f.loanGrace < 0:
		return fmt.Errorf("--loan-return-grace-period must not be negative")
	case f.loanGrace == 0:
		f.opts.Engine.LoanReturnGracePeriod = -1 // the engine's "none"; 0 would be its default
	default:
		f.opts.Engine.LoanReturnGracePeriod = f.loanGrace
	}
	switch {
	case f.opts.UsageHalfLife < 0:
		return fmt.Errorf("--fair-share-usage-half-life must not be negative (0 turns fair share over time off)")
	case f.opts.Engine.FairShareUsageWeight <= 0:
		return fmt.Errorf("--fair-share-usage-weight must be above 0, got %v", f.opts.Engine.FairShareUsageWeight)
	}
	cfg, err := restConfig(f.kubeconfig, "fairway-scheduler")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	// Built-in types travel as protobuf, as kube-scheduler's do; fairway's CRDs as JSON.
	proto := rest.CopyConfig(cfg)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	clientset := func() (kubernetes.Interface, error) { return kubernetes.NewForConfig(proto) }
	var c schedruntime.Clients
	fence, lock, err := f.leaseFence(cfg)
	if err != nil {
		return err
	}
	writes := rest.CopyConfig(proto)
	writes.Timeout = f.writeTimeout
	f.opts.WriteTimeout = f.writeTimeout
	if fence != nil {
		writes = fence.Config(proto)
	}
	if c.Scheduling, err = kubernetes.NewForConfig(writes); err != nil {
		return err
	}
	setup, err := clientset()
	if err != nil {
		return err
	}
	if c.Status, err = clientset(); err != nil {
		return err
	}
	if c.Events, err = clientset(); err != nil {
		return err
	}
	scheme := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if c.CRD, err = client.NewWithWatch(rest.CopyConfig(cfg), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if f.admissionKeyFile != "" {
		k, err := v1alpha1.LoadAdmissionKey(f.admissionKeyFile)
		if err != nil {
			return fmt.Errorf("--admission-key-file: %w", err)
		}
		f.opts.AdmissionKey = k
	}
	ensureNamespace(ctx, setup, f.opts.Namespace, log)

	f.opts.Log = log.WithName("scheduler")
	f.opts.GangShapers = registry.GangShapers(registry.All())
	f.opts.Pipelines = runprofile.Pipelines{}
	rt, err := schedruntime.New(c, f.opts)
	if err != nil {
		return err
	}
	mgrOpts := manager.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:        f.probeAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderID,
		LeaderElectionNamespace:       f.opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &f.lease,
		RenewDeadline:                 &f.renew,
		RetryPeriod:                   &f.retry,
		Logger:                        log,
	}
	if lock != nil {
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgrOpts.PprofBindAddress = f.pprofAddr
	mgr, err := manager.New(rest.CopyConfig(cfg), mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := rt.SetupWithManager(mgr, ctrlmetrics.Registry); err != nil {
		return err
	}
	if fence != nil {
		if err := mgr.Add(fence); err != nil {
			return err
		}
	}
	log.Info("Starting fairway scheduler", "namespace", f.opts.Namespace, "leaderElection", f.leaderElect, "qps", f.qps, "burst", f.burst)
	return mgr.Start(ctx)
}

// leaseFence returns the fence of the scheduler's writes and the leader election's lock that
// feeds it (nil, nil without leader election). The lock is the one controller-runtime would
// make (a Lease named --leader-elect-id, a hostname_uuid identity, a client timeout of half the
// renew deadline), wrapped so that the fence sees every renewal.
func (f *schedulerFlags) leaseFence(cfg *rest.Config) (*leasefence.Fence, resourcelock.Interface, error) {
	if f.writeTimeout <= 0 {
		return nil, nil, fmt.Errorf("--write-timeout must be above 0, got %v", f.writeTimeout)
	}
	if !f.leaderElect {
		return nil, nil, nil
	}
	if f.writeTimeout >= f.lease-f.retry {
		return nil, nil, fmt.Errorf("--write-timeout (%v) must be below --leader-elect-lease-duration (%v) minus --leader-elect-retry-period (%v): a write is sent only while it ends before the Lease could pass on", f.writeTimeout, f.lease, f.retry)
	}
	fence, err := leasefence.New(f.writeTimeout, f.lease, nil)
	if err != nil {
		return nil, nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, nil, fmt.Errorf("naming this replica for the leader election: %w", err)
	}
	lc := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	lc.Timeout = max(f.renew/2, time.Second)
	cs, err := kubernetes.NewForConfig(lc)
	if err != nil {
		return nil, nil, err
	}
	// Like controller-runtime's, the lock records "became leader" events on the Lease.
	id := host + "_" + string(uuid.NewUUID())
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(f.opts.Namespace)})
	l, err := resourcelock.New(resourcelock.LeasesResourceLock, f.opts.Namespace, f.leaderID, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: id})})
	if err != nil {
		return nil, nil, fmt.Errorf("making the leader election's lock: %w", err)
	}
	return fence, fence.Lock(l), nil
}

// ensureNamespace creates fairway's namespace when it is missing (the chart creates it; a
// developer running the scheduler against a fresh cluster may not have). Failures are left to
// the leader election, which reports them.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string, log logr.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		log.Info("Could not create fairway's namespace", "namespace", name, "err", err.Error())
	}
}
