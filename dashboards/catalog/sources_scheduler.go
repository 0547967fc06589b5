package catalog

import (
	"github.com/prometheus/client_golang/prometheus"

	schedmetrics "github.com/fairway-sched/fairway/scheduler/runtime/metrics"
)

// scheduler is the scheduler runtime's metrics (metrics.Metrics, as `fairway scheduler`
// registers them) after one cycle with a queue tree, a waiting gang, a shared GPU, a node, a
// PodGroup, a bound pod, a loan, a swapped GPU, usage history, one binding, one failed binding, one eviction, one loan
// return and one swap request, so every family has a series.
func scheduler() (prometheus.Gatherer, []prometheus.Collector, error) {
	m := schedmetrics.New()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		return nil, nil, err
	}
	amounts := map[string]float64{"gpu": 1, "cpu": 1, "memory": 1}
	m.SetState(&schedmetrics.State{
		Queues: []schedmetrics.QueueAmounts{{Queue: "q", Guaranteed: amounts, FairShare: amounts, Allocated: amounts,
			AllocatedNonPreemptible: amounts, Requested: amounts, Borrowed: amounts, Loaned: amounts, Loans: 1,
			Usage: amounts, OverQuotaUsageShare: amounts}},
		Pending:   []schedmetrics.Pending{{Queue: "q", Reason: "NoNodeFits", Pods: 1, Gangs: 1}},
		Shares:    []schedmetrics.Share{{Node: "node", GPUIndex: 0, GPUUUID: "GPU-0", Ratio: 0.5}},
		QueueTree: []schedmetrics.QueueInfo{{Queue: "q", Parent: "dept"}},
		NodeGPUs:  []schedmetrics.NodeGPUs{{Node: "node", GPUType: "H100", Whole: 1, Shared: 1, Free: 1, Unhealthy: 1}},
		PodGroups: []schedmetrics.PodGroups{{Queue: "q", Framework: "ray", Kind: "ray", Phase: "Running", Count: 1}},
		Swapped:   []schedmetrics.Swapped{{Node: "node", GPUIndex: 0, GPUUUID: "GPU-0", Holders: 1, Bytes: 1}},
	})
	m.SetPods(func() []schedmetrics.PodInfo {
		return []schedmetrics.PodInfo{{Namespace: "ns", Pod: "pod", Queue: "q", Kind: "notebook", Node: "node"}}
	})
	m.CycleDuration.Observe(0.01)
	m.SchedulingLatency.WithLabelValues("none", "q", "pod").Observe(1)
	m.Bindings.Inc()
	m.BindingErrors.WithLabelValues("Conflict").Inc()
	m.Evictions.WithLabelValues("Reclaim", "q", "none", "pod").Inc()
	m.LoanReturn.Observe(0.5)
	m.SwapRequests.Inc()
	m.Leader.Set(1)
	return reg, nil, nil
}
