package v1alpha1

import (
	"fmt"
	"maps"
	"slices"

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
	// DRATypeMIG is DRATypeAttribute's value of a MIG device, a partition of a GPU.
	DRATypeMIG = "mig"
	// DRAParentUUIDAttribute is the attribute of a MIG device with the UUID of its GPU.
	DRAParentUUIDAttribute = "parentUUID"
	// DRAMemorySliceCapacityPrefix begins the capacities a MIG device publishes for each of its
	// GPU's memory slices it holds (memorySlice0 ... memorySlice7): its part of the GPU.
	DRAMemorySliceCapacityPrefix = "memorySlice"
	// DRAMemorySlicesPerGPU is the number of memory slices of a MIG-capable GPU (A100, H100,
	// H200, B200): a MIG device holding k of them is k eighths of its GPU.
	DRAMemorySlicesPerGPU = 8
	// NVIDIAMIGDeviceClass is the DeviceClass NVIDIA's driver installs for MIG devices.
	NVIDIAMIGDeviceClass = "mig.nvidia.com"
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
	// DeviceClassResourceGPUPartition on a DeviceClass says its requests are for partitions of
	// GPUs (MIG devices): each is a share of its GPU. NVIDIAMIGDeviceClass is one without it.
	DeviceClassResourceGPUPartition = "gpu-partition"
)

// IsDRAGPUDevice reports whether a device of a GPU driver's ResourceSlice is a whole GPU: its
// type attribute (plain or qualified with the driver's domain) is "gpu" or absent.
func IsDRAGPUDevice(driver string, d *resourceapi.Device) bool {
	t, ok := draType(driver, d)
	return !ok || t == DRATypeGPU
}

// IsDRAMIGDevice reports whether a device of a GPU driver's ResourceSlice is a MIG device.
func IsDRAMIGDevice(driver string, d *resourceapi.Device) bool {
	t, ok := draType(driver, d)
	return ok && t == DRATypeMIG
}

// draType is a device's type attribute, plain or qualified with the driver's domain ("" for
// one that is not a string), and whether it has one.
func draType(driver string, d *resourceapi.Device) (string, bool) {
	for _, k := range []resourceapi.QualifiedName{DRATypeAttribute, resourceapi.QualifiedName(driver + "/" + DRATypeAttribute)} {
		if a, ok := d.Attributes[k]; ok {
			if a.StringValue == nil {
				return "", true
			}
			return *a.StringValue, true
		}
	}
	return "", false
}

// UnservedClaimRequests names what a ResourceClaim asks for that fairway does not serve, one
// entry per request. fairway's allocator serves consumable capacity (DRAConsumableCapacity: a
// claim for part of a device that allows several allocations), and its accounting counts such a
// part of a GPU as a share by memory, as a fairway.dev/gpu-memory pod is counted (docs/dra.md,
// "Shares through DRA"). What a share cannot say is unserved: a capacity other than the device's
// memory (DRAMemoryCapacity), and capacity asked of more than one device (a count above one, or
// allocation mode All). The webhook refuses a pod with such a claim of NVIDIA's classes in a
// served namespace (kube-scheduler would allocate GPUs charged to no queue) and any that names
// fairway's scheduler, and leaves one for another device to kube-scheduler with a warning; the
// scheduler reports one that reaches it anyway as ReasonUnsupported instead of counting it
// wrongly. All read this one
// function. Nil when fairway serves the claim.
func UnservedClaimRequests(spec *resourceapi.ResourceClaimSpec) []string {
	var what []string
	check := func(where, class string, mode resourceapi.DeviceAllocationMode, count int64, c *resourceapi.CapacityRequirements) {
		if class == NVIDIAMIGDeviceClass && (mode == resourceapi.DeviceAllocationModeAll || count > 1) {
			what = append(what, fmt.Sprintf("%s: more than one MIG device (a share is one MIG device)", where))
			return
		}
		if c == nil || len(c.Requests) == 0 {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			if name != DRAMemoryCapacity {
				what = append(what, fmt.Sprintf("%s: capacity %q (a share of a GPU is counted by its %q only)", where, name, DRAMemoryCapacity))
				return
			}
		}
		if mode == resourceapi.DeviceAllocationModeAll || count > 1 {
			what = append(what, fmt.Sprintf("%s: capacity of more than one device (a share is a part of one GPU)", where))
		}
	}
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			check(fmt.Sprintf("request %q", r.Name), r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Capacity)
		}
		for _, s := range r.FirstAvailable {
			check(fmt.Sprintf("request %q, subrequest %q", r.Name, s.Name), s.DeviceClassName, s.AllocationMode, s.Count, s.Capacity)
		}
	}
	return what
}

