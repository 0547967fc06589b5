package cache

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// IndexResourceClaim indexes fairway's pods by <namespace>/<ResourceClaim> of every DRA claim
// they use (resolved through the pod's status for claims made from templates).
const IndexResourceClaim = "resourceclaim"

// draKinds are the rows of the DRA objects in the table of watched kinds: DeviceClasses,
// ResourceSlices and ResourceClaims (resource.k8s.io/v1), the objects the engine's DRA allocator
// reads (docs/dra.md). They are stored as they come, less managed fields: the allocator reads
// their specs whole.
func (inf *Informers) draKinds(cs kubernetes.Interface) []watched {
	res := cs.ResourceV1()
	return []watched{
		{&inf.DeviceClasses, clientLW[*resourceapi.DeviceClassList](res.DeviceClasses(), ""), &resourceapi.DeviceClass{}, nil,
			transform(trimManaged[resourceapi.DeviceClass]), KindDeviceClass, generationChanged},
		{&inf.ResourceSlices, clientLW[*resourceapi.ResourceSliceList](res.ResourceSlices(), ""), &resourceapi.ResourceSlice{}, nil,
			transform(trimManaged[resourceapi.ResourceSlice]), KindResourceSlice, func(old, cur any) bool {
				return !equality.Semantic.DeepEqual(old.(*resourceapi.ResourceSlice).Spec, cur.(*resourceapi.ResourceSlice).Spec)
			}},
		{&inf.ResourceClaims, clientLW[*resourceapi.ResourceClaimList](res.ResourceClaims(""), ""), &resourceapi.ResourceClaim{}, nil,
			transform(trimManaged[resourceapi.ResourceClaim]), KindResourceClaim, func(old, cur any) bool {
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

// ClaimConflict names a claim other than claim that the informers show taking one of alloc's
// devices, or returns "" (binder.ClaimConflict). A device allocated whole conflicts with any
// other allocation of it; a part of a shared device (consumable capacity) conflicts with a
// whole allocation of the device, or with the other parts when together they consume more of
// a capacity than the device's ResourceSlice has.
func (inf *Informers) ClaimConflict(alloc *resourceapi.AllocationResult, claim *resourceapi.ResourceClaim) string {
	for _, r := range alloc.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		others := inf.ResourceClaimsAllocating(r.Driver, r.Pool, r.Device, claim)
		if len(others) == 0 {
			continue
		}
		if r.ShareID == nil {
			return others[0].Namespace + "/" + others[0].Name
		}
		consumed := map[resourceapi.QualifiedName]*resource.Quantity{}
		for name, q := range r.ConsumedCapacity {
			consumed[name] = ptr.To(q.DeepCopy())
		}
		for _, o := range others {
			for _, or := range o.Status.Allocation.Devices.Results {
				if or.Driver != r.Driver || or.Pool != r.Pool || or.Device != r.Device || (or.AdminAccess != nil && *or.AdminAccess) {
					continue
				}
				if or.ShareID == nil {
					return o.Namespace + "/" + o.Name
				}
				for name, q := range or.ConsumedCapacity {
					if c := consumed[name]; c != nil {
						c.Add(q)
					}
				}
			}
		}
		capacity := inf.deviceCapacity(r.Driver, r.Pool, r.Device)
		for name, q := range consumed {
			if c, ok := capacity[name]; ok && q.Cmp(c.Value) > 0 {
				return others[0].Namespace + "/" + others[0].Name + " (and the other claims sharing the device)"
			}
		}
	}
	return ""
}

// deviceCapacity is the capacity a device's ResourceSlice publishes, nil if no slice has it.
func (inf *Informers) deviceCapacity(driver, pool, device string) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	for _, o := range inf.ResourceSlices.GetStore().List() {
		rs := o.(*resourceapi.ResourceSlice)
		if rs.Spec.Driver != driver || rs.Spec.Pool.Name != pool {
			continue
		}
		for i := range rs.Spec.Devices {
			if rs.Spec.Devices[i].Name == device {
				return rs.Spec.Devices[i].Capacity
			}
		}
	}
	return nil
}
