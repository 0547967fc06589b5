package snapshot

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// UpsertNode adds or updates a node from its informer object. Heartbeat updates that change none
// of what the engine reads (allocatable, labels, taints, cordon, GPU inventory) cost a
// comparison. A malformed GPU inventory is returned as an error, but the node is still recorded
// (its GPUs without UUIDs).
func (s *Snapshot) UpsertNode(obj *corev1.Node) error {
	if obj == nil || obj.Name == "" {
		return fmt.Errorf("upsert node: %w", ErrInvalidObject)
	}
	n := s.nodeByName[obj.Name]
	if n != nil && !nodeChanged(n.Obj, obj) {
		n.Obj = obj
		return nil
	}
	spec, err := readNode(obj)
	if err != nil {
		err = fmt.Errorf("node %s: %w", obj.Name, err)
	}
	if n != nil {
		s.rebuildNodeSpec(n, obj, spec)
		return err
	}
	n = &Node{Name: obj.Name, bucket: -1}
	if k := len(s.freeIDs); k > 0 {
		n.ID = s.freeIDs[k-1]
		s.freeIDs = s.freeIDs[:k-1]
		s.nodes[n.ID] = n
	} else {
		n.ID = len(s.nodes)
		s.nodes = append(s.nodes, n)
	}
	s.nodeByName[obj.Name] = n
	s.applyNodeSpec(n, obj, spec)
	for _, t := range s.orphans[obj.Name] {
		s.account(t, -1)
		n.placeExisting(t, slotIndexes(nil, t))
		t.Node = n
		n.attach(t)
		s.victimRef(t, 1)
		s.account(t, 1)
	}
	delete(s.orphans, obj.Name)
	s.reindex(n)
	s.refreshClassBits(n, false)
	s.nodeGen++
	return err
}

// rebuildNode reads a known node again (its DRA devices changed).
func (s *Snapshot) rebuildNode(n *Node, obj *corev1.Node) {
	spec, _ := readNode(obj)
	s.rebuildNodeSpec(n, obj, spec)
}

// rebuildNodeSpec applies a changed node: takes the pods off, rebuilds, puts them back where
// they were when their GPUs still exist.
func (s *Snapshot) rebuildNodeSpec(n *Node, obj *corev1.Node, spec nodeSpec) {
	tasks := slices.Clone(n.Tasks)
	type held struct {
		t   *Task
		idx []int
	}
	moved := make([]held, 0, len(tasks))
	for _, t := range tasks {
		moved = append(moved, held{t, slotIndexes(n, t)})
		s.account(t, -1)
		s.victimRef(t, -1)
		n.detach(t)
	}
	s.applyNodeSpec(n, obj, spec)
	for _, m := range moved {
		dra := m.t.GPUs.DRA // the engine's allocation of an assumed pod stays its own
		n.placeExisting(m.t, m.idx)
		m.t.GPUs.DRA = dra
		n.attach(m.t)
		s.victimRef(m.t, 1)
		s.account(m.t, 1)
	}
	s.reindex(n)
	s.refreshClassBits(n, false)
	s.nodeGen++
}

// slotIndexes returns the GPU indexes a task holds on n (nil when unknown).
func slotIndexes(n *Node, t *Task) []int {
	if n == nil {
		return nil
	}
	var out []int
	for _, pos := range t.GPUs.Whole {
		out = append(out, n.Slots[pos].Index)
	}
	if t.GPUs.Shared >= 0 {
		out = append(out, n.Slots[t.GPUs.Shared].Index)
	}
	return out
}

func (s *Snapshot) applyNodeSpec(n *Node, obj *corev1.Node, spec nodeSpec) {
	prevDRA := n.DRADevices
	n.DRADevices = s.overlayDRA(obj.Name, &spec)
	n.Obj = obj
	n.Allocatable = spec.alloc
	n.Slots = spec.slots
	n.GPUType = spec.gpuType
	n.TypeDim = s.typeDim(spec.gpuType)
	n.Unschedulable = spec.unschedulable
	n.Inventory = spec.inventory
	n.InventoryGPUs, n.UnhealthyGPUs = spec.invGPUs, spec.unhealthy
	n.Replicas = spec.replicas
	n.Version++
	if prevDRA != nil || n.DRADevices != nil {
		s.indexDRANode(n, prevDRA)
	}
	for i := range n.Slots {
		s.refGPUMemMiB = max(s.refGPUMemMiB, n.Slots[i].MemoryMiB)
	}
	s.maxSlots = max(s.maxSlots, len(n.Slots))
	s.allNodes.Add(n.ID)
	if len(n.Slots) == 0 {
		s.cpuOnly.Add(n.ID)
	} else {
		s.cpuOnly.Remove(n.ID)
	}
}

// nodeChanged reports whether an update changes anything the snapshot reads.
func nodeChanged(a, b *corev1.Node) bool {
	return a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!maps.Equal(a.Labels, b.Labels) ||
		a.Annotations[v1alpha1.GPUInventoryAnnotation] != b.Annotations[v1alpha1.GPUInventoryAnnotation] ||
		!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable)
}

// DeleteNode removes a node. Its pods stay accounted to their queues (as orphans) until they are
// deleted; holds on the node are dropped.
func (s *Snapshot) DeleteNode(name string) {
	n := s.nodeByName[name]
	if n == nil {
		return
	}
	for _, t := range slices.Clone(n.Tasks) {
		s.account(t, -1)
		s.victimRef(t, -1)
		n.detach(t)
		t.Node = nil
		t.GPUs = Assignment{Shared: -1}
		s.orphans[name] = append(s.orphans[name], t)
		s.account(t, 1)
	}
	for _, g := range slices.Clone(n.holds) {
		s.dropHoldsOn(g, n)
	}
	s.unindex(n)
	s.refreshClassBits(n, true)
	delete(s.nodeByName, name)
	s.nodes[n.ID] = nil
	s.freeIDs = append(s.freeIDs, n.ID)
	s.nodeGen++
}
