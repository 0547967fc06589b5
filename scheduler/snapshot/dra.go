package snapshot

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Dynamic Resource Allocation (resource.k8s.io/v1) in the snapshot.
//
// The snapshot keeps the DRA objects the engine's allocator reads (DeviceClasses, ResourceSlices,
// ResourceClaims) and turns the GPU devices of a node's ResourceSlices into the node's GPU slots,
// so that a pod whose claims ask for GPU devices is placed, counted against its queue, reclaimed
// and preempted exactly like a pod asking for nvidia.com/gpu: the slots are what quotas, fair
// share, gangs and topology already count. Which devices a claim gets on a node is the structured
// allocator's choice (k8s.io/dynamic-resource-allocation, kube-scheduler's), made by the engine;
// the slots those devices are become the pod's whole GPUs.
//
// A node whose ResourceSlices publish GPU devices (v1alpha1.IsDRAGPUDevice), or MIG devices of
// GPUs in MIG mode, is a DRA node: its slots are those GPUs, in the order of their names, and
// its nvidia.com/gpu allocatable is not read (NVIDIA's DRA driver and device plugin must not hand
// out the same GPUs). Device-plugin pods (nvidia.com/gpu, GPU shares by annotation) do not go to
// DRA nodes, and pods whose claims ask for GPUs go only to DRA nodes. A claim for part of a GPU
// (a part of a device that allows several allocations, or a MIG device) is a share of its slot,
// as a fairway.dev/gpu-memory or gpu-fraction pod's is.
//
// Every device allocated by a claim the snapshot knows (in the API, or assumed by the engine and
// not yet written) is in the allocated state the allocator gets; a GPU device allocated by a claim
// no bound pod of the snapshot holds (another scheduler's pod, a claim whose pod is gone and that
// kube-controller-manager has not deallocated yet) keeps its slot from looking empty
// (GPUSlot.Claimed).

// ProblemClaim: a ResourceClaim of the pod does not exist yet (kube-controller-manager creates
// the claims of ResourceClaimTemplates) or cannot be read.
const ProblemClaim = "ResourceClaimPending"

// DRAConfig says which DRA devices and device classes are GPUs.
type DRAConfig struct {
	// GPUDrivers are the DRA drivers whose devices are GPUs (their attribute "type", when set,
	// is "gpu"). Default: v1alpha1.NVIDIAGPUDriver.
	GPUDrivers []string
	// GPUClasses are the DeviceClasses whose requests count as GPU requests before they are
	// allocated (a pending pod's demand). A class labelled v1alpha1.DeviceClassResourceLabel=gpu
	// is one too. Default: v1alpha1.NVIDIAGPUDeviceClass.
	GPUClasses []string
	// PartitionClasses are the DeviceClasses whose requests are for partitions of GPUs (MIG
	// devices), each a share of its GPU. A class labelled
	// v1alpha1.DeviceClassResourceLabel=gpu-partition is one too. Default:
	// v1alpha1.NVIDIAMIGDeviceClass.
	PartitionClasses []string
}

// DefaultDRAConfig is NVIDIA's DRA driver for GPUs.
func DefaultDRAConfig() DRAConfig {
	return DRAConfig{GPUDrivers: []string{v1alpha1.NVIDIAGPUDriver}, GPUClasses: []string{v1alpha1.NVIDIAGPUDeviceClass},
		PartitionClasses: []string{v1alpha1.NVIDIAMIGDeviceClass}}
}

// Claim is a ResourceClaim as the snapshot knows it.
type Claim struct {
	Key types.NamespacedName
	// Obj is the informer's claim; nil while only pods name it.
	Obj *resourceapi.ResourceClaim
	// Assumed is the allocation the engine chose for the claim and the runtime has not written
	// yet; AssumedBy the pod it was chosen with.
	Assumed   *resourceapi.AllocationResult
	AssumedBy *Task
	// counted is the allocation whose devices are in the snapshot's allocated set now.
	counted *resourceapi.AllocationResult
}

// Allocation is the claim's allocation: the engine's while it is assumed, else the API's.
func (c *Claim) Allocation() *resourceapi.AllocationResult {
	if c.Assumed != nil {
		return c.Assumed
	}
	if c.Obj != nil {
		return c.Obj.Status.Allocation
	}
	return nil
}

