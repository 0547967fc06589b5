package testutil

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Dynamic Resource Allocation objects in the shape NVIDIA's DRA driver for GPUs publishes them
// (github.com/NVIDIA/k8s-dra-driver-gpu, Apache-2.0, read at commit 22407113:
// cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.GetDevice and Attributes, partitions.go
// fullGpuCapacity, deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml). Only
// the shape is taken, no code: driver gpu.nvidia.com, one pool per node named after the node,
// devices gpu-<minor> with the attributes type ("gpu"), uuid, productName, brand, architecture,
// cudaComputeCapability, driverVersion, cudaDriverVersion and the capacity memory; the
// DeviceClass gpu.nvidia.com selects them with CEL.

// NVIDIADeviceClass is the DeviceClass NVIDIA's chart installs for whole GPUs (without its
// extendedResourceName, which lets kube-scheduler serve nvidia.com/gpu requests from DRA).
func NVIDIADeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.NVIDIAGPUDeviceClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
		}}}},
	}
}

// nvidiaSlice is the empty ResourceSlice of NVIDIA's driver for a node: one pool named after it.
func nvidiaSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   v1alpha1.NVIDIAGPUDriver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
}

// NVIDIAGPUSlice is the ResourceSlice NVIDIA's kubelet plugin publishes for a node with gpus
// GPUs of one product (e.g. "NVIDIA H100 80GB HBM3") and memory GiB each.
func NVIDIAGPUSlice(node string, gpus int, product string, memGiB int64) *resourceapi.ResourceSlice {
	rs := nvidiaSlice(node)
	for i := range gpus {
		uuid := fmt.Sprintf("GPU-%s-%d", node, i)
		rs.Spec.Devices = append(rs.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                  {StringValue: ptr.To("gpu")},
				"uuid":                  {StringValue: ptr.To(uuid)},
				"productName":           {StringValue: ptr.To(product)},
				"brand":                 {StringValue: ptr.To("Nvidia")},
				"architecture":          {StringValue: ptr.To("Hopper")},
				"cudaComputeCapability": {VersionValue: ptr.To("9.0.0")},
				"driverVersion":         {VersionValue: ptr.To("570.124.6")},
				"cudaDriverVersion":     {VersionValue: ptr.To("12.8.0")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(memGiB<<30, resource.BinarySI)},
			},
		})
	}
	return rs
}

// GPUClaim is a ResourceClaim for count whole GPUs of NVIDIA's class; extra CEL selectors narrow
// the devices.
func GPUClaim(namespace, name string, count int64, selectors ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("claim-" + namespace + "/" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{GPURequest("gpu", count, selectors...)}}},
	}
	return c
}

// GPURequest is a device request for count GPUs of NVIDIA's class.
func GPURequest(name string, count int64, selectors ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: v1alpha1.NVIDIAGPUDeviceClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return r
}

// OwnedBy makes the claim one kube-controller-manager made for the pod from a template.
func OwnedBy(c *resourceapi.ResourceClaim, pod *corev1.Pod) *resourceapi.ResourceClaim {
	c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)})
	return c
}

// ClaimRef makes the pod use an existing claim.
func (p *PodWrapper) ClaimRef(podClaim, claim string) *PodWrapper {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimName: ptr.To(claim)})
	return p
}

// ClaimTemplate makes the pod use a claim made from a template; generated is the claim's name in
// the pod's status ("" while kube-controller-manager has not made it).
func (p *PodWrapper) ClaimTemplate(podClaim, template, generated string) *PodWrapper {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimTemplateName: ptr.To(template)})
	if generated != "" {
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(generated)})
	}
	return p
}

// SharedGPUSlice is NVIDIAGPUSlice with GPUs that claims may share by memory (consumable
// capacity, DRAConsumableCapacity): each device allows several allocations, and its memory is
// requested in steps of 1 GiB (a claim that names none consumes all of it: the whole GPU).
// NVIDIA's driver does not publish its GPUs so today (it shares a GPU through one claim's sharing config); a driver that
// lets claims ask for part of a GPU publishes this.
func SharedGPUSlice(node string, gpus int, product string, memGiB int64) *resourceapi.ResourceSlice {
	rs := NVIDIAGPUSlice(node, gpus, product, memGiB)
	gib := resource.MustParse("1Gi")
	for i := range rs.Spec.Devices {
		d := &rs.Spec.Devices[i]
		d.AllowMultipleAllocations = ptr.To(true)
		all := d.Capacity["memory"].Value
		d.Capacity["memory"] = resourceapi.DeviceCapacity{
			Value: all,
			// The API server requires a default with a valid range: the whole memory, so that
			// a claim that names no capacity gets the whole GPU.
			RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &all, ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &gib, Step: &gib}},
		}
	}
	return rs
}

