package snapshot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// GPUInventoryEntry is one GPU of a node, as read from the node annotation
// fairway.dev/gpu-inventory.
type GPUInventoryEntry struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	MemoryMiB int64  `json:"memoryMiB"`
}

// ParseGPUInventory reads the fairway.dev/gpu-inventory annotation: the gpu-agent's
// v1alpha1.GPUInventory object (JSON), or a bare JSON list of GPUs. GPUs in MIG mode and GPUs the
// agent reports unhealthy are left out (the device plugin does not offer them either). Entries
// come back sorted by index; duplicate or negative indexes are an error.
func ParseGPUInventory(v string) ([]GPUInventoryEntry, error) {
	p, err := parseGPUInventory(v)
	return p.gpus, err
}

// parsedInventory is what readNode takes from the inventory annotation.
type parsedInventory struct {
	// gpus are the usable GPUs (ParseGPUInventory).
	gpus []GPUInventoryEntry
	// unhealthy counts the unhealthy GPUs (not in MIG mode) left out of gpus.
	unhealthy int
	// obj is the annotation's object; a bare list is read as an object with only its GPUs
	// (no replicas).
	obj v1alpha1.GPUInventory
}

// parseGPUInventory is ParseGPUInventory that also keeps what else readNode needs.
func parseGPUInventory(v string) (p parsedInventory, err error) {
	if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") {
		if err := json.Unmarshal([]byte(t), &p.obj); err != nil {
			return parsedInventory{}, fmt.Errorf("parse %s: %w", v1alpha1.GPUInventoryAnnotation, err)
		}
		for _, g := range p.obj.GPUs {
			switch {
			case g.MIGEnabled:
				continue
			case !g.Healthy:
				p.unhealthy++
				continue
			}
			p.gpus = append(p.gpus, GPUInventoryEntry{Index: int(g.Index), UUID: g.UUID, MemoryMiB: g.MemoryMiB})
		}
	} else if err := json.Unmarshal([]byte(v), &p.gpus); err != nil {
		return parsedInventory{}, fmt.Errorf("parse %s: %w", v1alpha1.GPUInventoryAnnotation, err)
	}
	slices.SortFunc(p.gpus, func(a, b GPUInventoryEntry) int { return a.Index - b.Index })
	for i, e := range p.gpus {
		if e.Index < 0 || (i > 0 && p.gpus[i-1].Index == e.Index) {
			return parsedInventory{}, fmt.Errorf("parse %s: bad or duplicate GPU index %d", v1alpha1.GPUInventoryAnnotation, e.Index)
		}
	}
	return p, nil
}

// GPUSlot is one physical GPU of a node and what holds it. A slot is held either by one whole-GPU
// pod (Owners 1) or shared by fractional pods (Sharers > 0), never both; within a simulation a
// slot may transiently count a releasing holder and its successor together.
type GPUSlot struct {
	// Index is the GPU's index on its node; UUID is empty unless the node publishes an inventory.
	Index     int
	UUID      string
	MemoryMiB int64

	UsedMilli  int64
	UsedMemMiB int64
	Owners     int32
	Sharers    int32

	// The part of the above held by releasing pods.
	RelMilli   int64
	RelMemMiB  int64
	RelOwners  int32
	RelSharers int32

	// Reserved counts reservation pods on the slot: the pods that hold the GPU for the kubelet
	// while fractional pods share it (normally one; RelReserved of them terminating). A
	// reservation takes no share: it keeps whole-GPU pods off a slot whose fractional pods are
	// gone until the runtime has deleted it, and fractional pods may join it.
	Reserved    int32
	RelReserved int32

	// Loans counts pods on loan on the GPU (RelLoans of them leaving), LoanMemMiB the GPU memory
	// they take. Loans are kept apart from the shares above: they never add to UsedMilli or
	// Sharers, so that placement and fair share see the GPU exactly as without them. (Narrow
	// types keep the slot small: placement scans slots in its inner loops; a GPU runs at most
	// 64 loans, MaxLoansPerGPU, and 2^31 MiB is far above any GPU's memory.)
	Loans      int16
	RelLoans   int16
	LoanMemMiB int32

	// Claimed counts the ResourceClaims that allocate the slot's device on a DRA node (dra.go).
	// A claimed slot that no pod of the snapshot owns (another scheduler's pod, a claim not yet
	// deallocated) is not empty.
	Claimed int16
}