// HeldBy reports whether t holds the claim's GPU devices in the accounting: the pod the engine
// allocated it with, else the first pod the claim is reserved for, else the pod that owns it (a
// claim made from a template). A claim shared by several pods counts once, with its holder.
func (c *Claim) HeldBy(t *Task) bool {
	if c.AssumedBy != nil {
		return c.AssumedBy == t
	}
	if c.Obj == nil {
		return false
	}
	for _, r := range c.Obj.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			return r.UID == t.UID
		}
	}
	for _, o := range c.Obj.OwnerReferences {
		if o.Kind == "Pod" && o.UID == t.UID {
			return true
		}
	}
	// Nobody holds it yet: the pod that allocates it will.
	return c.Obj.Status.Allocation == nil
}

// ClaimAllocation is the engine's allocation of one claim, for the runtime to write.
type ClaimAllocation struct {
	Claim types.NamespacedName
	// UID is the claim's, for the write's precondition.
	UID types.UID
	// Result is nil for a claim that was already allocated: only the pod's reservation is
	// written then.
	Result *resourceapi.AllocationResult
}

// DRADevice is the device behind a GPU slot of a DRA node.
type DRADevice struct {
	ID structured.DeviceID
	// Product is the device's productName attribute.
	Product string
	// Partitioned is a GPU in MIG mode, published only as its MIG devices: ID is zero, and
	// claims hold parts of it (GPUOfResult).
	Partitioned bool
}

type draState struct {
	cfg     DRAConfig
	classes map[string]*resourceapi.DeviceClass
	slices  map[string]*resourceapi.ResourceSlice
	// byNode are the slices of one node (spec.nodeName); global the others (a node selector, all
	// nodes, or per-device node selection), which the allocator filters itself.
	byNode map[string][]*resourceapi.ResourceSlice
	global []*resourceapi.ResourceSlice
	claims map[types.NamespacedName]*Claim
	// allocated counts the claims that allocate each device whole; allocSet is its key set,
	// handed to the allocator as is.
	allocated map[structured.DeviceID]int
	allocSet  sets.Set[structured.DeviceID]
	// shares are the parts of devices claims allocate (consumable capacity: results with a
	// share ID), and consumed the capacity they consume per device, as kube-scheduler hands
	// them to the allocator.
	shares   sets.Set[structured.SharedDeviceID]
	consumed structured.ConsumedCapacityCollection
	// slotOf locates the GPU slot of a device of a DRA node.
	slotOf map[structured.DeviceID]slotRef
}

type slotRef struct {
	node string
	pos  int32
}

func (s *Snapshot) dra() *draState {
	if s.draS == nil {
		s.draS = &draState{
			cfg:       DefaultDRAConfig(),
			classes:   map[string]*resourceapi.DeviceClass{},
			slices:    map[string]*resourceapi.ResourceSlice{},
			byNode:    map[string][]*resourceapi.ResourceSlice{},
			claims:    map[types.NamespacedName]*Claim{},
			allocated: map[structured.DeviceID]int{},
			allocSet:  sets.New[structured.DeviceID](),
			shares:    sets.New[structured.SharedDeviceID](),
			consumed:  structured.NewConsumedCapacityCollection(),
			slotOf:    map[structured.DeviceID]slotRef{},
		}
	}
	return s.draS
}

// SetDRAConfig sets which devices and classes are GPUs. Call it before adding DRA objects.
func (s *Snapshot) SetDRAConfig(cfg DRAConfig) { s.dra().cfg = cfg }

// ---- Device classes -------------------------------------------------------------------------

// UpsertDeviceClass adds or updates a DeviceClass.
func (s *Snapshot) UpsertDeviceClass(c *resourceapi.DeviceClass) {
	if c == nil || c.Name == "" {
		return
	}
	s.dra().classes[c.Name] = c
}

// DeleteDeviceClass removes a DeviceClass.
func (s *Snapshot) DeleteDeviceClass(name string) {
	if s.draS != nil {
		delete(s.draS.classes, name)
	}
}

