package engine

import (
	"context"
	"errors"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Pods with ResourceClaims (Dynamic Resource Allocation). The snapshot counts the GPU devices a
// pod's claims ask for as its whole GPUs and makes the GPU devices of a DRA node its slots
// (snapshot/dra.go); so PickGPUs and everything above it (quotas, fair share, gangs, topology,
// reclaim, preemption) treat them like nvidia.com/gpu. On a node that has the GPUs, draPick then
// asks kube-scheduler's structured allocator (k8s.io/dynamic-resource-allocation) which devices
// the pod's unallocated claims get there, honouring device classes, CEL selectors, counts,
// allocation modes, matchAttribute constraints and admin access, and makes the pod's GPUs the
// slots of the devices it chose.

// draFeatures are the allocator features kube-scheduler 1.37 enables by default
// (dynamicresources.AllocatorFeatures with the default feature gates), less device binding
// conditions, which need the binding to wait for a driver: fairway does not (a claim whose
// devices need it cannot be allocated by fairway). Consumable capacity (a claim for part of a
// device that allows several allocations) is what makes a claim a share of a GPU; with it the
// library runs its "incubating" allocator rather than its "stable" one.
var draFeatures = structured.Features{
	AdminAccess:             true,
	PrioritizedList:         true,
	PartitionableDevices:    true,
	DeviceTaints:            true,
	ConsumableCapacity:      true,
	FractionalCapacityRange: true,
}

// newCELCache is the engine's cache of compiled CEL selectors, kube-scheduler's size.
func newCELCache() *cel.Cache { return cel.NewCache(10, cel.Features{}) }

// draPick allocates the pod's claims on node n and sets a's GPUs to the slots of the GPU devices
// they get there (its claims already allocated must be on n). afterRelease sees the devices of
// pods being evicted as free. The allocation rides on the assignment (a.DRA) until the runtime
// writes it to the claims.
func (c *cycle) draPick(n *snapshot.Node, t *snapshot.Task, a *snapshot.Assignment, afterRelease bool) FitFailure {
	claims := c.snap.TaskClaims(t)
	var toAlloc []*resourceapi.ResourceClaim
	g := draGPUs{shared: -1}
	out := &snapshot.DRAAllocation{}
	for _, cl := range claims {
		if cl == nil || cl.Obj == nil {
			return FailDRA
		}
		alloc := cl.Allocation()
		if alloc == nil {
			toAlloc = append(toAlloc, cl.Obj)
			continue
		}
		if !allocationOnNode(alloc, n) {
			return FailDRAAllocated
		}
		if cl.HeldBy(t) {
			c.addSlots(&g, n, alloc)
		}
		out.Claims = append(out.Claims, snapshot.ClaimAllocation{Claim: cl.Key, UID: cl.Obj.UID})
	}
	if len(toAlloc) > 0 {
		if n.Obj == nil {
			return FailDRA
		}
		state := c.snap.AllocatedState()
		if afterRelease {
			state.AllocatedDevices = c.releasedDevices(n, state.AllocatedDevices)
		}
		if c.e.cel == nil {
			c.e.cel = newCELCache()
		}
		alloc, err := structured.NewAllocator(context.Background(), draFeatures, state, c.snap.DeviceClasses(), c.snap.DRASlices(n.Name), c.e.cel)
		if err != nil {
			return FailDRA
		}
		results, err := alloc.Allocate(context.Background(), n.Obj, toAlloc)
		if err != nil || len(results) != len(toAlloc) {
			if err != nil && !errors.Is(err, structured.ErrFailedAllocationOnNode) {
				c.e.opts.Logger.V(2).Info("DRA allocation failed", "pod", t.Key.String(), "node", n.Name, "err", err.Error())
			}
			return FailDRA
		}
		for i := range results {
			r := &results[i]
			c.addSlots(&g, n, r)
			out.Claims = append(out.Claims, snapshot.ClaimAllocation{
				Claim: types.NamespacedName{Namespace: toAlloc[i].Namespace, Name: toAlloc[i].Name}, UID: toAlloc[i].UID, Result: r,
			})
		}
	}
	// A pod that asked for a share must get one: admitted by its share, it may not hold whole
	// GPUs (a capacity request on a device that does not allow several allocations gets the
	// whole device). One that asked for a whole GPU may get less, a part of a shared device that
	// consumes the device's default: it is counted by what it holds.
	if t.Req.Shared() && g.shared < 0 {
		return FailDRA
	}
	if g.shares > 1 || (g.shared >= 0 && len(g.whole) > 0) {
		return FailDRA // more than fairway's accounting holds for one pod (snapshot.readClaims)
	}
	a.Whole = g.whole
	if g.shared >= 0 {
		slot := &n.Slots[g.shared]
		a.Shared = g.shared
		if g.milli > 0 {
			a.Milli, a.MemMiB = g.milli, g.memMiB
		} else {
			a.MemMiB = max(g.memMiB, t.Req.GPUMemoryMiB)
			share := snapshot.Request{GPUMemoryMiB: a.MemMiB}
			a.Milli = max(share.SharedMilli(slot.MemoryMiB), 1)
		}
	}
	a.DRA = out
	return Fits
}

// draGPUs are the slots of a node a pod's claims give it: whole devices, and the GPU it shares:
// a partition of it (milli, its memory) or a part of a shared device (the memory it consumes).
type draGPUs struct {
	whole  []int32
	shared int32
	milli  int64
	memMiB int64
	shares int
}

// addSlots adds the slots of n that an allocation's GPU devices are (snapshot.GPUOfResult).
func (c *cycle) addSlots(g *draGPUs, n *snapshot.Node, alloc *resourceapi.AllocationResult) {
	for i := range alloc.Devices.Results {
		held, ok := c.snap.GPUOfResult(n, &alloc.Devices.Results[i])
		switch {
		case !ok:
		case held.Share:
			g.shared, g.milli, g.memMiB = held.Pos, held.Milli, held.MemMiB
			g.shares++
		default:
			g.whole = append(g.whole, held.Pos)
		}
	}
}

// releasedDevices is the allocated set without the devices of n that only pods being evicted
// hold. The parts of shared devices and the MIG devices they hold are not released: a share of
// a DRA GPU cannot be made room for by eviction yet (docs/dra.md).
func (c *cycle) releasedDevices(n *snapshot.Node, all sets.Set[structured.DeviceID]) sets.Set[structured.DeviceID] {
	var out sets.Set[structured.DeviceID]
	for i, d := range n.DRADevices {
		g := &n.Slots[i]
		if g.Owners == 0 || !g.EmptyAfterRelease() {
			continue
		}
		if !all.Has(d.ID) {
			continue
		}
		if out == nil {
			out = all.Clone()
		}
		out.Delete(d.ID)
	}
	if out == nil {
		return all
	}
	return out
}

// allocationOnNode reports whether an allocation's devices are reachable from n.
func allocationOnNode(a *resourceapi.AllocationResult, n *snapshot.Node) bool {
	if a.NodeSelector == nil {
		return true
	}
	if n.Obj == nil {
		return false
	}
	ok, err := nodeaffinity.NewLazyErrorNodeSelector(a.NodeSelector).Match(n.Obj)
	return err == nil && ok
}

// draKindFit keeps device-plugin GPU pods off DRA nodes and DRA GPU pods off device-plugin nodes.
func draKindFit(n *snapshot.Node, r *snapshot.Request) FitFailure {
	if !r.GPU() || r.DRA == n.IsDRA() {
		return Fits
	}
	if r.DRA {
		return FailDRANoDevices
	}
	return FailDRANode
}

// foreignClaimedMilli is the GPU of a DRA node's devices that claims hold for no pod fairway
// accounts (another scheduler's pods): not fairway's to divide.
func foreignClaimedMilli(n *snapshot.Node) int64 {
	if !n.IsDRA() {
		return 0
	}
	var m int64
	for i := range n.Slots {
		if g := &n.Slots[i]; g.Claimed > 0 && g.Owners == 0 {
			m += snapshot.MilliPerGPU
		}
	}
	return m
}
