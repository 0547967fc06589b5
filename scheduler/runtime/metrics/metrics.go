// Package metrics defines the scheduler's Prometheus metrics, all prefixed fairway_. Their names
// and labels are a stable interface (dashboards are built on them); scheduler/runtime/README.md
// lists them with their units.
//
// Event metrics (cycle durations, scheduling latency, evictions, binding errors) are ordinary
// collectors updated as things happen. State metrics (queue amounts, waiting pods and gangs,
// shared GPUs) are built at scrape time from the last State the loop published, so a queue or a
// GPU that goes away leaves no stale series behind.
package metrics

import (
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names.
const (
	LabelQueue     = "queue"
	LabelResource  = "resource"
	LabelReason    = "reason"
	LabelFramework = "framework"
	LabelNode      = "node"
	LabelGPUIndex  = "gpu_index"
	LabelGPUUUID   = "gpu_uuid"
	LabelGPUType   = "gpu_type"
	LabelState     = "state"
	LabelParent    = "parent"
	LabelPhase     = "phase"
	LabelNamespace = "namespace"
	LabelPod       = "pod"
	// LabelKind is the kind of work (v1alpha1.WorkloadKind: inference, notebook, training, ...),
	// "pod" when a pod has none.
	LabelKind = "workload_kind"
)

// States of fairway_node_gpus.
const (
	GPUStateWhole     = "whole"
	GPUStateShared    = "shared"
	GPUStateFree      = "free"
	GPUStateUnhealthy = "unhealthy"
)

// QueueAmounts is one queue's accounting, per resource (gpu, cpu, memory, gpu/<type>), in
// natural units: GPUs, CPU cores, bytes.
type QueueAmounts struct {
	Queue                   string
	Guaranteed              map[string]float64
	FairShare               map[string]float64
	Allocated               map[string]float64
	AllocatedNonPreemptible map[string]float64
	Requested               map[string]float64
	Borrowed                map[string]float64
	// Loaned is the part of Allocated (and Borrowed) on loan on idle interactive pods' GPUs.
	Loaned map[string]float64
	// Loans counts the queue's pods on loan (leaving ones included).
	Loans int
	// Usage is the queue's decayed usage in resource-hours (GPU-hours, core-hours, byte-hours)
	// and OverQuotaUsageShare its decayed use above its guarantee as a fraction of the cluster
	// over the window (what fair share over time weighs), with fair share over time on; nil
	// without.
	Usage, OverQuotaUsageShare map[string]float64
}

// Pending counts waiting pods and gangs of a queue for one reason code.
type Pending struct {
	Queue, Reason string
	Pods, Gangs   int
}

// Share is how much of one GPU its fractional pods hold, 0 to 1.
type Share struct {
	Node     string
	GPUIndex int
	// GPUUUID is the physical GPU: the one the kubelet gave the slot's reservation pod, as its
	// gpu-agent reported it ("" until then).
	GPUUUID string
	Ratio   float64
}

// Swapped is one GPU whose idle holders' memory the gpu-agent moved to host RAM (swap), as the
// snapshot has it (their fairway.dev/gpu-swap SwappedOut): what the scheduler lends beyond the
// GPU's free memory.
type Swapped struct {
	Node     string
	GPUIndex int
	GPUUUID  string
	// Holders counts the swapped-out pods on the GPU; Bytes their memory on the host.
	Holders int
	Bytes   int64
}

// QueueInfo is one Queue of the tree.
type QueueInfo struct {
	Queue string
	// Parent is spec.parent, "" at the top of the tree.
	Parent string
}

// NodeGPUs counts one schedulable node's GPUs by state; the states sum to the node's GPUs.
type NodeGPUs struct {
	Node    string
	GPUType string
	// Whole are held whole by pods; Shared are slots of fractional pods (or of a reservation
	// alone); Free are healthy and unheld; Unhealthy are reported lost or failing by the
	// node's gpu-agent.
	Whole, Shared, Free, Unhealthy int
}

// PodInfo is one bound pod fairway schedules, with its queue and kind of work.
type PodInfo struct {
	Namespace, Pod, Queue, Node string
	// Kind is the pod's fairway.dev/workload-kind (notebook, training, ...).
	Kind string
}

// PodGroups counts PodGroups of one queue, framework, kind of work and phase.
type PodGroups struct {
	Queue, Framework, Kind, Phase string
	Count                         int
}

// State is what the loop publishes after a cycle; never modified once published.
type State struct {
	Queues    []QueueAmounts
	Pending   []Pending
	Shares    []Share
	QueueTree []QueueInfo
	NodeGPUs  []NodeGPUs
	PodGroups []PodGroups
	Swapped   []Swapped
}

// Metrics holds every scheduler metric.
type Metrics struct {
	CycleDuration     prometheus.Histogram
	SchedulingLatency *prometheus.HistogramVec
	Bindings          prometheus.Counter
	BindingErrors     *prometheus.CounterVec
	Evictions         *prometheus.CounterVec
	Leader            prometheus.Gauge
	// LoanReturn is the activity-to-return latency of idle GPU lending: from the gpu-agent's
	// observation that a lender works again to the eviction of the loan being done.
	LoanReturn prometheus.Histogram
	// SwapRequests counts the swap requests written onto idle pods for their gpu-agent
	// (fairway.dev/gpu-swap-request).
	SwapRequests prometheus.Counter

	state atomic.Pointer[State]
	// pods lists the pods of fairway_pod_info at scrape time (SetPods).
	pods func() []PodInfo
}

// SetPods gives fairway_pod_info its source, called at each scrape while the loop publishes
// state (on the leader, like the other state metrics, so that replicas never export the same pod
// twice and break the joins on it). It lists one series per running pod, so it reads the
// informers' store on the scrape's goroutine rather than costing the scheduling loop a walk of
// every pod. Set it before the metrics are served.
func (m *Metrics) SetPods(f func() []PodInfo) { m.pods = f }

var (
	descGuaranteed = prometheus.NewDesc("fairway_queue_guaranteed", "Guaranteed quota of a queue per resource (GPUs, CPU cores, memory bytes).", []string{LabelQueue, LabelResource}, nil)
	descFairShare  = prometheus.NewDesc("fairway_queue_fair_share", "Fair share of a queue per resource, as of the last cycle.", []string{LabelQueue, LabelResource}, nil)
	descAllocated  = prometheus.NewDesc("fairway_queue_allocated", "What a queue's bound pods hold, per resource.", []string{LabelQueue, LabelResource}, nil)
	descAllocNP    = prometheus.NewDesc("fairway_queue_allocated_nonpreemptible", "The non-preemptible part of fairway_queue_allocated.", []string{LabelQueue, LabelResource}, nil)
	descRequested  = prometheus.NewDesc("fairway_queue_requested", "Allocated plus what a queue's waiting pods ask for, per resource.", []string{LabelQueue, LabelResource}, nil)
	descBorrowed   = prometheus.NewDesc("fairway_queue_borrowed", "Allocated above the guaranteed quota, per resource; loans always count here.", []string{LabelQueue, LabelResource}, nil)
	descLoaned     = prometheus.NewDesc("fairway_queue_loaned", "The part of fairway_queue_allocated (and of fairway_queue_borrowed) on loan on idle interactive pods' GPUs, per resource.", []string{LabelQueue, LabelResource}, nil)
	descUsage      = prometheus.NewDesc("fairway_queue_usage", "Decayed usage of a queue per resource in resource-hours (GPU-hours, CPU core-hours, memory byte-hours): each hour of use counts 2^(-age/half-life). Only with fair share over time on.", []string{LabelQueue, LabelResource}, nil)
	descUsageShare = prometheus.NewDesc("fairway_queue_over_quota_usage_share", "A queue's decayed use above its guarantee over the cluster's decayed capacity, 0 to 1: what fair share over time weighs (a queue above its weight's part of its siblings' use gets less of the capacity above guarantees). Only with fair share over time on.", []string{LabelQueue, LabelResource}, nil)
	descLoans      = prometheus.NewDesc("fairway_loans", "Pods of a queue running on loan on idle interactive pods' GPUs (idle GPU lending).", []string{LabelQueue}, nil)
	descPendPods   = prometheus.NewDesc("fairway_pending_pods", "Pods waiting to be scheduled, by queue and the engine's reason code.", []string{LabelQueue, LabelReason}, nil)
	descPendGangs  = prometheus.NewDesc("fairway_pending_gangs", "Gangs with pods waiting, by queue and the engine's reason code.", []string{LabelQueue, LabelReason}, nil)
	descShare      = prometheus.NewDesc("fairway_gpu_share_allocated", "Share of a GPU held by fractional pods, as a ratio from 0 to 1 (GPUs held whole are not listed); gpu_uuid is the physical GPU of the slot's reservation.", []string{LabelNode, LabelGPUIndex, LabelGPUUUID}, nil)
	descQueueInfo  = prometheus.NewDesc("fairway_queue_info", "Always 1, one series per Queue; parent is spec.parent (empty for a top-level queue).", []string{LabelQueue, LabelParent}, nil)
	descNodeGPUs   = prometheus.NewDesc("fairway_node_gpus", "GPUs of a schedulable node by state (whole, shared, free, unhealthy); the states sum to the node's GPUs.", []string{LabelNode, LabelGPUType, LabelState}, nil)
	// descPodInfo is what turns usage measured per pod by others (the kubelet's CPU and memory,
	// the gpu-agents' GPU) into usage per queue and kind of work: a join on namespace and pod.
	descPodInfo        = prometheus.NewDesc("fairway_pod_info", "Always 1, one series per bound pod fairway schedules, with its queue and kind of work (fairway.dev/workload-kind): join per-pod usage (the kubelet's pod_cpu_usage_seconds_total and pod_memory_working_set_bytes, the gpu-agents' fairway_gpu_pod_*) on namespace and pod to sum it per queue and kind.", []string{LabelNamespace, LabelPod, LabelQueue, LabelKind, LabelNode}, nil)
	descSwappedBytes   = prometheus.NewDesc("fairway_gpu_swapped_bytes", "GPU memory of a shared GPU's idle holders that their gpu-agent moved to host RAM (swap), as the scheduler sees it (fairway.dev/gpu-swap SwappedOut): lent beyond the GPU's free memory; gpu_index is the engine's slot, gpu_uuid the physical GPU. Only GPUs with swapped holders.", []string{LabelNode, LabelGPUIndex, LabelGPUUUID}, nil)
	descSwappedHolders = prometheus.NewDesc("fairway_gpu_swapped_pods", "Idle holders of a shared GPU whose memory is on host RAM (swap), as the scheduler sees them. Only GPUs with swapped holders.", []string{LabelNode, LabelGPUIndex, LabelGPUUUID}, nil)
	descPodGroups      = prometheus.NewDesc("fairway_podgroups", "PodGroups by queue, framework (their pods' fairway.dev/framework, none when unlabelled), kind of work (their fairway.dev/workload-kind, pod when unlabelled) and status.phase.", []string{LabelQueue, LabelFramework, LabelKind, LabelPhase}, nil)
)

// New makes the metrics (not registered).
func New() *Metrics {
	return &Metrics{
		CycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fairway_cycle_duration_seconds", Help: "Duration of a scheduling cycle: applying cache changes, the engine, handing out decisions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		SchedulingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fairway_pod_scheduling_latency_seconds", Help: "Time from a pod's creation (creationTimestamp, second resolution) to its successful binding, by framework, queue and kind of work.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
		}, []string{LabelFramework, LabelQueue, LabelKind}),
		Bindings: prometheus.NewCounter(prometheus.CounterOpts{Name: "fairway_bindings_total", Help: "Pods bound."}),
		BindingErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairway_binding_errors_total", Help: "Bindings given up, by reason (Conflict, NotFound, GPUReservation, Retries, Error), and bound pods the kubelet rejected (KubeletRejected).",
		}, []string{LabelReason}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairway_evictions_total", Help: "Pods evicted, by reason (Reclaim, Preempt, Consolidate, StaleGang, LoanReturn, NodeDeleted), the victim's queue, framework (none when unlabelled) and kind of work (pod when unlabelled).",
		}, []string{LabelReason, LabelQueue, LabelFramework, LabelKind}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fairway_leader", Help: "1 while this replica is the leader, which schedules."}),
		LoanReturn: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fairway_loan_return_seconds",
			Help:    "Idle GPU lending: time from the gpu-agent observing that a lender does GPU work again to the eviction of the loans on its GPU being issued (their grace period follows).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
		SwapRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairway_swap_requests_total",
			Help: "Idle GPU lending: requests written onto idle interactive pods (fairway.dev/gpu-swap-request) for their gpu-agent to move their GPU memory to host RAM, so that a waiting borrower gets the whole GPU.",
		}),
	}
}