// DeviceClasses is the structured allocator's view of the classes (structured.DeviceClassLister).
func (s *Snapshot) DeviceClasses() structured.DeviceClassLister { return classLister{s.dra()} }

type classLister struct{ d *draState }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.d.classes))
	for _, c := range l.d.classes {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c := l.d.classes[name]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("device class %s: %w", name, ErrNotFound)
}

// IsPartitionClass reports whether requests of a class are for partitions of GPUs
// (v1alpha1.GPUClasses).
func (d *draState) IsPartitionClass(name string) bool {
	if slices.Contains(d.cfg.PartitionClasses, name) {
		return true
	}
	c := d.classes[name]
	return c != nil && c.Labels[v1alpha1.DeviceClassResourceLabel] == v1alpha1.DeviceClassResourceGPUPartition
}

// IsGPUClass reports whether requests of a class count as GPU requests (v1alpha1.GPUClasses).
func (d *draState) IsGPUClass(name string) bool {
	if slices.Contains(d.cfg.GPUClasses, name) {
		return true
	}
	c := d.classes[name]
	return c != nil && c.Labels[v1alpha1.DeviceClassResourceLabel] == v1alpha1.DeviceClassResourceGPU
}

// ---- Resource slices --------------------------------------------------------------------------

// UpsertResourceSlice adds or updates a ResourceSlice. A change of a node's GPU devices rebuilds
// the node's slots.
func (s *Snapshot) UpsertResourceSlice(rs *resourceapi.ResourceSlice) {
	if rs == nil || rs.Name == "" {
		return
	}
	d := s.dra()
	old := d.slices[rs.Name]
	if old != nil && equality.Semantic.DeepEqual(old.Spec, rs.Spec) {
		d.slices[rs.Name] = rs
		return
	}
	s.removeSlice(old)
	d.slices[rs.Name] = rs
	if n := nodeOfSlice(rs); n != "" {
		d.byNode[n] = append(d.byNode[n], rs)
		s.refreshDRANode(n)
	} else {
		d.global = append(d.global, rs)
	}
}

// DeleteResourceSlice removes a ResourceSlice.
func (s *Snapshot) DeleteResourceSlice(name string) {
	if s.draS == nil {
		return
	}
	old := s.draS.slices[name]
	delete(s.draS.slices, name)
	s.removeSlice(old)
}

func (s *Snapshot) removeSlice(old *resourceapi.ResourceSlice) {
	if old == nil {
		return
	}
	d := s.draS
	drop := func(l []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
		return slices.DeleteFunc(l, func(x *resourceapi.ResourceSlice) bool { return x.Name == old.Name })
	}
	if n := nodeOfSlice(old); n != "" {
		d.byNode[n] = drop(d.byNode[n])
		if len(d.byNode[n]) == 0 {
			delete(d.byNode, n)
		}
		s.refreshDRANode(n)
	} else {
		d.global = drop(d.global)
	}
}

func nodeOfSlice(rs *resourceapi.ResourceSlice) string {
	if rs.Spec.NodeName != nil {
		return *rs.Spec.NodeName
	}
	return ""
}

// DRASlices returns the slices the allocator needs for a node: the node's own and the global
// ones. Owned by the snapshot.
func (s *Snapshot) DRASlices(node string) []*resourceapi.ResourceSlice {
	if s.draS == nil {
		return nil
	}
	own := s.draS.byNode[node]
	if len(s.draS.global) == 0 {
		return own
	}
	return append(slices.Clone(own), s.draS.global...)
}

// AllocatedDevices is the set of devices claims allocate whole (in the API or assumed). Owned by
// the snapshot: the caller must not change it.
func (s *Snapshot) AllocatedDevices() sets.Set[structured.DeviceID] {
	return s.dra().allocSet
}

// AllocatedState is what claims allocate (in the API or assumed), as the structured allocator
// reads it: devices taken whole, parts of shared devices and the capacity they consume. Owned by
// the snapshot: the allocator only reads it, and the caller must not change it.
func (s *Snapshot) AllocatedState() structured.AllocatedState {
	d := s.dra()
	return structured.AllocatedState{AllocatedDevices: d.allocSet, AllocatedSharedDeviceIDs: d.shares, AggregatedCapacity: d.consumed}
}