// GPUShareClaim is a claim for memory of one GPU of NVIDIA's class (consumable capacity).
func GPUShareClaim(namespace, name, memory string) *resourceapi.ResourceClaim {
	c := GPUClaim(namespace, name, 1)
	c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
		Requests: map[resourceapi.QualifiedName]resource.Quantity{v1alpha1.DRAMemoryCapacity: resource.MustParse(memory)},
	}
	return c
}

// NVIDIAMIGDeviceClass is the DeviceClass NVIDIA's driver installs for MIG devices.
func NVIDIAMIGDeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.NVIDIAMIGDeviceClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
		}}}},
	}
}

// MIGPartition is a MIG device of an H100 80GB: its profile, GPU instance profile ID, the
// memory slices it holds (start, size) and its memory.
type MIGPartition struct {
	Profile         string
	ProfileID       int
	Start, Size     int
	MemoryMiB       int64
	Multiprocessors int64
}

// H100MIGLayout is one 3g.40gb and three 1g.10gb MIG devices per GPU (memory slices 0-3, 4, 5
// and 6), a layout nvidia-smi can create on an H100 80GB.
var H100MIGLayout = []MIGPartition{
	{Profile: "3g.40gb", ProfileID: 9, Start: 0, Size: 4, MemoryMiB: 40320, Multiprocessors: 60},
	{Profile: "1g.10gb", ProfileID: 19, Start: 4, Size: 1, MemoryMiB: 9856, Multiprocessors: 16},
	{Profile: "1g.10gb", ProfileID: 19, Start: 5, Size: 1, MemoryMiB: 9856, Multiprocessors: 16},
	{Profile: "1g.10gb", ProfileID: 19, Start: 6, Size: 1, MemoryMiB: 9856, Multiprocessors: 16},
}

// MIGSlice is the ResourceSlice NVIDIA's kubelet plugin publishes for a node whose gpus GPUs are
// in MIG mode with layout: the MIG devices only (the GPUs themselves are not allocatable then),
// named gpu-<minor>-mig-<profile ID>-<start>-<size>, with the attributes type (mig), uuid,
// parentUUID, profile and the parent's productName, and the capacities memory,
// multiprocessors and memorySlice<N> for each memory slice held (the driver's deviceinfo.go).
func MIGSlice(node string, gpus int, product string, layout []MIGPartition) *resourceapi.ResourceSlice {
	rs := nvidiaSlice(node)
	for i := range gpus {
		parent := fmt.Sprintf("GPU-%s-%d", node, i)
		for _, p := range layout {
			d := resourceapi.Device{
				Name: fmt.Sprintf("gpu-%d-mig-%d-%d-%d", i, p.ProfileID, p.Start, p.Size),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"type":         {StringValue: ptr.To("mig")},
					"uuid":         {StringValue: ptr.To(fmt.Sprintf("MIG-%s-%d-%d", node, i, p.Start))},
					"parentUUID":   {StringValue: ptr.To(parent)},
					"profile":      {StringValue: ptr.To(p.Profile)},
					"productName":  {StringValue: ptr.To(product)},
					"brand":        {StringValue: ptr.To("Nvidia")},
					"architecture": {StringValue: ptr.To("Hopper")},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory":          {Value: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)},
					"multiprocessors": {Value: *resource.NewQuantity(p.Multiprocessors, resource.BinarySI)},
				},
			}
			for s := p.Start; s < p.Start+p.Size; s++ {
				d.Capacity[resourceapi.QualifiedName(fmt.Sprintf("memorySlice%d", s))] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(1, resource.BinarySI)}
			}
			rs.Spec.Devices = append(rs.Spec.Devices, d)
		}
	}
	return rs
}

// MIGClaim is a claim for one MIG device of a profile (e.g. "1g.10gb"), by NVIDIA's MIG class.
func MIGClaim(namespace, name, profile string) *resourceapi.ResourceClaim {
	c := GPUClaim(namespace, name, 1, fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", profile))
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = v1alpha1.NVIDIAMIGDeviceClass
	return c
}
