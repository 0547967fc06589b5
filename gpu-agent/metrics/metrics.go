package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// State is what the collector reads at each scrape. Every field may be zero before the agent
// has discovered or sampled anything.
type State struct {
	Node string
	// NVMLUp is false while the library cannot be initialised or fails library-wide.
	NVMLUp bool
	// MPS is true when the MPS control daemon runs (hard memory limits for fractions).
	MPS bool
	// Inventory is the latest discovery.
	Inventory *fairwayv1alpha1.GPUInventory
	// Usage is the latest usage poll.
	Usage *usage.Snapshot
	// PublishedAt is when the inventory was last written to the Node.
	PublishedAt time.Time
	// Errors counts NVML failures by code since the agent started.
	Errors map[string]uint64
	// Swapped is, per pod UID, the bytes of its GPU memory on the host (swap).
	Swapped map[string]int64
}

var (
	gpuLabels = []string{"node", "gpu_uuid", "gpu_index", "model"}
	podLabels = append(append([]string{}, gpuLabels...), "namespace", "pod", "queue")

	descInfo = prometheus.NewDesc("fairway_gpu_info",
		"A GPU of the node, with its compute capability and MIG mode; always 1.",
		append(append([]string{}, gpuLabels...), "compute_capability", "mig_enabled"), nil)
	descHealthy = prometheus.NewDesc("fairway_gpu_healthy",
		"1 when the GPU answers NVML, 0 when it is lost or failing.", gpuLabels, nil)
	descMemTotal = prometheus.NewDesc("fairway_gpu_memory_total_bytes",
		"Total frame-buffer memory of the GPU.", gpuLabels, nil)
	descMemUsed = prometheus.NewDesc("fairway_gpu_memory_used_bytes",
		"Frame-buffer memory in use on the GPU.", gpuLabels, nil)
	descUtil = prometheus.NewDesc("fairway_gpu_utilization_ratio",
		"Share of the last sample period in which a kernel ran on the GPU (0-1).", gpuLabels, nil)
	descKernelLimit = prometheus.NewDesc("fairway_gpu_kernel_memory_limit",
		"1 when a GPU share's memory limit is set on its pod's cgroup and enforced by the kernel or driver for every process of the pod (NVIDIA r615+ per-cgroup limit), 0 when the share library's limit is all there is.", gpuLabels, nil)
	descProcs = prometheus.NewDesc("fairway_gpu_processes",
		"Compute processes holding a context on the GPU.", gpuLabels, nil)

	descPodMem = prometheus.NewDesc("fairway_gpu_pod_memory_used_bytes",
		"GPU memory held by the pod's processes on the GPU.", podLabels, nil)
	descPodUtil = prometheus.NewDesc("fairway_gpu_pod_utilization_ratio",
		"The pod's share of the GPU's time over the last sample period (0-1); absent when it cannot be attributed.", podLabels, nil)
	descPodProcs = prometheus.NewDesc("fairway_gpu_pod_processes",
		"The pod's processes on the GPU.", podLabels, nil)
	descPodIdle = prometheus.NewDesc("fairway_gpu_pod_idle",
		"1 when the interactive pod's GPU work is idle (condition fairway.dev/GPUIdle True), else 0; only interactive pods.", podLabels, nil)

	descPodSwapped = prometheus.NewDesc("fairway_gpu_pod_swapped_bytes",
		"GPU memory of the interactive pod moved to host RAM while its GPU is lent (swap); absent when none.", podLabels, nil)

	descNVMLUp = prometheus.NewDesc("fairway_gpu_nvml_up",
		"1 when the agent can talk to NVML, 0 when the driver or library fails.", []string{"node"}, nil)
	descErrors = prometheus.NewDesc("fairway_gpu_nvml_errors_total",
		"NVML failures seen by the agent, by NVML code.", []string{"node", "code"}, nil)
	descMPS = prometheus.NewDesc("fairway_gpu_mps_enabled",
		"1 when the MPS control daemon runs and fractional pods get hard memory limits, 0 in soft mode.", []string{"node"}, nil)
	descPublished = prometheus.NewDesc("fairway_gpu_inventory_published_timestamp_seconds",
		"When the agent last wrote or confirmed the node's GPU inventory.", []string{"node"}, nil)
)