// draGPUDevices lists the GPU devices of a node's slices, sorted by name.
func (d *draState) draGPUDevices(node string) (devs []DRADevice, slots []GPUSlot) {
	type dev struct {
		id     structured.DeviceID
		name   string
		d      *resourceapi.Device
		parent *parentGPU
	}
	var all []dev
	var migs []dev
	for _, rs := range d.byNode[node] {
		if !slices.Contains(d.cfg.GPUDrivers, rs.Spec.Driver) {
			continue
		}
		for i := range rs.Spec.Devices {
			dv := &rs.Spec.Devices[i]
			x := dev{id: structured.MakeDeviceID(rs.Spec.Driver, rs.Spec.Pool.Name, dv.Name), name: rs.Spec.Pool.Name + "/" + dv.Name, d: dv}
			switch {
			case v1alpha1.IsDRAGPUDevice(rs.Spec.Driver, dv):
				all = append(all, x)
			case v1alpha1.IsDRAMIGDevice(rs.Spec.Driver, dv):
				migs = append(migs, x)
			}
		}
	}
	// A GPU in MIG mode is published as its MIG devices only (NVIDIA's driver): it is a slot
	// too, named by its UUID, and the MIG devices are parts of it (GPUOfResult).
	seen := sets.New[string]()
	for _, x := range all {
		seen.Insert(attrString(x.d.Attributes, "uuid"))
	}
	parents := map[string]*parentGPU{}
	for _, x := range migs {
		uuid := attrString(x.d.Attributes, v1alpha1.DRAParentUUIDAttribute)
		if uuid == "" || seen.Has(uuid) {
			continue
		}
		p := parents[uuid]
		if p == nil {
			p = &parentGPU{uuid: uuid, product: attrString(x.d.Attributes, v1alpha1.DRAProductNameAttribute), name: x.name}
			parents[uuid] = p
		}
		if part, ok := partitionOf(x.d); ok {
			// The GPU's memory, from a partition's: its memory over its part of the slices.
			p.memMiB = max(p.memMiB, part.memMiB*v1alpha1.DRAMemorySlicesPerGPU/part.slices)
		}
		p.name = min(p.name, x.name)
	}
	for _, p := range parents {
		all = append(all, dev{name: p.name, parent: p})
	}
	slices.SortFunc(all, func(a, b dev) int { return naturalLess(a.name, b.name) })
	for i, x := range all {
		if x.parent != nil {
			devs = append(devs, DRADevice{Product: x.parent.product, Partitioned: true})
			slots = append(slots, GPUSlot{Index: i, UUID: x.parent.uuid, MemoryMiB: x.parent.memMiB})
			continue
		}
		uuid, product := attrString(x.d.Attributes, "uuid"), attrString(x.d.Attributes, v1alpha1.DRAProductNameAttribute)
		var memMiB int64
		if c, ok := x.d.Capacity[v1alpha1.DRAMemoryCapacity]; ok {
			memMiB = c.Value.Value() >> 20
		}
		devs = append(devs, DRADevice{ID: x.id, Product: product})
		slots = append(slots, GPUSlot{Index: i, UUID: uuid, MemoryMiB: memMiB})
	}
	return devs, slots
}

// parentGPU is a GPU in MIG mode, known by its MIG devices.
type parentGPU struct {
	uuid, product, name string
	memMiB              int64
}

// partition is a MIG device's part of its GPU.
type partition struct {
	slices int64 // memory slices held (v1alpha1.DRAMemorySliceCapacityPrefix)
	memMiB int64
}

// partitionOf reads a MIG device's part of its GPU from its capacities.
func partitionOf(d *resourceapi.Device) (partition, bool) {
	var p partition
	for name := range d.Capacity {
		if strings.HasPrefix(string(name), v1alpha1.DRAMemorySliceCapacityPrefix) {
			p.slices++
		}
	}
	if c, ok := d.Capacity[v1alpha1.DRAMemoryCapacity]; ok {
		p.memMiB = bytesToMiB(c.Value.Value())
	}
	return p, p.slices > 0 && p.slices <= v1alpha1.DRAMemorySlicesPerGPU
}

