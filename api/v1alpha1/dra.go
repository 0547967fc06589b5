package v1alpha1

import (
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
