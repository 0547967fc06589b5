//go:build cgo

package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/metrics"
	"github.com/fairway-sched/fairway/gpu-agent/mps"
	"github.com/fairway-sched/fairway/gpu-agent/mpsvolume"
	"github.com/fairway-sched/fairway/gpu-agent/publish"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
	"github.com/fairway-sched/fairway/gpu-agent/swap"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// rediscoverEvery is the shortest time between two discoveries asked for by the usage monitor
// (a GPU started or stopped failing), so a device that fails only some queries cannot make
// discovery run at every poll.
const rediscoverEvery = 5 * time.Second

// Agent is one gpu-agent: the state its parts share.
type Agent struct {
	opts   Options
	lib    *Library
	log    logr.Logger
	errors metrics.ErrorCounts
	mps    *mpsvolume.Driver
	kick   chan struct{}
	// swap is nil without --swap (or without the driver's checkpoint API); swapped is its
	// latest bytes on the host per pod UID (under mu).
	swap    *swap.Controller
	swapped map[string]int64

	// lastDeviceErrors is what the previous discovery reported, and downLogged whether the
	// current NVML outage was logged; both owned by the discovery loop.
	lastDeviceErrors string
	downLogged       bool

	mu          sync.RWMutex
	initialized bool
	nvmlUp      bool
	nvmlErr     error
	inventory   *fairwayv1alpha1.GPUInventory
	publishedAt time.Time
	// shareGPUs are the GPUs the share device plugin offers (not those in MIG mode), from
	// the latest discovery; share is that plugin, nil when the agent serves none.
	shareGPUs []shareplugin.GPU
	share     *shareplugin.Plugin

	// node reads the agent's node and allocatable lists the nvidia.com/gpu devices the kubelet
	// can hand out: the evidence of time-slicing replicas (discovery.Replicas). lastReplicas is
	// the reason last logged; both owned by the discovery loop.
	node         func(ctx context.Context) (*corev1.Node, error)
	allocatable  func(ctx context.Context) ([]string, error)
	lastReplicas string
	// kernelLimits is, per GPU UUID, whether its driver limits a cgroup's memory, as last
	// logged; owned by the discovery loop.
	kernelLimits map[string]bool
}