// HeldGPU is what one allocated device holds of a node's GPU slots: the slot at Pos, whole, or
// a share of it (Share): a partition's part of the GPU (Milli, and its memory), or the memory a
// part of a shared device consumes (MemMiB; Milli 0).
type HeldGPU struct {
	Pos    int32
	Share  bool
	Milli  int64
	MemMiB int64
}

// GPUOfResult is what an allocation result holds of node n's GPU slots, if anything: a GPU
// device whole or in part (consumable capacity, ShareOfDevice), or a MIG device, a share of its
// GPU (one of all the GPU's memory slices is the whole GPU). Admin access holds nothing. The
// engine reads the allocations it makes with it, the snapshot those of bound pods.
func (s *Snapshot) GPUOfResult(n *Node, r *resourceapi.DeviceRequestAllocationResult) (HeldGPU, bool) {
	if r.AdminAccess != nil && *r.AdminAccess {
		return HeldGPU{}, false
	}
	if pos := s.SlotOfDevice(n, structured.MakeDeviceID(r.Driver, r.Pool, r.Device)); pos >= 0 && int(pos) < len(n.Slots) {
		if mem, ok := ShareOfDevice(r, &n.Slots[pos]); ok {
			return HeldGPU{Pos: pos, Share: true, MemMiB: mem}, true
		}
		return HeldGPU{Pos: pos}, true
	}
	part, ok := s.partOfDevice(n, r.Driver, r.Pool, r.Device)
	if ok && part.Milli >= MilliPerGPU {
		return HeldGPU{Pos: part.Pos}, true
	}
	return part, ok
}

// partOfDevice locates a MIG device of node n: the slot of its GPU and its share of it.
func (s *Snapshot) partOfDevice(n *Node, driver, pool, device string) (HeldGPU, bool) {
	if s.draS == nil || !n.IsDRA() {
		return HeldGPU{}, false
	}
	for _, rs := range s.draS.byNode[n.Name] {
		if rs.Spec.Driver != driver || rs.Spec.Pool.Name != pool {
			continue
		}
		for i := range rs.Spec.Devices {
			dv := &rs.Spec.Devices[i]
			if dv.Name != device || !v1alpha1.IsDRAMIGDevice(driver, dv) {
				continue
			}
			p, ok := partitionOf(dv)
			uuid := attrString(dv.Attributes, v1alpha1.DRAParentUUIDAttribute)
			if !ok || uuid == "" {
				return HeldGPU{}, false
			}
			for pos := range n.Slots {
				if n.Slots[pos].UUID == uuid {
					return HeldGPU{Pos: int32(pos), Share: true, Milli: p.slices * MilliPerGPU / v1alpha1.DRAMemorySlicesPerGPU, MemMiB: p.memMiB}, true
				}
			}
			return HeldGPU{}, false
		}
	}
	return HeldGPU{}, false
}

func attrString(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name string) string {
	for k, v := range attrs {
		// Attributes may be qualified with the driver's domain.
		if (string(k) == name || strings.HasSuffix(string(k), "/"+name)) && v.StringValue != nil {
			return *v.StringValue
		}
	}
	return ""
}