// Empty reports whether nothing holds the slot now, reservations included.
func (g *GPUSlot) Empty() bool {
	return g.UsedMilli == 0 && g.Owners == 0 && g.Sharers == 0 && g.Reserved == 0 && g.Loans == 0 && g.Claimed == 0
}

// emptyButClaimed is Empty, whatever claims the slot's DRA device.
func (g *GPUSlot) emptyButClaimed() bool {
	return g.UsedMilli == 0 && g.Owners == 0 && g.Sharers == 0 && g.Reserved == 0 && g.Loans == 0
}

// EmptyAfterRelease reports whether the slot is empty once releasing pods are gone. A
// reservation is released with the last fractional pod on its slot, so it does not count.
// Neither do loans: a loan runs only beside live holders (Sharers), and goes (first thing in
// the next cycle) when they do, so a slot whose shares are all releasing loses its loans too.
// (Empty, which says what is free now, counts them.)
func (g *GPUSlot) EmptyAfterRelease() bool {
	// A claimed device is freed with its owner; one nobody owns stays until it is deallocated.
	return g.UsedMilli == g.RelMilli && g.Owners == g.RelOwners && g.Sharers == g.RelSharers && (g.Claimed == 0 || g.Owners > 0)
}

// Joinable reports whether a fractional pod may join the slot without opening a new GPU: it is
// shared by fractional pods, or held only by a live (not terminating) reservation.
func (g *GPUSlot) Joinable() bool {
	return g.Owners == 0 && (g.Sharers > 0 || g.Reserved > g.RelReserved)
}

// NodeResources are a node's non-GPU resources.
type NodeResources struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
	Scalars  map[corev1.ResourceName]int64
}

func (r *NodeResources) add(req *Request, sign int64) {
	r.MilliCPU += sign * req.MilliCPU
	r.Memory += sign * req.Memory
	r.Pods += sign
	for _, s := range req.Scalars {
		if r.Scalars == nil {
			r.Scalars = make(map[corev1.ResourceName]int64)
		}
		r.Scalars[s.Name] += sign * s.Value
		if r.Scalars[s.Name] == 0 {
			delete(r.Scalars, s.Name)
		}
	}
}

// Node is one node and everything placed on it. Fields are read-only outside this package.
type Node struct {
	// ID is the node's dense index in the snapshot (bit ID in every node bitset). IDs of deleted
	// nodes are reused.
	ID   int
	Name string
	// Obj is the informer's node, kept for node-affinity matching. Never modified.
	Obj *corev1.Node

	Allocatable NodeResources
	Used        NodeResources
	Releasing   NodeResources
	// UsedMilliGPU and RelMilliGPU sum the GPU slots.
	UsedMilliGPU int64
	RelMilliGPU  int64

	// Slots are the node's GPUs, sorted by index.
	Slots []GPUSlot
	// DRADevices are the DRA devices behind Slots (same positions) on a node whose
	// ResourceSlices publish GPUs; nil on a device-plugin node (dra.go).
	DRADevices []DRADevice
	// Floating counts whole GPUs held by pods whose GPU indexes are unknown (pods found running
	// after a restart without a fairway.dev/gpu-index annotation); FloatingRel the releasing part.
	// They make that many empty-looking slots unavailable.
	Floating    int64
	FloatingRel int64

	// GPUType is the node's fairway.dev/gpu-type label; TypeDim its queue dimension, or -1.
	GPUType string
	TypeDim int
	// Unschedulable is spec.unschedulable (cordoned).
	Unschedulable bool
	// Inventory is true when the node publishes a GPU inventory (fairway.dev/gpu-inventory):
	// a gpu-agent runs there, which is what tells the runtime the device of a shared GPU.
	Inventory bool
	// InventoryGPUs is how many GPUs (not in MIG mode) the inventory lists, healthy or not;
	// UnhealthyGPUs how many of them the gpu-agent reports lost or failing (they are not
	// slots). Both 0 without an inventory.
	InventoryGPUs int
	UnhealthyGPUs int
	// Replicas is how many times the node's device plugin advertises each GPU (time-slicing),
	// from the inventory; 0 when once. Slots are the physical GPUs either way.
	Replicas int32

	// Tasks are the pods bound to the node, in no particular order.
	Tasks []*Task
	ports map[HostPort]int32

	// Held sums the holds of gangs on this node (see Hold). HeldWhole are GPU slots held.
	Held      NodeResources
	HeldWhole int64
	holds     []*Gang
	// pins counts, per GPU slot position, the holds that pin it (Hold.Slots), and pinned sums
	// them: PinnedByOthers runs for every node tried while holds exist, so it reads counts kept
	// by AddHold and unhold rather than walking the gangs' holds.
	pins   []int32
	pinned int32

	// Unmanaged is what pods fairway does not account (other schedulers', daemons) take.
	Unmanaged         NodeResources
	UnmanagedMilliGPU int64

	// PreemptibleMilliGPU is the GPU held by bound, not releasing, preemptible pods: an upper
	// bound on what evicting could free, used to skip nodes quickly. Kept by Snapshot.victimRef.
	PreemptibleMilliGPU int64

	// Loans counts the pods on loan on the node's GPUs, releasing ones included; the engine
	// looks at nodes with loans only when it checks whether lent GPUs must go back.
	Loans int32

	// Version changes whenever anything on the node changes; caches key on it.
	Version uint64

	bucket int
}

