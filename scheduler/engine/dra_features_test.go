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

// TestDRAUnservedClaimsAreWhatTheAllocatorIgnores ties v1alpha1.UnservedClaimRequests, which the
// webhook and the snapshot read to keep such pods away from fairway, to the features the
// engine's allocator runs with. With draFeatures, structured.NewAllocator picks the allocator
// that does not know capacity requests at all: it gives such a claim a whole device, whatever
// capacity it asks for (here 200Gi of an 80 GiB GPU), and fairway would count a whole GPU. Every
// claim the function passes, the allocator serves as asked; every claim it names, the allocator
// serves wrongly. When draFeatures gains ConsumableCapacity, the second half fails: then fairway
// serves capacity requests, and UnservedClaimRequests must say so.
func TestDRAUnservedClaimsAreWhatTheAllocatorIgnores(t *testing.T) {
	capacity := &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		v1alpha1.DRAMemoryCapacity: resource.MustParse("200Gi"),
	}}
	cases := map[string]struct {
		claim    func(*resourceapi.ResourceClaim)
		unserved bool
	}{
		"whole GPUs": {claim: func(*resourceapi.ResourceClaim) {}},
		"a prioritized list": {claim: func(c *resourceapi.ResourceClaim) {
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "one", DeviceClassName: r.Exactly.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
			r.Exactly = nil
		}},
		"capacity requests": {unserved: true, claim: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Capacity = capacity
		}},
		"capacity requests in a subrequest": {unserved: true, claim: func(c *resourceapi.ResourceClaim) {
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "part", DeviceClassName: r.Exactly.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Capacity: capacity}}
			r.Exactly = nil
		}},
	}
	node := testutil.MakeNode("n0").Obj()
	snap := snapshot.New()
	snap.UpsertDeviceClass(testutil.NVIDIADeviceClass())
	snap.UpsertResourceSlice(testutil.NVIDIAGPUSlice("n0", 2, "NVIDIA H100 80GB HBM3", 80))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := testutil.GPUClaim("team-a", "c", 1)
			tc.claim(c)
			what := v1alpha1.UnservedClaimRequests(&c.Spec)
			if got := len(what) > 0; got != tc.unserved {
				t.Fatalf("UnservedClaimRequests = %q, want unserved %v", what, tc.unserved)
			}
			alloc, err := structured.NewAllocator(context.Background(), draFeatures, structured.AllocatedState{},
				snap.DeviceClasses(), snap.DRASlices("n0"), newCELCache())
			if err != nil {
				t.Fatal(err)
			}
			results, err := alloc.Allocate(context.Background(), node, []*resourceapi.ResourceClaim{c})
			if err != nil || len(results) != 1 || len(results[0].Devices.Results) != 1 {
				t.Fatalf("results %v, err %v: want one whole device", results, err)
			}
			if r := results[0].Devices.Results[0]; tc.unserved && (r.ShareID != nil || len(r.ConsumedCapacity) > 0) {
				t.Errorf("the allocator read the capacity requests of a claim UnservedClaimRequests names (%+v): fairway serves them now; update UnservedClaimRequests and docs/dra.md", r)
			}
		})
	}
}
