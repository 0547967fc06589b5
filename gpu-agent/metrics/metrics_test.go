package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

func state() State {
	var errs ErrorCounts
	errs.Add(&gpu.Error{Op: "nvmlDeviceGetUUID", Device: 1, Code: "ERROR_GPU_IS_LOST", Kind: gpu.ErrGPULost},
		&gpu.Error{Op: "nvmlDeviceGetUUID", Device: 1, Code: "ERROR_GPU_IS_LOST", Kind: gpu.ErrGPULost},
		errors.New("not an NVML error"), nil)
	return State{
		Node:        "n1",
		NVMLUp:      true,
		MPS:         false,
		PublishedAt: time.Unix(1767268800, 0),
		Errors:      errs.Snapshot(),
		Inventory: &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{
			{Index: 0, UUID: "GPU-0", Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920, ComputeCapability: "9.0", Healthy: true, KernelMemoryLimit: true},
			{Index: 1, UUID: "GPU-1", Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920, ComputeCapability: "9.0", Healthy: false},
		}},
		Usage: &usage.Snapshot{
			GPUs: []usage.GPUUsage{
				{Index: 0, UUID: "GPU-0", Healthy: true, UtilizationPercent: 45, UtilizationKnown: true, MemoryUsedBytes: 3 << 30, MemoryTotalBytes: 80 << 30, Processes: 2},
				{Index: 1, UUID: "GPU-1", Healthy: false},
			},
			Pods: []usage.PodUsage{
				{UID: "u1", Namespace: "team-a", Name: "notebook", Queue: "research", GPUIndex: 0, GPUUUID: "GPU-0", Model: "NVIDIA H100 80GB HBM3",
					MemoryUsedBytes: 1 << 30, SMPercent: 0, SMKnown: true, Processes: 1, Interactive: true, Idle: true},
				{UID: "u2", Namespace: "team-b", Name: "trainer", Queue: "", GPUIndex: 0, GPUUUID: "GPU-0", Model: "NVIDIA H100 80GB HBM3",
					MemoryUsedBytes: 2 << 30, SMPercent: 45, SMKnown: true, Processes: 1},
			},
		},
	}
}

