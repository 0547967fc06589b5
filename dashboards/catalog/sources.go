package catalog

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	agentmetrics "github.com/fairway-sched/fairway/gpu-agent/metrics"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// Sources are the components with a metrics endpoint: fairway's, and the kubelet's resource
// metrics, which the dashboards read for CPU and memory use.
func Sources() []Source {
	return []Source{{Component: "gpu-agent", Registry: gpuAgent}, {Component: "scheduler", Registry: scheduler},
		{Component: "kubelet", Registry: kubelet}}
}

// gpuAgent is the agent's registry (metrics.NewRegistry, as `fairway agent --swap` serves it)
// over a node with one GPU and one idle interactive pod on it, swapped out after one swap-out, one
// swap-in and one failure, so every family has a series.
func gpuAgent() (prometheus.Gatherer, []prometheus.Collector, error) {
	gpu := fairwayv1alpha1.GPUDevice{Index: 0, UUID: "GPU-0", Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, ComputeCapability: "9.0", Healthy: true}
	state := agentmetrics.State{
		Node: "node", NVMLUp: true, MPS: true,
		Inventory:   &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{gpu}},
		PublishedAt: time.Unix(1, 0),
		Errors:      map[string]uint64{"ERROR_UNKNOWN": 1},
		Usage: &usage.Snapshot{
			GPUs: []usage.GPUUsage{{Index: 0, UUID: gpu.UUID, Model: gpu.Product, Healthy: true, UtilizationPercent: 10, UtilizationKnown: true, Processes: 1}},
			Pods: []usage.PodUsage{{Namespace: "ns", Name: "pod", Queue: "q", GPUUUID: gpu.UUID, Model: gpu.Product,
				MemoryUsedBytes: 1, SMPercent: 10, SMKnown: true, Processes: 1, Interactive: true, Idle: true, UID: "uid"}},
		},
		Swapped: map[string]int64{"uid": 1},
	}
	c := agentmetrics.NewCollector(func() agentmetrics.State { return state })
	swap := agentmetrics.NewSwap(state.Node)
	swap.Out.Observe(1)
	swap.In.Observe(1)
	swap.Failures.WithLabelValues("lock").Inc()
	reg := agentmetrics.NewRegistry(c, swap.Collectors()...)
	if reg == nil {
		return nil, nil, errors.New("the gpu-agent returned no registry")
	}
	return reg, append([]prometheus.Collector{c}, swap.Collectors()...), nil
}