// Collector is a prometheus.Collector over the agent's State.
type Collector struct {
	state func() State
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector that calls state at every scrape; state must be safe for
// concurrent use.
func NewCollector(state func() State) *Collector { return &Collector{state: state} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descHealthy, descMemTotal, descMemUsed, descUtil, descProcs, descKernelLimit,
		descPodMem, descPodUtil, descPodProcs, descPodIdle, descPodSwapped, descNVMLUp, descErrors, descMPS, descPublished} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descNVMLUp, boolFloat(s.NVMLUp), s.Node)
	gauge(descMPS, boolFloat(s.MPS), s.Node)
	for code, n := range s.Errors {
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(n), s.Node, code)
	}
	if !s.PublishedAt.IsZero() {
		gauge(descPublished, float64(s.PublishedAt.UnixNano())/1e9, s.Node)
	}

	sampled := map[int]usage.GPUUsage{}
	if s.Usage != nil && s.Usage.Err == nil {
		for _, g := range s.Usage.GPUs {
			sampled[g.Index] = g
		}
	}
	if s.Inventory != nil {
		for _, g := range s.Inventory.GPUs {
			labels := []string{s.Node, g.UUID, strconv.Itoa(int(g.Index)), g.Product}
			gauge(descInfo, 1, append(labels, g.ComputeCapability, strconv.FormatBool(g.MIGEnabled))...)
			gauge(descMemTotal, float64(g.MemoryMiB)*(1<<20), labels...)
			if !g.MIGEnabled {
				gauge(descKernelLimit, boolFloat(g.KernelMemoryLimit), labels...)
			}
			u, ok := sampled[int(g.Index)]
			gauge(descHealthy, boolFloat(g.Healthy && s.NVMLUp && (!ok || u.Healthy)), labels...)
			if !ok || !u.Healthy {
				continue
			}
			gauge(descMemUsed, float64(u.MemoryUsedBytes), labels...)
			gauge(descProcs, float64(u.Processes), labels...)
			if u.UtilizationKnown {
				gauge(descUtil, float64(u.UtilizationPercent)/100, labels...)
			}
		}
	}
	if s.Usage == nil {
		return
	}
	swappedShown := map[string]bool{}
	for _, p := range s.Usage.Pods {
		labels := []string{s.Node, p.GPUUUID, strconv.Itoa(p.GPUIndex), p.Model, p.Namespace, p.Name, p.Queue}
		gauge(descPodMem, float64(p.MemoryUsedBytes), labels...)
		gauge(descPodProcs, float64(p.Processes), labels...)
		if p.SMKnown {
			gauge(descPodUtil, min(p.SMPercent, 100)/100, labels...)
		}
		if p.Interactive {
			gauge(descPodIdle, boolFloat(p.Idle), labels...)
		}
		if n, ok := s.Swapped[p.UID]; ok && !swappedShown[p.UID] {
			swappedShown[p.UID] = true // once per pod, on its first GPU: the bytes are the pod's
			gauge(descPodSwapped, float64(n), labels...)
		}
	}
}

// NewRegistry returns a private registry with the collector and the Go and process collectors,
// so the agent's endpoint serves nothing a library registered globally.
func NewRegistry(c *Collector, more ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(more...)
	return reg
}

// Swap are the swap metrics that keep history (histograms, counters), fed as swaps happen; the
// bytes swapped now are State.Swapped.
type Swap struct {
	Out, In  prometheus.Histogram
	Failures *prometheus.CounterVec
}

// NewSwap returns the swap metrics of node.
func NewSwap(node string) *Swap {
	labels := prometheus.Labels{"node": node}
	// From 10 ms to about 41 s: a few MiB to the 141 GiB of an H200 at 3 to 50 GB/s.
	buckets := prometheus.ExponentialBuckets(0.01, 2, 13)
	return &Swap{
		Out: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fairway_gpu_swap_out_seconds", ConstLabels: labels, Buckets: buckets,
			Help: "Time to move an idle notebook's GPU memory to host RAM: lock and checkpoint of its processes."}),
		In: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fairway_gpu_swap_in_seconds", ConstLabels: labels, Buckets: buckets,
			Help: "From a swapped notebook's first sign of work to its GPU memory restored and its processes unlocked (its loans' return included)."}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fairway_gpu_swap_failures_total", ConstLabels: labels,
			Help: "Swaps refused or failed, by stage: check (host RAM, MPS), lock (timeout), checkpoint (not supported), restore."}, []string{"stage"}),
	}
}

// Collectors lists the metrics for NewRegistry.
func (s *Swap) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.Out, s.In, s.Failures}
}

// ErrorCounts counts NVML failures by code; safe for concurrent use.
type ErrorCounts struct {
	mu sync.Mutex
	m  map[string]uint64
}

// Add counts each non-nil error under its NVML code.
func (e *ErrorCounts) Add(errs ...error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range errs {
		if err == nil {
			continue
		}
		if e.m == nil {
			e.m = map[string]uint64{}
		}
		e.m[gpu.Code(err)]++
	}
}

// Snapshot returns a copy of the counts.
func (e *ErrorCounts) Snapshot() map[string]uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]uint64, len(e.m))
	for k, v := range e.m {
		out[k] = v
	}
	return out
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
