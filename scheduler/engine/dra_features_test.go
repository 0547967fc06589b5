package engine

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// TestDRAClaimSharesAreWhatTheAllocatorServes ties v1alpha1.UnservedClaimRequests, which the
// webhook and the snapshot read to keep pods away from fairway, and the snapshot's reading of a
// claim as whole GPUs or a share by memory, to what the engine's allocator (draFeatures) does
// with the claim on GPUs that allow several allocations: every claim the function passes gets
// what fairway counts (whole devices, or one part of one device consuming the memory asked for,
// rounded up to the device's step); the ones it names are those fairway could not count.
func TestDRAClaimSharesAreWhatTheAllocatorServes(t *testing.T) {
	capacity := func(name resourceapi.QualifiedName, q string) *resourceapi.CapacityRequirements {
		return &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{name: resource.MustParse(q)}}
	}
	cases := map[string]struct {
		claim    func(*resourceapi.ResourceClaim)
		unserved bool
		// share is the memory the one device's part consumes; "" for whole devices.
		share string
	}{
		"whole GPUs": {claim: func(*resourceapi.ResourceClaim) {}},
		"a prioritized list": {claim: func(c *resourceapi.ResourceClaim) {
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "one", DeviceClassName: r.Exactly.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
			r.Exactly = nil
		}},
		"a share by memory": {share: "20Gi", claim: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Capacity = capacity(v1alpha1.DRAMemoryCapacity, "20Gi")
		}},
		"a share rounded up to the device's step": {share: "3Gi", claim: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Capacity = capacity(v1alpha1.DRAMemoryCapacity, "2500Mi")
		}},
		"a share in a subrequest": {share: "40Gi", claim: func(c *resourceapi.ResourceClaim) {
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "part", DeviceClassName: r.Exactly.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Capacity: capacity(v1alpha1.DRAMemoryCapacity, "40Gi")}}
			r.Exactly = nil
		}},
		"a capacity other than memory": {unserved: true, claim: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Capacity = capacity("multiprocessors", "10")
		}},
		"shares of two devices": {unserved: true, claim: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Count = 2
			c.Spec.Devices.Requests[0].Exactly.Capacity = capacity(v1alpha1.DRAMemoryCapacity, "20Gi")
		}},
	}
	node := testutil.MakeNode("n0").Obj()
	snap := snapshot.New()
	snap.UpsertDeviceClass(testutil.NVIDIADeviceClass())
	snap.UpsertResourceSlice(testutil.SharedGPUSlice("n0", 2, "NVIDIA H100 80GB HBM3", 80))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := testutil.GPUClaim("team-a", "c", 1)
			tc.claim(c)
			what := v1alpha1.UnservedClaimRequests(&c.Spec)
			if got := len(what) > 0; got != tc.unserved {
				t.Fatalf("UnservedClaimRequests = %q, want unserved %v", what, tc.unserved)
			}
			if tc.unserved {
				return
			}
			alloc, err := structured.NewAllocator(context.Background(), draFeatures, snap.AllocatedState(),
				snap.DeviceClasses(), snap.DRASlices("n0"), newCELCache())
			if err != nil {
				t.Fatal(err)
			}
			results, err := alloc.Allocate(context.Background(), node, []*resourceapi.ResourceClaim{c})
			if err != nil || len(results) != 1 || len(results[0].Devices.Results) != 1 {
				t.Fatalf("results %v, err %v: want one device", results, err)
			}
			r := results[0].Devices.Results[0]
			slot := &snapshot.GPUSlot{MemoryMiB: 80 << 10}
			memMiB, shared := snapshot.ShareOfDevice(&r, slot)
			if tc.share == "" {
				if shared {
					t.Errorf("whole-GPU claim got a part of a device that fairway counts as a share of %d MiB: %+v", memMiB, r)
				}
				return
			}
			if want := resource.MustParse(tc.share); !shared || memMiB<<20 != want.Value() {
				t.Errorf("share claim counted as share %v of %d MiB, want a share of %s", shared, memMiB, tc.share)
			}
			got := r.ConsumedCapacity[v1alpha1.DRAMemoryCapacity]
			if r.ShareID == nil || got.Cmp(resource.MustParse(tc.share)) != 0 {
				t.Errorf("share claim: share ID %v, consumed memory %s; want a share consuming %s", r.ShareID, got.String(), tc.share)
			}
		})
	}
}
