package discovery

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Advertised is what the node says about the nvidia.com/gpu devices its device plugin offers:
// the evidence Replicas reads. Every part is optional.
type Advertised struct {
	// DeviceIDs are the nvidia.com/gpu devices the kubelet can hand out (the PodResources API's
	// GetAllocatableResources); nil when the kubelet did not say. A time-sliced GPU appears once
	// per replica, as "<UUID or index>::<replica>".
	DeviceIDs []string
	// Capacity is the node's nvidia.com/gpu capacity (every device, healthy or not); 0 when
	// the node has none or it is unknown.
	Capacity int64
	// Labels are the node's labels: GPU feature discovery's nvidia.com/gpu.replicas and
	// nvidia.com/gpu.sharing-strategy.
	Labels map[string]string
}

// AdvertisedBy gathers the evidence from the agent's node object and the device IDs the kubelet
// lists as allocatable (nil when unknown).
func AdvertisedBy(node *corev1.Node, deviceIDs []string) Advertised {
	adv := Advertised{DeviceIDs: deviceIDs}
	if node == nil {
		return adv
	}
	adv.Labels = node.Labels
	if q, ok := node.Status.Capacity[fairwayv1alpha1.ResourceGPU]; ok {
		adv.Capacity = max(q.Value(), 0)
	}
	return adv
}

// Replicas works out how many devices the device plugin advertises for each physical GPU of
// inv: 0 when each GPU is advertised once, else the largest count any of three signs gives
// (the scheduler counts a node's GPUs as advertised / Replicas, so erring high costs capacity,
// erring low lets two whole-GPU holders share a device):
//
//   - the kubelet's device IDs: the most times one GPU's ID appears (replica suffixes stripped);
//   - GPU feature discovery's labels: nvidia.com/gpu.replicas, unless the sharing strategy
//     says "none" (a device plugin sharing through MPS replicates GPUs the same way);
//   - the node's capacity against the GPUs NVML lists, rounded up: on a node with no GPU in MIG
//     mode (the device plugin's "single" MIG strategy advertises MIG instances as
//     nvidia.com/gpu, so more devices than GPUs is no sign of sharing there).
//
// why says which signs counted, for the agent's log; it is empty when Replicas is 0.
func Replicas(inv *fairwayv1alpha1.GPUInventory, adv Advertised) (replicas int32, why string) {
	var reasons []string
	note := func(n int64, format string, args ...any) {
		if n <= 1 {
			return
		}
		reasons = append(reasons, fmt.Sprintf(format, args...))
		replicas = max(replicas, int32(min(n, 1<<20)))
	}

	perGPU := map[string]int64{}
	var most int64
	for _, id := range adv.DeviceIDs {
		base, _, _ := strings.Cut(id, "::")
		perGPU[base]++
		most = max(most, perGPU[base])
	}
	note(most, "the kubelet lists a GPU %d times", most)

	if strategy := adv.Labels[fairwayv1alpha1.NVIDIASharingStrategyLabel]; strategy != "none" {
		if n, err := strconv.ParseInt(adv.Labels[fairwayv1alpha1.NVIDIAReplicasLabel], 10, 64); err == nil {
			note(n, "%s=%d (sharing strategy %q)", fairwayv1alpha1.NVIDIAReplicasLabel, n, strategy)
		}
	}

	gpus, mig := int64(0), false
	if inv != nil {
		for _, g := range inv.GPUs {
			gpus++
			mig = mig || g.MIGEnabled
		}
	}
	if gpus > 0 && !mig && adv.Capacity > gpus {
		n := (adv.Capacity + gpus - 1) / gpus
		note(n, "%s capacity %d for %d GPUs", fairwayv1alpha1.ResourceGPU, adv.Capacity, gpus)
	}
	if replicas <= 1 {
		return 0, ""
	}
	return replicas, strings.Join(reasons, "; ")
}
