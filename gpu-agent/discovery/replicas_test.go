//go:build cgo

package discovery_test

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
)

// timeSliced is the node object of a mock node whose device plugin advertises every GPU
// replicas times (capacity), with GPU feature discovery's labels when labels is set.
func timeSliced(gpus, replicas int, labels bool) *corev1.Node {
	n := &corev1.Node{}
	n.Status.Capacity = corev1.ResourceList{fairwayv1alpha1.ResourceGPU: *resource.NewQuantity(int64(gpus*replicas), resource.DecimalSI)}
	if labels {
		n.Labels = map[string]string{
			fairwayv1alpha1.NVIDIAReplicasLabel:        strconv.Itoa(replicas),
			fairwayv1alpha1.NVIDIASharingStrategyLabel: "time-slicing",
		}
	}
	return n
}

// replicaIDs are the device IDs a time-slicing device plugin advertises for the mock node's
// GPUs: "<UUID>::<replica>", or "<index>::<replica>" with --device-id-strategy=index.
func replicaIDs(gpus, replicas int, byIndex bool) []string {
	var ids []string
	for i := range gpus {
		for r := range replicas {
			base := fakegpu.DeviceUUID(node, i)
			if byIndex {
				base = strconv.Itoa(i)
			}
			ids = append(ids, fmt.Sprintf("%s::%d", base, r))
		}
	}
	return ids
}

// TestReplicasOfATimeSlicedMockNode: a DGX H100 mock node (8 GPUs from NVML) whose device
// plugin advertises each GPU 4 times is found time-sliced by every sign alone, and a node that
// advertises each GPU once is not.
func TestReplicasOfATimeSlicedMockNode(t *testing.T) {
	_, lib := newNode(t, "dgxh100")
	res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	inv := &res.Inventory
	if len(inv.GPUs) != 8 {
		t.Fatalf("mock node has %d GPUs, want 8", len(inv.GPUs))
	}
	var once []string
	for _, g := range inv.GPUs {
		once = append(once, g.UUID)
	}
	cases := map[string]struct {
		adv  discovery.Advertised
		want int32
	}{
		"capacity a multiple of the GPUs":      {discovery.AdvertisedBy(timeSliced(8, 4, false), nil), 4},
		"kubelet lists each UUID four times":   {discovery.AdvertisedBy(&corev1.Node{}, replicaIDs(8, 4, false)), 4},
		"kubelet lists each index four times":  {discovery.AdvertisedBy(nil, replicaIDs(8, 4, true)), 4},
		"feature discovery's labels":           {discovery.AdvertisedBy(&corev1.Node{ObjectMeta: timeSliced(8, 4, true).ObjectMeta}, nil), 4},
		"all three":                            {discovery.AdvertisedBy(timeSliced(8, 4, true), replicaIDs(8, 4, false)), 4},
		"signs disagree: the most counts":      {discovery.AdvertisedBy(timeSliced(8, 2, true), replicaIDs(8, 3, false)), 3},
		"capacity not a multiple rounds up":    {discovery.Advertised{Capacity: 9}, 2},
		"each GPU advertised once":             {discovery.AdvertisedBy(timeSliced(8, 1, true), once), 0},
		"fewer devices than GPUs":              {discovery.Advertised{Capacity: 7}, 0},
		"nothing known":                        {discovery.Advertised{}, 0},
		"strategy none":                        {discovery.Advertised{Labels: map[string]string{fairwayv1alpha1.NVIDIAReplicasLabel: "4", fairwayv1alpha1.NVIDIASharingStrategyLabel: "none"}}, 0},
		"device plugin's MPS sharing":          {discovery.Advertised{Labels: map[string]string{fairwayv1alpha1.NVIDIAReplicasLabel: "2", fairwayv1alpha1.NVIDIASharingStrategyLabel: "mps"}}, 2},
		"older feature discovery, no strategy": {discovery.Advertised{Labels: map[string]string{fairwayv1alpha1.NVIDIAReplicasLabel: "2"}}, 2},
		"bad label":                            {discovery.Advertised{Labels: map[string]string{fairwayv1alpha1.NVIDIAReplicasLabel: "many"}}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, why := discovery.Replicas(inv, tc.adv)
			if got != tc.want {
				t.Errorf("Replicas = %d (%s), want %d", got, why, tc.want)
			}
			if (got > 0) != (why != "") {
				t.Errorf("Replicas = %d with reason %q", got, why)
			}
			if got > 0 {
				// What the scheduler makes of it: the node's 8 physical GPUs, not one per replica.
				pub := *inv
				pub.Replicas = got
				if n := pub.PhysicalGPUs(int64(8 * got)); n != 8 {
					t.Errorf("PhysicalGPUs(%d) = %d, want 8", 8*got, n)
				}
			}
		})
	}
}

// TestReplicasIgnoresCapacityOnMIGNodes: with the device plugin's "single" MIG strategy a GPU's
// MIG instances are each an nvidia.com/gpu device, which is no sharing of one device.
func TestReplicasIgnoresCapacityOnMIGNodes(t *testing.T) {
	inv := &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{
		{Index: 0, UUID: "GPU-a", MIGEnabled: true, Healthy: true},
		{Index: 1, UUID: "GPU-b", MIGEnabled: true, Healthy: true},
	}}
	if got, why := discovery.Replicas(inv, discovery.Advertised{Capacity: 14, DeviceIDs: []string{"MIG-1", "MIG-2", "MIG-3"}}); got != 0 {
		t.Errorf("Replicas = %d (%s), want 0", got, why)
	}
}