const expected = `
# HELP fairway_gpu_healthy 1 when the GPU answers NVML, 0 when it is lost or failing.
# TYPE fairway_gpu_healthy gauge
fairway_gpu_healthy{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 1
fairway_gpu_healthy{gpu_index="1",gpu_uuid="GPU-1",model="NVIDIA H100 80GB HBM3",node="n1"} 0
# HELP fairway_gpu_info A GPU of the node, with its compute capability and MIG mode; always 1.
# TYPE fairway_gpu_info gauge
fairway_gpu_info{compute_capability="9.0",gpu_index="0",gpu_uuid="GPU-0",mig_enabled="false",model="NVIDIA H100 80GB HBM3",node="n1"} 1
fairway_gpu_info{compute_capability="9.0",gpu_index="1",gpu_uuid="GPU-1",mig_enabled="false",model="NVIDIA H100 80GB HBM3",node="n1"} 1
# HELP fairway_gpu_inventory_published_timestamp_seconds When the agent last wrote or confirmed the node's GPU inventory.
# TYPE fairway_gpu_inventory_published_timestamp_seconds gauge
fairway_gpu_inventory_published_timestamp_seconds{node="n1"} 1.7672688e+09
# HELP fairway_gpu_kernel_memory_limit 1 when a GPU share's memory limit is set on its pod's cgroup and enforced by the kernel or driver for every process of the pod (NVIDIA r615+ per-cgroup limit), 0 when the share library's limit is all there is.
# TYPE fairway_gpu_kernel_memory_limit gauge
fairway_gpu_kernel_memory_limit{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 1
fairway_gpu_kernel_memory_limit{gpu_index="1",gpu_uuid="GPU-1",model="NVIDIA H100 80GB HBM3",node="n1"} 0
# HELP fairway_gpu_memory_total_bytes Total frame-buffer memory of the GPU.
# TYPE fairway_gpu_memory_total_bytes gauge
fairway_gpu_memory_total_bytes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 8.589934592e+10
fairway_gpu_memory_total_bytes{gpu_index="1",gpu_uuid="GPU-1",model="NVIDIA H100 80GB HBM3",node="n1"} 8.589934592e+10
# HELP fairway_gpu_memory_used_bytes Frame-buffer memory in use on the GPU.
# TYPE fairway_gpu_memory_used_bytes gauge
fairway_gpu_memory_used_bytes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 3.221225472e+09
# HELP fairway_gpu_mps_enabled 1 when the MPS control daemon runs and fractional pods get hard memory limits, 0 in soft mode.
# TYPE fairway_gpu_mps_enabled gauge
fairway_gpu_mps_enabled{node="n1"} 0
# HELP fairway_gpu_nvml_errors_total NVML failures seen by the agent, by NVML code.
# TYPE fairway_gpu_nvml_errors_total counter
fairway_gpu_nvml_errors_total{code="ERROR_GPU_IS_LOST",node="n1"} 2
fairway_gpu_nvml_errors_total{code="other",node="n1"} 1
# HELP fairway_gpu_nvml_up 1 when the agent can talk to NVML, 0 when the driver or library fails.
# TYPE fairway_gpu_nvml_up gauge
fairway_gpu_nvml_up{node="n1"} 1
# HELP fairway_gpu_pod_idle 1 when the interactive pod's GPU work is idle (condition fairway.dev/GPUIdle True), else 0; only interactive pods.
# TYPE fairway_gpu_pod_idle gauge
fairway_gpu_pod_idle{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-a",node="n1",pod="notebook",queue="research"} 1
# HELP fairway_gpu_pod_memory_used_bytes GPU memory held by the pod's processes on the GPU.
# TYPE fairway_gpu_pod_memory_used_bytes gauge
fairway_gpu_pod_memory_used_bytes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-a",node="n1",pod="notebook",queue="research"} 1.073741824e+09
fairway_gpu_pod_memory_used_bytes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-b",node="n1",pod="trainer",queue=""} 2.147483648e+09
# HELP fairway_gpu_pod_processes The pod's processes on the GPU.
# TYPE fairway_gpu_pod_processes gauge
fairway_gpu_pod_processes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-a",node="n1",pod="notebook",queue="research"} 1
fairway_gpu_pod_processes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-b",node="n1",pod="trainer",queue=""} 1
# HELP fairway_gpu_pod_utilization_ratio The pod's share of the GPU's time over the last sample period (0-1); absent when it cannot be attributed.
# TYPE fairway_gpu_pod_utilization_ratio gauge
fairway_gpu_pod_utilization_ratio{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-a",node="n1",pod="notebook",queue="research"} 0
fairway_gpu_pod_utilization_ratio{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",namespace="team-b",node="n1",pod="trainer",queue=""} 0.45
# HELP fairway_gpu_processes Compute processes holding a context on the GPU.
# TYPE fairway_gpu_processes gauge
fairway_gpu_processes{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 2
# HELP fairway_gpu_utilization_ratio Share of the last sample period in which a kernel ran on the GPU (0-1).
# TYPE fairway_gpu_utilization_ratio gauge
fairway_gpu_utilization_ratio{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 0.45
`

func TestCollector(t *testing.T) {
	c := NewCollector(state)
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected)); err != nil {
		t.Error(err)
	}
}

func TestCollectorNVMLDown(t *testing.T) {
	// The driver went away: the agent keeps serving, says so, and marks every GPU unhealthy.
	s := state()
	s.NVMLUp = false
	s.Usage = &usage.Snapshot{Err: errors.New("driver not loaded")}
	c := NewCollector(func() State { return s })
	want := `
# HELP fairway_gpu_nvml_up 1 when the agent can talk to NVML, 0 when the driver or library fails.
# TYPE fairway_gpu_nvml_up gauge
fairway_gpu_nvml_up{node="n1"} 0
# HELP fairway_gpu_healthy 1 when the GPU answers NVML, 0 when it is lost or failing.
# TYPE fairway_gpu_healthy gauge
fairway_gpu_healthy{gpu_index="0",gpu_uuid="GPU-0",model="NVIDIA H100 80GB HBM3",node="n1"} 0
fairway_gpu_healthy{gpu_index="1",gpu_uuid="GPU-1",model="NVIDIA H100 80GB HBM3",node="n1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "fairway_gpu_nvml_up", "fairway_gpu_healthy", "fairway_gpu_memory_used_bytes"); err != nil {
		t.Error(err)
	}
}

func TestCollectorEmpty(t *testing.T) {
	// Before the first discovery only the agent's own health is there.
	c := NewCollector(func() State { return State{Node: "n1"} })
	if n := testutil.CollectAndCount(c); n != 2 {
		t.Errorf("%d series before discovery, want 2 (nvml_up, mps_enabled)", n)
	}
	if err := testutil.CollectAndCompare(NewRegistry(c), strings.NewReader(""), "fairway_gpu_info"); err != nil {
		t.Error(err)
	}
}
