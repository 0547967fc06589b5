package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A fractional pod's GPU reaches its container through the kubelet's own device assignment,
// never through anything in the pod's namespace (docs/isolation.md, "How a share gets its GPU"):
//
//   - the webhook makes the pod's GPU container ask for one ResourceGPUShare;
//   - the scheduler records the GPU it chose on the pod (GPUUUIDAnnotation, a binding key only
//     fairway's identities may write) before it binds the pod;
//   - the gpu-agent's device plugin advertises ShareSlotsPerGPU slots of ResourceGPUShare per
//     physical GPU (ShareSlotID), steers the kubelet to a slot of the chosen GPU
//     (GetPreferredAllocation) and answers the kubelet's Allocate with that GPU's CDI device
//     (CDIDeviceName) and its device nodes, refusing when no pod on the node waits for a share
//     of that GPU.
const (
	// ResourceGPUShare is the extended resource a fractional pod's GPU container asks for, one
	// per share. It is a ticket, not the share's size: the size is the pod's
	// GPUFractionAnnotation or GPUMemoryAnnotation, which the scheduler accounts; the scheduler
	// does not count this resource against the node (it would count the share twice).
	ResourceGPUShare corev1.ResourceName = Prefix + "gpu-share"

	// DefaultShareSlotsPerGPU is how many ResourceGPUShare slots the device plugin advertises
	// per GPU unless told otherwise: the kubelet's default maxPods, so that the kubelet never
	// refuses a share the scheduler placed for want of a slot.
	DefaultShareSlotsPerGPU = 110

	// ShareDevicePluginSocket is the device plugin's socket name in the kubelet's device-plugin
	// directory.
	ShareDevicePluginSocket = "fairway-gpu-share.sock"

	// CDIVendor and CDIClass make the CDI kind ("fairway.dev/gpu") of the spec the gpu-agent
	// writes: one device per physical GPU, named by its UUID, with that GPU's device node.
	CDIVendor = "fairway.dev"
	CDIClass  = "gpu"
	// CDISpecName is the file name of that spec in the CDI spec directory.
	CDISpecName = "fairway.dev-gpu.yaml"
)

// shareSlotSep separates a GPU's UUID from the slot number in a share slot's device ID.
const shareSlotSep = "::share-"

// CDIDeviceName is the fully qualified CDI name of the GPU uuid in the gpu-agent's spec.
func CDIDeviceName(uuid string) string { return CDIVendor + "/" + CDIClass + "=" + uuid }

// ShareSlotID is the device ID of slot k of the GPU uuid, as the device plugin advertises it and
// the kubelet's PodResources API reports it.
func ShareSlotID(uuid string, k int) string { return uuid + shareSlotSep + strconv.Itoa(k) }

// ParseShareSlotID returns the GPU of a share slot's device ID.
func ParseShareSlotID(id string) (uuid string, err error) {
	uuid, k, ok := strings.Cut(id, shareSlotSep)
	if !ok || uuid == "" {
		return "", fmt.Errorf("device ID %q: a %s slot is <GPU UUID>%s<n>", id, ResourceGPUShare, shareSlotSep)
	}
	if n, err := strconv.Atoi(k); err != nil || n < 0 {
		return "", fmt.Errorf("device ID %q: the slot number %q is not a non-negative integer", id, k)
	}
	return uuid, nil
}

// ShareRequest is how many ResourceGPUShare the pod's containers (init containers included) ask
// for, as limits (an extended resource's request equals its limit).
func ShareRequest(p *corev1.Pod) int64 {
	var n int64
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			if q, ok := c.Resources.Limits[ResourceGPUShare]; ok {
				n += q.Value()
			}
		}
	}
	return n
}