// Register registers every metric with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.CycleDuration, m.SchedulingLatency, m.Bindings, m.BindingErrors, m.Evictions, m.Leader, m.LoanReturn, m.SwapRequests, stateCollector{m}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SetState publishes the state metrics; s must not change afterwards.
func (m *Metrics) SetState(s *State) { m.state.Store(s) }

// State is the state metrics last published, nil before the first.
func (m *Metrics) State() *State { return m.state.Load() }

type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGuaranteed, descFairShare, descAllocated, descAllocNP, descRequested, descBorrowed, descLoaned, descUsage, descUsageShare, descLoans, descPendPods, descPendGangs, descShare,
		descQueueInfo, descNodeGPUs, descPodGroups, descPodInfo, descSwappedBytes, descSwappedHolders} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.state.Load()
	if s == nil {
		return
	}
	for _, q := range s.Queues {
		for _, x := range []struct {
			d *prometheus.Desc
			v map[string]float64
		}{{descGuaranteed, q.Guaranteed}, {descFairShare, q.FairShare}, {descAllocated, q.Allocated}, {descAllocNP, q.AllocatedNonPreemptible}, {descRequested, q.Requested}, {descBorrowed, q.Borrowed}, {descLoaned, q.Loaned}, {descUsage, q.Usage}, {descUsageShare, q.OverQuotaUsageShare}} {
			keys := make([]string, 0, len(x.v))
			for k := range x.v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, r := range keys {
				ch <- prometheus.MustNewConstMetric(x.d, prometheus.GaugeValue, x.v[r], q.Queue, r)
			}
		}
	}
	for _, q := range s.Queues {
		if q.Loans > 0 {
			ch <- prometheus.MustNewConstMetric(descLoans, prometheus.GaugeValue, float64(q.Loans), q.Queue)
		}
	}
	for _, p := range s.Pending {
		ch <- prometheus.MustNewConstMetric(descPendPods, prometheus.GaugeValue, float64(p.Pods), p.Queue, p.Reason)
		ch <- prometheus.MustNewConstMetric(descPendGangs, prometheus.GaugeValue, float64(p.Gangs), p.Queue, p.Reason)
	}
	for _, sh := range s.Shares {
		ch <- prometheus.MustNewConstMetric(descShare, prometheus.GaugeValue, sh.Ratio, sh.Node, strconv.Itoa(sh.GPUIndex), sh.GPUUUID)
	}
	for _, q := range s.QueueTree {
		ch <- prometheus.MustNewConstMetric(descQueueInfo, prometheus.GaugeValue, 1, q.Queue, q.Parent)
	}
	for _, n := range s.NodeGPUs {
		for _, x := range []struct {
			state string
			v     int
		}{{GPUStateWhole, n.Whole}, {GPUStateShared, n.Shared}, {GPUStateFree, n.Free}, {GPUStateUnhealthy, n.Unhealthy}} {
			ch <- prometheus.MustNewConstMetric(descNodeGPUs, prometheus.GaugeValue, float64(x.v), n.Node, n.GPUType, x.state)
		}
	}
	for _, sw := range s.Swapped {
		labels := []string{sw.Node, strconv.Itoa(sw.GPUIndex), sw.GPUUUID}
		ch <- prometheus.MustNewConstMetric(descSwappedBytes, prometheus.GaugeValue, float64(sw.Bytes), labels...)
		ch <- prometheus.MustNewConstMetric(descSwappedHolders, prometheus.GaugeValue, float64(sw.Holders), labels...)
	}
	for _, pg := range s.PodGroups {
		ch <- prometheus.MustNewConstMetric(descPodGroups, prometheus.GaugeValue, float64(pg.Count), pg.Queue, pg.Framework, pg.Kind, pg.Phase)
	}
	if c.m.pods != nil {
		for _, p := range c.m.pods() {
			ch <- prometheus.MustNewConstMetric(descPodInfo, prometheus.GaugeValue, 1, p.Namespace, p.Pod, p.Queue, p.Kind, p.Node)
		}
	}
}