// IsDRA reports whether the node's GPUs are DRA devices.
func (n *Node) IsDRA() bool { return len(n.DRADevices) > 0 }

// FreeWholeSlots is the number of GPUs a whole-GPU pod could take now (ignoring holds).
func (n *Node) FreeWholeSlots() int64 {
	var empty int64
	for i := range n.Slots {
		if n.Slots[i].Empty() {
			empty++
		}
	}
	return max(empty-n.Floating, 0)
}

// FreeWholeSlotsAfterRelease is FreeWholeSlots once releasing pods are gone.
func (n *Node) FreeWholeSlotsAfterRelease() int64 {
	var empty int64
	for i := range n.Slots {
		if n.Slots[i].EmptyAfterRelease() {
			empty++
		}
	}
	return max(empty-(n.Floating-n.FloatingRel), 0)
}

// Slot returns the GPU with the given index, or nil.
func (n *Node) Slot(index int) *GPUSlot {
	if pos := n.slotPos(index); pos >= 0 {
		return &n.Slots[pos]
	}
	return nil
}

// HasSharedRoom reports whether some GPU is shared by fractional pods (or held by a reservation
// alone) and has share left.
func (n *Node) HasSharedRoom() bool {
	for i := range n.Slots {
		g := &n.Slots[i]
		if g.Joinable() && g.UsedMilli < MilliPerGPU {
			return true
		}
	}
	return false
}

// HeldFor returns what gang g holds on this node.
func (n *Node) HeldFor(g *Gang) (res NodeResources, whole int64) {
	if g == nil {
		return
	}
	if o := g.on[n]; o != nil {
		return o.res, o.whole
	}
	return
}

// PinnedByOthers is the set of this node's GPU slots (bit i for slot position i < 64) that
// holds of gangs other than g pin (Hold.Slots): the GPUs evictions free for a nominated gang,
// which no other gang's pod may join or take until that gang binds or lets go.
func (n *Node) PinnedByOthers(g *Gang) uint64 {
	if n.pinned == 0 {
		return 0
	}
	var mine []int32
	if g != nil {
		if o := g.on[n]; o != nil {
			mine = o.pins
		}
	}
	var m uint64
	for i, c := range n.pins[:min(len(n.pins), 64)] {
		// Slots only g's own holds pin are g's to use.
		if c > 0 && (i >= len(mine) || c > mine[i]) {
			m |= 1 << uint(i)
		}
	}
	return m
}

// pin adds (by 1) or removes (by -1) a hold's pins.
func (n *Node) pin(h *Hold, by int32) {
	var c int32
	n.pins, c = addPins(n.pins, h.Slots, by)
	n.pinned += c * by
}

