package cache

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// IndexResourceClaim indexes fairway's pods by <namespace>/<ResourceClaim> of every DRA claim
// they use (resolved through the pod's status for claims made from templates).
const IndexResourceClaim = "resourceclaim"

// newDRAInformers watches DeviceClasses, ResourceSlices and ResourceClaims (resource.k8s.io/v1),
// the objects the engine's DRA allocator reads (docs/dra.md). They are stored as they come,
// less managed fields: the allocator reads their specs whole.
func (inf *Informers) newDRAInformers(cs kubernetes.Interface) {
	res := cs.ResourceV1()
	inf.DeviceClasses = newInformer(typedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.DeviceClasses().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.DeviceClasses().Watch(ctx, o)
		}), &resourceapi.DeviceClass{}, nil)
	inf.ResourceSlices = newInformer(typedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.ResourceSlices().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.ResourceSlices().Watch(ctx, o)
		}), &resourceapi.ResourceSlice{}, nil)
	inf.ResourceClaims = newInformer(typedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.ResourceClaims("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.ResourceClaims("").Watch(ctx, o)
		}), &resourceapi.ResourceClaim{}, nil)
}

// draHandlers are the DRA informers' event kinds and what makes an update relevant.
func (inf *Informers) draHandlers() []struct {
	inf      cache.SharedIndexInformer
	kind     Kind
	relevant func(old, cur any) bool
} {
	return []struct {
		inf      cache.SharedIndexInformer
		kind     Kind
		relevant func(old, cur any) bool
	}{
		{inf.DeviceClasses, KindDeviceClass, generationChanged},
		{inf.ResourceSlices, KindResourceSlice, func(old, cur any) bool {
			return !equality.Semantic.DeepEqual(old.(*resourceapi.ResourceSlice).Spec, cur.(*resourceapi.ResourceSlice).Spec)
		}},
		{inf.ResourceClaims, KindResourceClaim, func(old, cur any) bool {
			a, b := old.(*resourceapi.ResourceClaim), cur.(*resourceapi.ResourceClaim)
			return (a.Status.Allocation == nil) != (b.Status.Allocation == nil) || len(a.Status.ReservedFor) != len(b.Status.ReservedFor)
		}},
	}
}

// trimManaged drops an object's managed fields, the only part of a DRA object fairway does not
// read.
func trimManaged[T any, PT interface {
	*T
	metav1.Object
}](o *T) *T {
	PT(o).SetManagedFields(nil)
	return o
}

func indexResourceClaim(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || len(p.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	var out []string
	for i := range p.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i]); err == nil && name != nil {
			out = append(out, p.Namespace+"/"+*name)
		}
	}
	return out, nil
}

// DeviceClass returns a DeviceClass, or nil.
func (inf *Informers) DeviceClass(name string) *resourceapi.DeviceClass {
	return get[resourceapi.DeviceClass](inf.DeviceClasses.GetStore(), name)
}

// ResourceSlice returns a ResourceSlice, or nil.
func (inf *Informers) ResourceSlice(name string) *resourceapi.ResourceSlice {
	return get[resourceapi.ResourceSlice](inf.ResourceSlices.GetStore(), name)
}

// ResourceClaim returns a ResourceClaim, or nil. The object is shared: never modify it.
func (inf *Informers) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	return get[resourceapi.ResourceClaim](inf.ResourceClaims.GetStore(), nsKey(namespace, name))
}

// ResourceClaimsAllocating returns the claims whose allocation names a device (driver, pool,
// device), other than skip: the binder's last check before it writes an allocation.
func (inf *Informers) ResourceClaimsAllocating(driver, pool, device string, skip *resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, o := range inf.ResourceClaims.GetStore().List() {
		c := o.(*resourceapi.ResourceClaim)
		if c.Status.Allocation == nil || (skip != nil && c.UID == skip.UID) {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driver && r.Pool == pool && r.Device == device && (r.AdminAccess == nil || !*r.AdminAccess) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// ClaimConflict names a claim other than claim that the informers show allocating one of
// alloc's devices, or returns "" (binder.ClaimConflict).
func (inf *Informers) ClaimConflict(alloc *resourceapi.AllocationResult, claim *resourceapi.ResourceClaim) string {
	for _, r := range alloc.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		if other := inf.ResourceClaimsAllocating(r.Driver, r.Pool, r.Device, claim); len(other) > 0 {
			return other[0].Namespace + "/" + other[0].Name
		}
	}
	return ""
}