// GPUClasses says which DeviceClasses' requests are for GPUs and which for partitions of GPUs
// (MIG devices). NVIDIAClasses are NVIDIA's; the scheduler also reads the classes' labels
// (DeviceClassResourceLabel).
//
// +kubebuilder:object:generate=false
type GPUClasses interface {
	IsGPUClass(name string) bool
	IsPartitionClass(name string) bool
}

// NVIDIAClasses are NVIDIA's classes: NVIDIAGPUDeviceClass and NVIDIAMIGDeviceClass.
var NVIDIAClasses GPUClasses = nvidiaClasses{}

// +kubebuilder:object:generate=false
type nvidiaClasses struct{}

func (nvidiaClasses) IsGPUClass(name string) bool       { return name == NVIDIAGPUDeviceClass }
func (nvidiaClasses) IsPartitionClass(name string) bool { return name == NVIDIAMIGDeviceClass }

// GPUShareAsk is a share of one GPU a claim asks for: the memory of a device that allows several
// allocations (MemoryBytes), or a partition of a GPU (Partition).
//
// +kubebuilder:object:generate=false
type GPUShareAsk struct {
	MemoryBytes int64
	Partition   bool
}

// ClaimGPUAsks is what a claim asks of GPUs as fairway counts it (the first alternative of a
// prioritized list): the number of whole GPUs (ExactCount requests of a GPU class; one for mode
// All, the allocation says how many it got) and the shares of GPUs (a request for the memory of
// one device of a GPU class; each device a request of a partition class asks for). Admin access
// asks for nothing. The webhook reads it with NVIDIAClasses and UnservedClaimMix, the scheduler
// with its configured classes.
func ClaimGPUAsks(spec *resourceapi.ResourceClaimSpec, classes GPUClasses) (whole int64, shares []GPUShareAsk) {
	for _, r := range spec.Devices.Requests {
		var class string
		var mode resourceapi.DeviceAllocationMode
		var count int64
		var capacity *resourceapi.CapacityRequirements
		switch {
		case r.Exactly != nil:
			if r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
				continue
			}
			class, mode, count, capacity = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Capacity
		case len(r.FirstAvailable) > 0:
			f := &r.FirstAvailable[0]
			class, mode, count, capacity = f.DeviceClassName, f.AllocationMode, f.Count, f.Capacity
		default:
			continue
		}
		n := max(count, 1)
		if mode == resourceapi.DeviceAllocationModeAll {
			n = 1
		}
		mem, byMemory := ClaimShareRequest(capacity)
		switch {
		case classes.IsPartitionClass(class):
			for range n {
				shares = append(shares, GPUShareAsk{Partition: true})
			}
		case !classes.IsGPUClass(class):
		case byMemory:
			shares = append(shares, GPUShareAsk{MemoryBytes: mem})
		default:
			whole += n
		}
	}
	return whole, shares
}

// UnservedClaimMix names what a pod's claims ask for together that fairway's accounting cannot
// hold, as it cannot for device-plugin pods: more than one share of a GPU, or a share and whole
// GPUs. "" when it can.
func UnservedClaimMix(whole, shares int64) string {
	if shares == 0 || (shares == 1 && whole == 0) {
		return ""
	}
	return fmt.Sprintf("the pod's claims ask for shares of GPUs (%d) and whole GPUs (%d): fairway counts whole GPUs or one share per pod", shares, whole)
}

// ClaimShareRequest returns the memory a device request asks of one shared device (consumable
// capacity), or false when it asks for whole devices.
func ClaimShareRequest(c *resourceapi.CapacityRequirements) (memory int64, ok bool) {
	if c == nil {
		return 0, false
	}
	q, ok := c.Requests[DRAMemoryCapacity]
	if !ok {
		return 0, false
	}
	return q.Value(), true
}