// newManager is the agent's controller-runtime manager: its caches see only the agent's own node
// and the pods bound to it.
func newManager(cfg *rest.Config, opts Options, log logr.Logger) (manager.Manager, error) {
	mgr, err := manager.New(cfg, manager.Options{
		Scheme: clientgoscheme.Scheme,
		Logger: log,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Field: fields.OneTermEqualSelector("spec.nodeName", opts.NodeName)},
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName)},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"}, // served from the agent's private registry
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// livePods lists the node's pods that have not ended, from c's cache.
func livePods(c client.Client) func(ctx context.Context) ([]corev1.Pod, error) {
	return func(ctx context.Context) ([]corev1.Pod, error) {
		var l corev1.PodList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		out := l.Items[:0]
		for _, p := range l.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

// runAssigner runs the assigner, woken by every change of a pod of the node: each may be a
// reservation the kubelet just admitted.
func runAssigner(mgr manager.Manager, assigner *assign.Assigner) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("pod informer: %w", err)
		}
		trigger := func(any) { assigner.Trigger() }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: trigger, UpdateFunc: func(_, o any) { trigger(o) }, DeleteFunc: trigger,
		}); err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
		return assigner.Start(ctx)
	})
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options, log logr.Logger) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	lib, err := OpenLibrary(&opts)
	if err != nil {
		return err
	}
	a := &Agent{opts: opts, lib: lib, log: log, kick: make(chan struct{}, 1)}
	log.Info("Starting gpu-agent", "node", opts.NodeName, "nvml", opts.NVML, "mps", opts.MPS,
		"usageInterval", opts.UsageInterval.String(), "idleThreshold", opts.IdleThreshold, "idleAfter", opts.IdleAfter.String())

	mgr, err := newManager(cfg, opts, log)
	if err != nil {
		return err
	}
	c := mgr.GetClient()
	pods := livePods(c)

	lister, err := assign.Dial(opts.PodResourcesSocket)
	if err != nil {
		return err
	}
	defer lister.Close()
	a.node = func(ctx context.Context) (*corev1.Node, error) {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: opts.NodeName}, &n); err != nil {
			return nil, fmt.Errorf("reading node %s: %w", opts.NodeName, err)
		}
		return &n, nil
	}
	a.allocatable = func(ctx context.Context) ([]string, error) {
		return lister.Allocatable(ctx, fairwayv1alpha1.ResourceGPU)
	}
	assigner := assign.New(lister, c, assign.Options{Pods: pods, Inventory: a.Inventory, Namespace: opts.Namespace, Log: log.WithName("assign")})
	writer := usage.NewConditionWriter(c, log.WithName("idleness"))
	swapWriter := swap.NewPodWriter(c, mgr.GetEventRecorder("fairway-gpu-agent"), log.WithName("swap"))
	swapper, err := a.newSwapper(swapWriter, pods, func(p *corev1.Pod) []int { return a.podGPUs(assigner, p) })
	if err != nil {
		return err
	}
	monitorOpts := usage.MonitorOptions{
		Interval: opts.UsageInterval,
		Tracker: usage.TrackerConfig{
			ThresholdPercent:  opts.IdleThreshold,
			IdleAfter:         opts.IdleAfter,
			MemoryGrowthBytes: 1 << 20,
		},
		Pods:       pods,
		PodGPUs:    func(p *corev1.Pod) []int { return a.podGPUs(assigner, p) },
		Inventory:  a.Inventory,
		Conditions: writer,
		OnSample:   a.onSample,
		Log:        log.WithName("usage"),
	}
	if swapper != nil {
		monitorOpts.Work, monitorOpts.OnPoll = swapper.ctl.Work, swapper.onPoll
		a.swap = swapper.ctl
	}
	monitor := usage.NewMonitor(usage.NewSampler(lib, lib.Resolver), monitorOpts)
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the agent's binary: %w", err)
	}
	a.mps = mpsvolume.New(mpsvolume.Options{
		NodeName:     opts.NodeName,
		Root:         opts.MPSDirectory,
		Pods:         pods,
		GPUMemoryMiB: a.gpuMemoryMiB,
		MPS:          mps.Options{Enabled: opts.MPS},
		Launcher:     func(dir string) func(string, ...string) *exec.Cmd { return mps.SharedMemoryLauncher(self, dir) },
		Log:          log.WithName("mps"),
	})
	publisher := publish.New(c, publish.Options{
		NodeName:    opts.NodeName,
		Refresh:     opts.RefreshInterval,
		OwnedLabels: discovery.OwnedLabels,
		Reader:      mgr.GetAPIReader(),
		Log:         log.WithName("publish"),
	})
	collector := metrics.NewCollector(func() metrics.State { return a.metricsState(monitor) })

	runnables := []manager.Runnable{
		writer,
		monitor,
		manager.RunnableFunc(func(ctx context.Context) error { return a.runDiscovery(ctx, c, publisher) }),
		runAssigner(mgr, assigner),
	}
	if swapper != nil {
		runnables = append(runnables, swapWriter, swapper.runnable())
	}
	if opts.CSIEndpoint != "" {
		runnables = append(runnables, manager.RunnableFunc(func(ctx context.Context) error {
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return nil
			}
			return a.mps.Serve(ctx, mpsvolume.Sockets{CSI: opts.CSIEndpoint, RegistrationDir: opts.PluginRegistrationDir})
		}))
	}
	if opts.DevicePluginDir != "" {
		r, err := a.sharePlugin(mgr, pods, lister)
		if err != nil {
			return err
		}
		runnables = append(runnables, r)
	}
	if opts.MetricsBindAddress != "0" {
		runnables = append(runnables, metricsServer(opts.MetricsBindAddress, collector, swapper, log))
	}
	if lib.Fake != nil && opts.MockControlAddress != "" {
		runnables = append(runnables, serve("mock control", opts.MockControlAddress, lib.Fake.Handler(), log))
	}
	return a.start(ctx, mgr, runnables)
}

// metricsServer serves the agent's metrics (and the swapper's, when it runs) on /metrics.
func metricsServer(addr string, collector *metrics.Collector, swapper *swapper, log logr.Logger) manager.Runnable {
	var more []prometheus.Collector
	if swapper != nil {
		more = swapper.metrics.Collectors()
	}
	h := promhttp.HandlerFor(metrics.NewRegistry(collector, more...), promhttp.HandlerOpts{})
	return serve("metrics", addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), log)
}

