package cache

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// TestClaimConflictShares: the binder's last check before it writes an allocation lets parts of
// a shared device (consumable capacity) sit beside each other while they fit the device's
// memory, and refuses them beside a whole allocation of the device or past its memory.
func TestClaimConflictShares(t *testing.T) {
	store := func() cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
	}
	inf := &Informers{ResourceClaims: store(), ResourceSlices: store()}
	if err := inf.ResourceSlices.GetStore().Add(testutil.SharedGPUSlice("n0", 1, "NVIDIA H100 80GB HBM3", 80)); err != nil {
		t.Fatal(err)
	}
	share := func(uid, mem string) *resourceapi.AllocationResult {
		return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n0", Device: "gpu-0", ShareID: ptr.To(types.UID(uid)),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)},
		}}}}
	}
	claim := func(name string, alloc *resourceapi.AllocationResult) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: types.UID(name)},
			Status: resourceapi.ResourceClaimStatus{Allocation: alloc}}
	}
	if err := inf.ResourceClaims.GetStore().Add(claim("first", share("s1", "50Gi"))); err != nil {
		t.Fatal(err)
	}
	if got := inf.ClaimConflict(share("s2", "30Gi"), claim("mine", nil)); got != "" {
		t.Errorf("30Gi beside 50Gi of 80Gi: conflict %q, want none", got)
	}
	if got := inf.ClaimConflict(share("s2", "31Gi"), claim("mine", nil)); got == "" {
		t.Error("31Gi beside 50Gi of 80Gi: no conflict")
	}
	whole := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n0", Device: "gpu-0"}}}}
	if got := inf.ClaimConflict(whole, claim("mine", nil)); got != "a/first" {
		t.Errorf("the whole device beside a share: conflict %q, want a/first", got)
	}
	if err := inf.ResourceClaims.GetStore().Update(claim("first", whole)); err != nil {
		t.Fatal(err)
	}
	if got := inf.ClaimConflict(share("s2", "1Gi"), claim("mine", nil)); got != "a/first" {
		t.Errorf("a share beside the whole device: conflict %q, want a/first", got)
	}
}