// naturalLess orders gpu-2 before gpu-10.
func naturalLess(a, b string) int {
	ia, ib := 0, 0
	for ia < len(a) && ib < len(b) {
		ca, cb := a[ia], b[ib]
		if isDigit(ca) && isDigit(cb) {
			ja, jb := ia, ib
			for ja < len(a) && isDigit(a[ja]) {
				ja++
			}
			for jb < len(b) && isDigit(b[jb]) {
				jb++
			}
			na, nb := strings.TrimLeft(a[ia:ja], "0"), strings.TrimLeft(b[ib:jb], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			ia, ib = ja, jb
			continue
		}
		if ca != cb {
			return int(ca) - int(cb)
		}
		ia++
		ib++
	}
	return (len(a) - ia) - (len(b) - ib)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// overlayDRA replaces a node's GPU slots with its DRA GPU devices, when it has any.
func (s *Snapshot) overlayDRA(name string, spec *nodeSpec) (devs []DRADevice) {
	if s.draS == nil || len(s.draS.byNode[name]) == 0 {
		return nil
	}
	devs, slots := s.draS.draGPUDevices(name)
	if len(devs) == 0 {
		return nil
	}
	spec.slots = slots
	if spec.gpuType == "" {
		for _, d := range devs {
			if t := v1alpha1.GPUType(d.Product); t != "" {
				spec.gpuType = t
				break
			}
		}
	}
	return devs
}

// refreshDRANode rebuilds a node after its slices changed.
func (s *Snapshot) refreshDRANode(name string) {
	if n := s.nodeByName[name]; n != nil && n.Obj != nil {
		s.rebuildNode(n, n.Obj)
	}
}

// indexDRANode records where the node's DRA devices are and which are claimed.
func (s *Snapshot) indexDRANode(n *Node, prev []DRADevice) {
	d := s.draS
	if d == nil {
		return
	}
	for _, dev := range prev {
		if dev.Partitioned {
			continue
		}
		if r, ok := d.slotOf[dev.ID]; ok && r.node == n.Name {
			delete(d.slotOf, dev.ID)
		}
	}
	for i, dev := range n.DRADevices {
		if dev.Partitioned {
			continue // no device of its own: its MIG devices are parts of it
		}
		d.slotOf[dev.ID] = slotRef{node: n.Name, pos: int32(i)}
		n.Slots[i].Claimed = int16(min(d.allocated[dev.ID], 1<<14))
	}
}

// SlotOfDevice returns the position of a device among the node's slots, or -1.
func (s *Snapshot) SlotOfDevice(n *Node, id structured.DeviceID) int32 {
	if s.draS == nil {
		return -1
	}
	if r, ok := s.draS.slotOf[id]; ok && r.node == n.Name {
		return r.pos
	}
	return -1
}

// ---- Claims -------------------------------------------------------------------------------------

// UpsertResourceClaim adds or updates a ResourceClaim. The caller re-applies the pods that use it
// (their requests and GPUs follow the claim).
func (s *Snapshot) UpsertResourceClaim(obj *resourceapi.ResourceClaim) {
	if obj == nil || obj.Name == "" {
		return
	}
	d := s.dra()
	key := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
	c := d.claims[key]
	if c == nil {
		c = &Claim{Key: key}
		d.claims[key] = c
	}
	if c.Obj != nil && c.Obj.UID != obj.UID {
		c.Assumed, c.AssumedBy = nil, nil // a new claim of the same name
	}
	c.Obj = obj
	if c.Assumed != nil && obj.Status.Allocation != nil {
		// The runtime wrote it: the API's is the allocation now, held by the same pod.
		c.Assumed = nil
		c.AssumedBy = nil
	}
	s.recount(c)
}

// DeleteResourceClaim removes a ResourceClaim.
func (s *Snapshot) DeleteResourceClaim(key types.NamespacedName) {
	if s.draS == nil {
		return
	}
	c := s.draS.claims[key]
	if c == nil {
		return
	}
	c.Obj, c.Assumed, c.AssumedBy = nil, nil, nil
	s.recount(c)
	delete(s.draS.claims, key)
}

// ResourceClaim returns a claim by key, or nil.
func (s *Snapshot) ResourceClaim(key types.NamespacedName) *Claim {
	if s.draS == nil {
		return nil
	}
	return s.draS.claims[key]
}

// recount moves the claim's devices in the allocated set to its current allocation.
func (s *Snapshot) recount(c *Claim) {
	now := c.Allocation()
	if now == c.counted {
		return
	}
	s.countDevices(c.counted, -1)
	s.countDevices(now, 1)
	c.counted = now
}

func (s *Snapshot) countDevices(a *resourceapi.AllocationResult, sign int) {
	if a == nil {
		return
	}
	d := s.draS
	for _, r := range a.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue // admin access does not take the device
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			// A part of a shared device: it takes capacity, not the device.
			share := structured.MakeSharedDeviceID(id, r.ShareID)
			if r.ConsumedCapacity != nil {
				cc := structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity)
				if sign > 0 {
					d.consumed.Insert(cc)
				} else {
					d.consumed.Remove(cc)
				}
			}
			if sign > 0 {
				d.shares.Insert(share)
			} else {
				d.shares.Delete(share)
			}
			continue
		}
		d.allocated[id] += sign
		switch v := d.allocated[id]; {
		case v <= 0:
			delete(d.allocated, id)
			d.allocSet.Delete(id)
		case v == 1 && sign > 0:
			d.allocSet.Insert(id)
		}
		if ref, ok := d.slotOf[id]; ok {
			if n := s.nodeByName[ref.node]; n != nil && int(ref.pos) < len(n.Slots) {
				n.Slots[ref.pos].Claimed = int16(min(d.allocated[id], 1<<14))
				n.Version++
				s.reindex(n)
			}
		}
	}
}