// addPins adds by to pins at each slot position of slots (negative ones are no slot), growing
// pins as needed, and returns it with the number of positions counted.
func addPins(pins, slots []int32, by int32) ([]int32, int32) {
	var c int32
	for _, s := range slots {
		if s < 0 {
			continue
		}
		for int(s) >= len(pins) {
			pins = append(pins, 0)
		}
		pins[s] += by
		c++
	}
	return pins, c
}

// PortFree reports whether no pod on the node binds a host port that conflicts with p.
func (n *Node) PortFree(p HostPort) bool {
	if len(n.ports) == 0 {
		return true
	}
	if n.ports[p] > 0 {
		return false
	}
	wild := p
	if p.IP == "" || p.IP == "0.0.0.0" {
		// A wildcard port conflicts with the same port on any address.
		for q, c := range n.ports {
			if c > 0 && q.Port == p.Port && q.Protocol == p.Protocol {
				return false
			}
		}
		return true
	}
	wild.IP = "0.0.0.0"
	if n.ports[wild] > 0 {
		return false
	}
	wild.IP = ""
	return n.ports[wild] == 0
}

// NodeInfo is what the snapshot reads from a node object.
type NodeInfo struct {
	// Allocatable holds CPU, memory, pods and extended resources (GPUs excluded).
	Allocatable NodeResources
	// GPUs are the node's GPUs (nvidia.com/gpu allocatable, divided by the inventory's
	// time-slicing replicas), with index, UUID and memory from
	// the fairway.dev/gpu-inventory annotation, or memory from the fairway.dev/gpu-memory label.
	GPUs          []GPUSlot
	GPUType       string
	Unschedulable bool
	// Replicas is the inventory's time-slicing replicas per GPU (0: each GPU advertised once);
	// GPUs are the physical ones either way.
	Replicas int32
}

// NodeInfoFromNode reads a node. A malformed GPU inventory is returned as an error together with
// a usable NodeInfo (its GPUs without UUIDs).
func NodeInfoFromNode(obj *corev1.Node) (NodeInfo, error) {
	ns, err := readNode(obj)
	return NodeInfo{Allocatable: ns.alloc, GPUs: ns.slots, GPUType: ns.gpuType, Unschedulable: ns.unschedulable, Replicas: ns.replicas}, err
}

// nodeSpec is what the snapshot reads from a corev1.Node.
type nodeSpec struct {
	alloc         NodeResources
	slots         []GPUSlot
	gpuType       string
	unschedulable bool
	inventory     bool
	invGPUs       int
	unhealthy     int
	// replicas is the inventory's time-slicing replicas per GPU, 0 when not time-sliced.
	replicas int32
}

func readNode(obj *corev1.Node) (nodeSpec, error) {
	var ns nodeSpec
	var err error
	for name, q := range obj.Status.Allocatable {
		switch name {
		case corev1.ResourceCPU:
			ns.alloc.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			ns.alloc.Memory = q.Value()
		case corev1.ResourcePods:
			ns.alloc.Pods = q.Value()
		case v1alpha1.ResourceGPU:
			// counted below
		case v1alpha1.ResourceGPUShare:
			// The device plugin's share slots: the kubelet's tickets for fractional pods, not a
			// capacity the scheduler places by (it accounts shares by size on GPU slots).
		default:
			if ns.alloc.Scalars == nil {
				ns.alloc.Scalars = make(map[corev1.ResourceName]int64)
			}
			ns.alloc.Scalars[name] = q.Value()
		}
	}
	gpus := int64(0)
	if q, ok := obj.Status.Allocatable[v1alpha1.ResourceGPU]; ok {
		gpus = max(q.Value(), 0)
	}
	var inv []GPUInventoryEntry
	if v, ok := obj.Annotations[v1alpha1.GPUInventoryAnnotation]; ok && v != "" {
		var p parsedInventory
		p, err = parseGPUInventory(v)
		inv, ns.unhealthy = p.gpus, p.unhealthy
		// A bad inventory leaves the GPUs usable, without UUIDs; the error is reported.
		ns.inventory = err == nil && len(inv) > 0
		ns.invGPUs = len(inv) + ns.unhealthy
		if err == nil && p.obj.Replicas > 1 {
			// A time-sliced node advertises each GPU Replicas times; its slots are the physical
			// GPUs, so no two holders of a whole GPU (whole-GPU pods, reservations) are counted
			// onto one device. The kubelet's distributed allocation of replicas puts each holder
			// on a GPU no other holds (docs/isolation.md, "Time-sliced nodes").
			ns.replicas = p.obj.Replicas
			gpus = min(p.obj.PhysicalGPUs(gpus), int64(len(inv)))
		}
	}
	gpus = min(gpus, 1024)
	labelMem := int64(0)
	if v, ok := obj.Labels[v1alpha1.GPUMemoryLabel]; ok {
		labelMem, _ = strconv.ParseInt(v, 10, 64)
		labelMem = max(labelMem, 0)
	}
	ns.slots = make([]GPUSlot, gpus)
	for i := range ns.slots {
		ns.slots[i] = GPUSlot{Index: i, MemoryMiB: labelMem}
		if i < len(inv) {
			ns.slots[i].Index = inv[i].Index
			ns.slots[i].UUID = inv[i].UUID
			if inv[i].MemoryMiB > 0 {
				ns.slots[i].MemoryMiB = inv[i].MemoryMiB
			}
		}
	}
	ns.gpuType = obj.Labels[v1alpha1.GPUTypeLabel]
	ns.unschedulable = obj.Spec.Unschedulable
	return ns, err
}