// start adds the runnables and the health checks to mgr and runs it until ctx ends.
func (a *Agent) start(ctx context.Context, mgr manager.Manager, runnables []manager.Runnable) error {
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return fmt.Errorf("adding runnable: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("nvml", func(*http.Request) error { return a.nvmlReady() }); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// gpuMemoryMiB is the memory of the node's GPU of that UUID, 0 when the inventory has none.
func (a *Agent) gpuMemoryMiB(uuid string) int64 {
	if inv := a.Inventory(); inv != nil {
		for _, g := range inv.GPUs {
			if g.UUID == uuid {
				return g.MemoryMiB
			}
		}
	}
	return 0
}

// Inventory returns the latest discovered inventory, nil before the first discovery.
func (a *Agent) Inventory() *fairwayv1alpha1.GPUInventory {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.inventory
}

func (a *Agent) nvmlReady() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if !a.nvmlUp {
		if a.nvmlErr != nil {
			return a.nvmlErr
		}
		return errors.New("NVML not initialised yet")
	}
	return nil
}

func (a *Agent) rediscover() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// runDiscovery discovers and publishes every refresh period, and soon after the usage monitor
// or the MPS daemon reports a change.
func (a *Agent) runDiscovery(ctx context.Context, c client.Client, p *publish.Publisher) error {
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: a.opts.NodeName}, &node); err == nil {
		// What the previous agent published: lost GPUs keep their UUIDs across a restart.
		if prev, err := publish.Parse(node.Annotations[fairwayv1alpha1.GPUInventoryAnnotation]); err == nil && prev != nil {
			a.mu.Lock()
			a.inventory = prev
			a.mu.Unlock()
		}
	}
	t := time.NewTicker(a.opts.RefreshInterval)
	defer t.Stop()
	var last time.Time
	for {
		last = time.Now()
		a.discoverAndPublish(ctx, p)
		select {
		case <-ctx.Done():
			if a.initialized {
				_ = a.lib.Shutdown()
			}
			return nil
		case <-t.C:
		case <-a.kick:
			if wait := rediscoverEvery - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					continue
				case <-time.After(wait):
				}
			}
		}
	}
}

func (a *Agent) discoverAndPublish(ctx context.Context, p *publish.Publisher) {
	if !a.initialized {
		if err := a.lib.Init(); err != nil {
			a.nvmlDown(ctx, p, fmt.Errorf("initialising NVML: %w", Explain(err)))
			return
		}
		a.initialized = true
	}
	res, err := discovery.Discover(a.lib, discovery.Options{NodeName: a.opts.NodeName, Previous: a.Inventory()})
	if err != nil {
		// The driver went away: start over with Init next time.
		_ = a.lib.Shutdown()
		a.initialized = false
		a.nvmlDown(ctx, p, err)
		return
	}
	a.errors.Add(res.DeviceErrors...)
	// Log device failures when they change, not at every pass while a GPU stays lost.
	msg := ""
	if err := errors.Join(res.DeviceErrors...); err != nil {
		msg = err.Error()
	}
	if msg != a.lastDeviceErrors {
		if msg == "" {
			a.log.Info("Every GPU answers NVML again")
		}
		a.lastDeviceErrors = msg
		for _, err := range res.DeviceErrors {
			a.log.Error(err, "GPU query failed", "code", gpu.Code(err))
		}
	}
	inv := res.Inventory
	inv.Replicas = a.replicas(ctx, &inv)
	inv.MPS = a.mps.Available().Enabled
	inv.RefreshSeconds = int32(a.opts.RefreshInterval / time.Second)
	a.kernelMemoryLimits(&inv)
	a.downLogged = false
	a.mu.Lock()
	if !a.nvmlUp {
		a.log.Info("NVML up", "driver", inv.Driver, "gpus", len(inv.GPUs))
	}
	a.nvmlUp, a.nvmlErr, a.inventory = true, nil, &inv
	a.shareGPUs = shareGPUs(&inv, res.Minors)
	a.mu.Unlock()
	a.refreshShares()
	a.publish(ctx, p, discovery.Labels(&inv, res.NVLinkDomain), inv)
}

// replicas is how many times the device plugin advertises each GPU of inv (discovery.Replicas),
// so that the scheduler counts the node's physical GPUs rather than one per time-slicing replica.
// What cannot be read this pass (the node not in the cache yet, a kubelet without
// GetAllocatableResources) is no evidence; when neither source answers, the previous inventory's
// count stands, so that a transient failure does not hand the scheduler replicas as GPUs.
func (a *Agent) replicas(ctx context.Context, inv *fairwayv1alpha1.GPUInventory) int32 {
	if a.node == nil || a.allocatable == nil {
		return 0
	}
	node, nodeErr := a.node(ctx)
	ids, kubeletErr := a.allocatable(ctx)
	if kubeletErr != nil {
		a.log.V(1).Info("The kubelet does not list allocatable devices; telling time-slicing by the node alone", "error", kubeletErr.Error())
	}
	if nodeErr != nil && kubeletErr != nil {
		if prev := a.Inventory(); prev != nil {
			return prev.Replicas
		}
		return 0
	}
	n, why := discovery.Replicas(inv, discovery.AdvertisedBy(node, ids))
	if why != a.lastReplicas {
		a.lastReplicas = why
		if n > 0 {
			a.log.Info("The device plugin time-slices this node's GPUs; the scheduler counts the physical ones", "replicas", n, "evidence", why)
		} else {
			a.log.Info("Each GPU is advertised once")
		}
	}
	return n
}