// TaskClaims returns the claims of a pod, in the order of its spec (nil entries for claims not
// known yet).
func (s *Snapshot) TaskClaims(t *Task) []*Claim {
	if s.draS == nil || len(t.claims) == 0 {
		return nil
	}
	out := make([]*Claim, len(t.claims))
	for i, name := range t.claims {
		out[i] = s.draS.claims[types.NamespacedName{Namespace: t.Key.Namespace, Name: name}]
	}
	return out
}

// readClaims fills the DRA part of a managed pod's request from its claims: the GPU devices its
// claims ask for (pending: those of claims not allocated yet; bound: those its allocated claims
// hold on its node) and, for a bound pod, the slots they are. A claim that does not exist yet is a
// problem the pod waits on; one that asks for what fairway's allocator does not serve
// (v1alpha1.UnservedClaimRequests) makes the pod unsupported.
func (s *Snapshot) readClaims(pod *corev1.Pod, info *PodInfo) (names []string) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	d := s.dra()
	info.Req.DRA = true
	var missing, unserved []string
	var shares []draShare // the shares of GPUs the claims ask for or hold
	shareIndex := -1      // the GPU of a bound pod's share
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			missing = append(missing, pc.Name)
			continue
		}
		if name == nil {
			continue // intentionally not created
		}
		names = append(names, *name)
		c := d.claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]
		if c == nil || c.Obj == nil {
			missing = append(missing, *name)
			continue
		}
		alloc := c.Allocation()
		if alloc == nil {
			if what := v1alpha1.UnservedClaimRequests(&c.Obj.Spec); len(what) > 0 {
				unserved = append(unserved, "ResourceClaim "+*name+" ("+strings.Join(what, "; ")+")")
			}
			whole, asked := d.requestedGPUs(c.Obj)
			info.Req.WholeGPUs += whole
			shares = append(shares, asked...)
			continue
		}
		held := c.AssumedBy != nil && c.AssumedBy.UID == info.UID
		if !held && c.AssumedBy == nil {
			held = claimHeldByUID(c.Obj, info.UID)
		}
		if !held || (info.Lifecycle != LifecycleBound && info.Lifecycle != LifecycleTerminating) {
			continue
		}
		n := s.nodeByName[info.NodeName]
		if n == nil {
			continue
		}
		for i := range alloc.Devices.Results {
			held, ok := s.GPUOfResult(n, &alloc.Devices.Results[i])
			switch {
			case !ok:
			case held.Share:
				shares = append(shares, draShare{milli: held.Milli, memMiB: held.MemMiB})
				shareIndex = n.Slots[held.Pos].Index
			default:
				info.GPUIndexes = append(info.GPUIndexes, n.Slots[held.Pos].Index)
				info.Req.WholeGPUs++
			}
		}
	}
	switch {
	case len(shares) == 0:
	case len(shares) > 1 || info.Req.WholeGPUs > 0:
		// fairway's accounting holds whole GPUs or one share, as for device-plugin pods.
		unserved = append(unserved, v1alpha1.UnservedClaimMix(info.Req.WholeGPUs, int64(len(shares))))
	default:
		// A partition is a fraction of its GPU; a part of a shared device, the memory it consumes.
		if shares[0].milli > 0 {
			info.Req.FractionMilli = shares[0].milli
		} else {
			info.Req.GPUMemoryMiB = max(shares[0].memMiB, 1)
		}
		if shareIndex >= 0 {
			info.GPUIndexes = []int{shareIndex}
		}
	}
	if len(missing) > 0 && info.Lifecycle == LifecyclePending && info.Problem == nil {
		info.Problem = &Problem{Code: ProblemClaim, Message: "waiting for ResourceClaim " + strings.Join(missing, ", ") +
			" (kube-controller-manager creates the claims of ResourceClaimTemplates)"}
	}
	if len(unserved) > 0 && info.Lifecycle == LifecyclePending && info.Problem == nil {
		info.Problem = &Problem{Code: ProblemUnsupported, Message: strings.Join(unserved, ", ") +
			": fairway does not serve this; leave the pod to kube-scheduler (no spec.schedulerName " +
			v1alpha1.SchedulerName + "), or ask for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\")"}
	}
	return names
}

