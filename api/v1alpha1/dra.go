package v1alpha1

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
)

// Dynamic Resource Allocation (resource.k8s.io/v1): the names fairway reads on NVIDIA's DRA
// driver for GPUs (github.com/NVIDIA/k8s-dra-driver-gpu) and its own keys. docs/dra.md says how
// they are used.
const (
	// NVIDIAGPUDriver is the DRA driver of NVIDIA's GPUs: the driver of the devices its
	// ResourceSlices publish (one pool per node, devices gpu-0, gpu-1, ...).
	NVIDIAGPUDriver = "gpu.nvidia.com"
	// NVIDIAGPUDeviceClass is the DeviceClass NVIDIA's driver installs for whole GPUs.
	NVIDIAGPUDeviceClass = "gpu.nvidia.com"
	// DRATypeAttribute is the device attribute that says what a device of NVIDIA's driver is:
	// "gpu" for a whole GPU ("mig" for a MIG device, "vfio" for a passed-through one).
	DRATypeAttribute = "type"
	// DRATypeGPU is DRATypeAttribute's value of a whole GPU.
	DRATypeGPU = "gpu"
	// DRAProductNameAttribute is the device attribute with the GPU's product name ("NVIDIA
	// H100 80GB HBM3"); the GPU type queues quota by is read from it as the gpu-agent reads it
	// from NVML, unless the node has a fairway.dev/gpu-type label.
	DRAProductNameAttribute = "productName"
	// DRAMemoryCapacity is the device capacity with the GPU's memory.
	DRAMemoryCapacity resourceapi.QualifiedName = "memory"

	// DeviceClassResourceLabel on a DeviceClass names the queue resource its requests count
	// in; DeviceClassResourceGPU is the only value read today. NVIDIAGPUDeviceClass counts as
	// gpu without it.
	DeviceClassResourceLabel = Prefix + "resource"
	DeviceClassResourceGPU   = "gpu"
)

// IsDRAGPUDevice reports whether a device of a GPU driver's ResourceSlice is a whole GPU: its
// type attribute (plain or qualified with the driver's domain) is "gpu" or absent.
func IsDRAGPUDevice(driver string, d *resourceapi.Device) bool {
	for _, k := range []resourceapi.QualifiedName{DRATypeAttribute, resourceapi.QualifiedName(driver + "/" + DRATypeAttribute)} {
		if a, ok := d.Attributes[k]; ok {
			return a.StringValue != nil && *a.StringValue == DRATypeGPU
		}
	}
	return true
}

// UnservedClaimRequests names what a ResourceClaim asks for that fairway's DRA allocator does not
// serve, one entry per request: capacity requests, a part of a device that several claims may
// share (DRAConsumableCapacity). The allocator fairway runs does not read them: it would give
// the claim a whole device, unchecked against the capacity asked for, and fairway's GPU
// accounting has no way yet to count a claim's part of a device (docs/dra.md, "Shares through
// DRA"). The webhook leaves a pod with such a claim to kube-scheduler, which serves them, with a
// warning, or refuses it when it names fairway's scheduler; the scheduler reports one that
// reaches it anyway as ReasonUnsupported instead of placing it wrongly. All read this one
// function, and the engine's tests check it against its allocator. Nil when fairway serves the
// claim.
func UnservedClaimRequests(spec *resourceapi.ResourceClaimSpec) []string {
	var what []string
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.Capacity != nil {
			what = append(what, fmt.Sprintf("request %q: capacity requests (DRA consumable capacity)", r.Name))
		}
		for _, s := range r.FirstAvailable {
			if s.Capacity != nil {
				what = append(what, fmt.Sprintf("request %q, subrequest %q: capacity requests (DRA consumable capacity)", r.Name, s.Name))
			}
		}
	}
	return what
}
