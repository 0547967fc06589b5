package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUInventory is what the gpu-agent found on a node, published as JSON in the node annotation
// fairway.dev/gpu-inventory. The scheduler places fractional GPUs by it (index, UUID, memory);
// without it a node's GPUs are anonymous and their memory comes from the fairway.dev/gpu-memory
// label.
//
// The agent re-publishes it when it changes and at least every RefreshInterval, so a reader can
// tell a stale inventory (an agent that stopped) by ObservedAt.
type GPUInventory struct {
	// ObservedAt is when the agent last confirmed this inventory.
	ObservedAt metav1.Time `json:"observedAt"`
	// RefreshSeconds is how often the agent confirms it; an inventory older than a few
	// periods is stale.
	RefreshSeconds int32 `json:"refreshSeconds,omitempty"`
	// Driver is the NVIDIA driver version, for support.
	Driver string `json:"driver,omitempty"`
	// MPS is true when the agent runs the MPS control daemon, so fractional pods on this node
	// get hard memory limits.
	MPS bool `json:"mps,omitempty"`
	// Replicas is how many devices the node's device plugin advertises under nvidia.com/gpu for
	// each physical GPU: more than 1 when the plugin time-slices them (its sharing config,
	// `replicas: n`), 0 when each GPU is advertised once. The node's nvidia.com/gpu is then
	// GPUs × Replicas, and the scheduler counts the node's GPUs as the physical ones
	// (PhysicalGPUs): without it, two pods that each hold a whole GPU would land on one.
	// Written by the gpu-agent's discovery only; read through PhysicalGPUs.
	Replicas int32 `json:"replicas,omitempty"`
	// GPUs lists the node's devices by index.
	GPUs []GPUDevice `json:"gpus"`
}

// GPUDevice is one physical GPU.
type GPUDevice struct {
	// Index is NVML's index of the device on the node.
	Index int32 `json:"index"`
	// UUID is the device's NVML UUID (GPU-...), the name the container runtime uses.
	UUID string `json:"uuid"`
	// Product is the NVML product name, e.g. "NVIDIA H100 80GB HBM3".
	Product string `json:"product,omitempty"`
	// MemoryMiB is the device's total memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// ComputeCapability is major.minor, e.g. "9.0".
	ComputeCapability string `json:"computeCapability,omitempty"`
	// MIGEnabled is true when the device is in MIG mode; fairway does not place fractions on it.
	MIGEnabled bool `json:"migEnabled,omitempty"`
	// NVLinkPeers lists the indexes of the devices this one reaches over NVLink.
	NVLinkPeers []int32 `json:"nvlinkPeers,omitempty"`
	// Healthy is false when NVML reported the device lost or in error.
	Healthy bool `json:"healthy"`
	// KernelMemoryLimit is true when the driver limits a cgroup's memory on this GPU (NVIDIA
	// r615 and later: nvmlDeviceSetMemoryLimits_v1, enforced by the kernel's dmem cgroup
	// controller or the driver) and the gpu-agent sets each share's limit on its pod's cgroup
	// before the pod's containers start, refusing a container whose limit it cannot set: no
	// process of the pod, whatever it loads, allocates past the share. False: a share's limit
	// is the share library's (and the MPS server's, per process), which a process that loads
	// neither escapes (docs/isolation.md).
	KernelMemoryLimit bool `json:"kernelMemoryLimit,omitempty"`
}

// PhysicalGPUs is how many physical GPUs stand behind advertised nvidia.com/gpu devices of the
// node: advertised itself on a node whose GPUs are advertised once, advertised divided by
// Replicas, rounded up, on a time-sliced node (a GPU whose replicas the device plugin reports
// unhealthy drops out of the node's allocatable with all of them). Never negative.
func (inv *GPUInventory) PhysicalGPUs(advertised int64) int64 {
	advertised = max(advertised, 0)
	if inv == nil || inv.Replicas <= 1 {
		return advertised
	}
	r := int64(inv.Replicas)
	return (advertised + r - 1) / r
}
