package catalog

import (
	"github.com/prometheus/client_golang/prometheus"
)

// kubelet is the one source that is not fairway's: the kubelet's resource metrics endpoint
// (/metrics/resource), which every node serves and from which the dashboards take what pods
// really use in CPU and memory (fairway joins it to queues with the scheduler's
// fairway_pod_info). The kubelet's collector lives in k8s.io/kubernetes (pkg/kubelet/metrics/
// collectors/resource_metrics.go), which is not a library to import, so its families are
// written here with the names, types and labels it gives them; the local cluster's kwok serves
// the same (test/cluster/kwokmetrics), and dashboards-check scrapes them from there. Only the
// families the dashboards use are listed.
func kubelet() (prometheus.Gatherer, []prometheus.Collector, error) {
	reg := prometheus.NewRegistry()
	cpu := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pod_cpu_usage_seconds_total",
		Help: "Cumulative cpu time consumed by the pod in core-seconds"}, []string{"pod", "namespace"})
	mem := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pod_memory_working_set_bytes",
		Help: "Current working set of the pod in bytes"}, []string{"pod", "namespace"})
	for _, c := range []prometheus.Collector{cpu, mem} {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	cpu.WithLabelValues("pod", "ns").Add(1)
	mem.WithLabelValues("pod", "ns").Set(1)
	return reg, nil, nil
}