// nvmlDown reports a library-wide failure: logged, counted, visible in readiness and
// metrics, and, when the node had an inventory, published with every GPU unhealthy so that the
// scheduler stops placing work here.
func (a *Agent) nvmlDown(ctx context.Context, p *publish.Publisher, err error) {
	a.errors.Add(err)
	a.mu.Lock()
	a.nvmlUp, a.nvmlErr = false, err
	inv := a.inventory
	a.mu.Unlock()
	if !a.downLogged {
		a.downLogged = true
		a.log.Error(err, "NVML unavailable; GPUs reported unhealthy until it recovers", "code", gpu.Code(err))
	}
	if inv == nil {
		return
	}
	down := *inv
	down.GPUs = append([]fairwayv1alpha1.GPUDevice(nil), inv.GPUs...)
	for i := range down.GPUs {
		down.GPUs[i].Healthy = false
	}
	down.MPS = a.mps.Available().Enabled
	down.RefreshSeconds = int32(a.opts.RefreshInterval / time.Second)
	a.mu.Lock()
	a.inventory = &down
	for i := range a.shareGPUs {
		a.shareGPUs[i].Healthy = false
	}
	a.mu.Unlock()
	a.refreshShares()
	a.publish(ctx, p, discovery.Labels(&down, ""), down)
}

func (a *Agent) publish(ctx context.Context, p *publish.Publisher, labels map[string]string, inv fairwayv1alpha1.GPUInventory) {
	res, err := p.Publish(ctx, labels, inv)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Error(err, "Publishing GPU inventory")
		}
		return
	}
	if res.Patched {
		a.mu.Lock()
		a.publishedAt = time.Now()
		a.mu.Unlock()
	}
}

// onSample counts NVML failures seen while polling and asks for a discovery when the health it
// sees differs from the inventory's (a GPU was lost or came back, the driver went away).
func (a *Agent) onSample(s *usage.Sample) {
	if s.Err != nil {
		a.errors.Add(s.Err)
		a.mu.Lock()
		wasUp := a.nvmlUp
		a.nvmlUp = false
		a.nvmlErr = s.Err
		a.mu.Unlock()
		if wasUp {
			a.rediscover()
		}
		return
	}
	errs := s.DeviceErrors()
	a.errors.Add(errs...)
	inv := a.Inventory()
	if inv == nil {
		return
	}
	healthy := map[int]bool{}
	for _, g := range inv.GPUs {
		healthy[int(g.Index)] = g.Healthy
	}
	for _, g := range s.GPUs {
		if h, ok := healthy[g.Index]; !ok || h != (g.Err == nil) {
			a.rediscover()
			return
		}
	}
	if len(s.GPUs) != len(inv.GPUs) {
		a.rediscover()
	}
}

// podGPUs is every GPU index a pod holds: what the kubelet gave it, and, for a fractional pod,
// the shared GPU the scheduler's runtime annotated it with. Reservation pods are placeholders
// and hold nothing for usage purposes.
func (a *Agent) podGPUs(assigner *assign.Assigner, pod *corev1.Pod) []int {
	if fairwayv1alpha1.IsReservationPod(pod, a.opts.Namespace) {
		return nil
	}
	out := assigner.PodGPUs(pod)
	id := pod.Annotations[fairwayv1alpha1.GPUUUIDAnnotation]
	if id == "" {
		id = pod.Annotations[fairwayv1alpha1.GPUIndexAnnotation]
	}
	if id != "" {
		if idx, _, ok := assign.Resolve(a.Inventory(), id); ok {
			out = append(out, idx)
		}
	}
	return out
}

func (a *Agent) metricsState(m *usage.Monitor) metrics.State {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return metrics.State{
		Node:        a.opts.NodeName,
		NVMLUp:      a.nvmlUp,
		MPS:         a.mps.Available().Enabled,
		Inventory:   a.inventory,
		Usage:       m.Latest(),
		PublishedAt: a.publishedAt,
		Errors:      a.errors.Snapshot(),
		Swapped:     a.swapped,
	}
}

// serve is an HTTP server as a Runnable: it fails the manager if it cannot listen.
func serve(name, addr string, h http.Handler, log logr.Logger) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s endpoint: %w", name, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		log.Info("Serving "+name, "address", l.Addr().String())
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(l) }()
		select {
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shutdown)
		case err := <-errc:
			return fmt.Errorf("%s endpoint: %w", name, err)
		}
	})
}