// slotPos returns the position in n.Slots of the GPU with the given index, or -1.
func (n *Node) slotPos(index int) int {
	if index >= 0 && index < len(n.Slots) && n.Slots[index].Index == index {
		return index
	}
	for i := range n.Slots {
		if n.Slots[i].Index == index {
			return i
		}
	}
	return -1
}

// attach adds t's usage to the node. t.GPUs must be set (see placeExisting for pods found running).
func (n *Node) attach(t *Task) {
	n.Used.add(&t.Req, 1)
	for _, p := range t.Req.HostPorts {
		if n.ports == nil {
			n.ports = make(map[HostPort]int32)
		}
		n.ports[p]++
	}
	a := &t.GPUs
	for _, pos := range a.Whole {
		g := &n.Slots[pos]
		g.UsedMilli += MilliPerGPU
		g.UsedMemMiB += g.MemoryMiB
		g.Owners++
	}
	n.Floating += a.Floating
	if a.Shared >= 0 {
		g := &n.Slots[a.Shared]
		switch {
		case t.Req.Reservation:
			g.Reserved++
		case a.Loan:
			g.Loans++
			g.LoanMemMiB += int32(a.MemMiB)
			n.Loans++
		default:
			g.UsedMilli += a.Milli
			g.UsedMemMiB += a.MemMiB
			g.Sharers++
		}
	}
	n.UsedMilliGPU += a.slotMilli()
	if t.Gang == nil {
		n.Unmanaged.add(&t.Req, 1)
		n.UnmanagedMilliGPU += a.MilliGPU()
	}
	t.nodePos = len(n.Tasks)
	n.Tasks = append(n.Tasks, t)
	if t.State == TaskReleasing {
		n.release(t, 1)
	}
	n.Version++
}

// detach removes t's usage from the node.
func (n *Node) detach(t *Task) {
	if t.State == TaskReleasing {
		n.release(t, -1)
	}
	n.Used.add(&t.Req, -1)
	for _, p := range t.Req.HostPorts {
		if n.ports[p]--; n.ports[p] <= 0 {
			delete(n.ports, p)
		}
	}
	a := &t.GPUs
	for _, pos := range a.Whole {
		g := &n.Slots[pos]
		g.UsedMilli -= MilliPerGPU
		g.UsedMemMiB -= g.MemoryMiB
		g.Owners--
	}
	n.Floating -= a.Floating
	if a.Shared >= 0 {
		g := &n.Slots[a.Shared]
		switch {
		case t.Req.Reservation:
			g.Reserved--
		case a.Loan:
			g.Loans--
			g.LoanMemMiB -= int32(a.MemMiB)
			n.Loans--
		default:
			g.UsedMilli -= a.Milli
			g.UsedMemMiB -= a.MemMiB
			g.Sharers--
		}
	}
	n.UsedMilliGPU -= a.slotMilli()
	if t.Gang == nil {
		n.Unmanaged.add(&t.Req, -1)
		n.UnmanagedMilliGPU -= a.MilliGPU()
	}
	n.Tasks = swapRemove(n.Tasks, t, func(t *Task) *int { return &t.nodePos })
	n.Version++
}