func claimHeldByUID(c *resourceapi.ResourceClaim, uid types.UID) bool {
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			return r.UID == uid
		}
	}
	for _, o := range c.OwnerReferences {
		if o.Kind == "Pod" {
			return o.UID == uid
		}
	}
	return false
}

// draShare is a share of one GPU a claim asks for or holds: a fraction of it in milli-GPU (a
// partition), or an amount of its memory (a part of a shared device).
type draShare struct {
	milli, memMiB int64
}

// PartitionEstimateMilli is what a pending claim for a partition of a GPU (a MIG device) is
// counted as until it is allocated: the smallest partition, one memory slice. Which partition a
// CEL selector picks is the allocator's to find; the engine checks the queue's limits again
// with the partition it got.
const PartitionEstimateMilli = MilliPerGPU / v1alpha1.DRAMemorySlicesPerGPU

// requestedGPUs is what an unallocated claim asks of GPUs (v1alpha1.ClaimGPUAsks with the
// configured classes): whole GPUs, and shares as the snapshot counts them (a partition as
// PartitionEstimateMilli until it is allocated).
func (d *draState) requestedGPUs(c *resourceapi.ResourceClaim) (whole int64, shares []draShare) {
	whole, asks := v1alpha1.ClaimGPUAsks(&c.Spec, d)
	for _, a := range asks {
		if a.Partition {
			shares = append(shares, draShare{milli: PartitionEstimateMilli})
		} else {
			shares = append(shares, draShare{memMiB: bytesToMiB(a.MemoryBytes)})
		}
	}
	return whole, shares
}

// ShareOfDevice reports whether an allocation result is a share of the GPU of slot g, and the
// GPU memory it consumes in MiB. A part of a shared device (consumable capacity) that consumes all
// of its memory, as a claim that names no capacity does on a device without a default, is the
// whole GPU.
func ShareOfDevice(r *resourceapi.DeviceRequestAllocationResult, g *GPUSlot) (memMiB int64, ok bool) {
	if r.ShareID == nil {
		return 0, false
	}
	q, found := r.ConsumedCapacity[v1alpha1.DRAMemoryCapacity]
	if !found {
		return 0, false
	}
	memMiB = bytesToMiB(q.Value())
	if g.MemoryMiB > 0 && memMiB >= g.MemoryMiB {
		return 0, false
	}
	return max(memMiB, 1), true
}

// bytesToMiB rounds a number of bytes up to MiB.
func bytesToMiB(b int64) int64 { return (b + 1<<20 - 1) >> 20 }

// ---- The engine's allocations ----------------------------------------------------------------

// DRAAllocation is what the engine allocated for a pod's claims on its node.
type DRAAllocation struct {
	Claims []ClaimAllocation
}

// assumeClaims records the engine's allocations of t's claims (sign 1) or takes them back.
func (s *Snapshot) assumeClaims(t *Task, a *DRAAllocation, sign int) {
	if a == nil || s.draS == nil {
		return
	}
	for _, ca := range a.Claims {
		c := s.draS.claims[ca.Claim]
		if c == nil || ca.Result == nil {
			continue
		}
		if sign > 0 {
			c.Assumed, c.AssumedBy = ca.Result, t
		} else if c.AssumedBy == t {
			c.Assumed, c.AssumedBy = nil, nil
		}
		s.recount(c)
	}
}