// release moves t's usage into (sign 1) or out of (sign -1) the releasing part.
func (n *Node) release(t *Task, sign int64) {
	n.Releasing.add(&t.Req, sign)
	a := &t.GPUs
	for _, pos := range a.Whole {
		g := &n.Slots[pos]
		g.RelMilli += sign * MilliPerGPU
		g.RelMemMiB += sign * g.MemoryMiB
		g.RelOwners += int32(sign)
	}
	n.FloatingRel += sign * a.Floating
	if a.Shared >= 0 {
		g := &n.Slots[a.Shared]
		switch {
		case t.Req.Reservation:
			g.RelReserved += int32(sign)
		case a.Loan:
			g.RelLoans += int16(sign)
		default:
			g.RelMilli += sign * a.Milli
			g.RelMemMiB += sign * a.MemMiB
			g.RelSharers += int32(sign)
		}
	}
	n.RelMilliGPU += sign * a.slotMilli()
	n.Version++
}

// placeExisting decides the GPU assignment of a pod found bound to the node (not placed by the
// engine): the slots its fairway.dev/gpu-index annotation names when they are free, otherwise
// floating whole GPUs, or for a shared pod the fullest GPU with room. A reservation pod marks the
// slot its fairway.dev/gpu-slot annotation names, or holds a floating whole GPU when that slot is
// unknown or held whole.
func (n *Node) placeExisting(t *Task, indexes []int) {
	a := Assignment{Shared: -1}
	r := &t.Req
	switch {
	case r.Reservation:
		idx := t.resvSlot
		if len(indexes) > 0 {
			idx = indexes[0]
		}
		if pos := n.slotPos(idx); idx >= 0 && pos >= 0 && n.Slots[pos].Owners == 0 {
			a.Shared = int32(pos)
		} else {
			a.Floating = 1
		}
	case r.WholeGPUs > 0:
		for _, idx := range indexes {
			pos := n.slotPos(idx)
			// A DRA device is claimed by the pod's own claim: held by nothing else is enough.
			if pos < 0 || !n.Slots[pos].emptyButClaimed() || slices.Contains(a.Whole, int32(pos)) || int64(len(a.Whole)) == r.WholeGPUs {
				continue
			}
			a.Whole = append(a.Whole, int32(pos))
		}
		a.Floating = r.WholeGPUs - int64(len(a.Whole))
	case r.Shared() && t.loanHint && len(indexes) > 0 && n.slotPos(indexes[0]) >= 0 && n.Slots[n.slotPos(indexes[0])].Owners == 0:
		// A loan found running (a restarted scheduler): on the GPU it was lent, apart from the
		// shares.
		pos := n.slotPos(indexes[0])
		g := &n.Slots[pos]
		a.Shared, a.Loan = int32(pos), true
		a.Milli = max(r.SharedMilli(g.MemoryMiB), r.FractionMilli, 1)
		a.MemMiB = r.SharedMemMiB(g.MemoryMiB)
	case r.Shared():
		pos := -1
		if len(indexes) > 0 {
			pos = n.slotPos(indexes[0])
		}
		if pos < 0 || n.Slots[pos].Owners > 0 {
			pos = -1
			best := int64(-1)
			for i := range n.Slots {
				g := &n.Slots[i]
				m := r.SharedMilli(g.MemoryMiB)
				if g.Owners > 0 || m < 0 || g.UsedMilli+m > MilliPerGPU {
					continue
				}
				if g.UsedMilli > best {
					pos, best = i, g.UsedMilli
				}
			}
		}
		if pos < 0 && len(n.Slots) > 0 {
			// Nowhere with room: account it on the first GPU rather than lose it.
			pos = 0
		}
		if pos >= 0 {
			g := &n.Slots[pos]
			a.Shared = int32(pos)
			a.Milli = max(r.SharedMilli(g.MemoryMiB), r.FractionMilli, 1)
			a.MemMiB = r.SharedMemMiB(g.MemoryMiB)
		}
	}
	t.GPUs = a
}
