package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// NodeList is the output of `fairway nodes -o json|yaml`: GPU nodes by name.
type NodeList struct {
	Kind  string     `json:"kind"` // NodeList
	Items []NodeView `json:"items"`
}

// NodeView is one GPU node.
type NodeView struct {
	Name string `json:"name"`
	// GPUType is the node's fairway.dev/gpu-type (its node pool).
	GPUType string `json:"gpuType,omitempty"`
	// GPUs is the node's GPU count (the gpu-agent's inventory, else nvidia.com/gpu capacity).
	GPUs int `json:"gpus"`
	// Unhealthy GPUs are lost or failing according to the inventory.
	Unhealthy int `json:"unhealthy"`
	// Whole GPUs are held whole by pods; Shared GPUs hold fractional pods; Free is the rest.
	Whole  int64 `json:"whole"`
	Shared int   `json:"shared"`
	Free   int64 `json:"free"`
	// Sharing counts the node's GPUs by how pods that share one are kept apart on it
	// (v1alpha1.GPUSharingMode: soft, mps, mig; docs/isolation.md); empty without an inventory.
	Sharing map[fairwayv1.GPUSharingMode]int `json:"sharing,omitempty"`
	// SharedGPUs lists the shared GPUs and the pods on each.
	SharedGPUs []SharedGPUView `json:"sharedGPUs"`
	// Swapped counts the shared GPUs with a pod whose GPU memory the gpu-agent moved to host
	// RAM (docs/idle-lending.md#swap).
	Swapped int `json:"swapped,omitempty"`
	// WholeGPUPods are the pods that hold GPUs of the node whole. Which devices they got is the
	// kubelet's choice, which the API does not show.
	WholeGPUPods []WholeGPUPodView `json:"wholeGPUPods,omitempty"`
}

// WholeGPUPodView is a pod holding whole GPUs.
type WholeGPUPodView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Queue     string `json:"queue,omitempty"`
	GPUs      int64  `json:"gpus"`
}

// SharedGPUView is one GPU shared by fractional pods.
type SharedGPUView struct {
	// Index is the physical GPU's index on the node (from the inventory); absent until the
	// gpu-agent has reported which GPU the slot's reservation got.
	Index *int32 `json:"index,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	// Slot is the scheduler's slot number for the GPU (fairway.dev/gpu-index on the pods).
	Slot *int `json:"slot,omitempty"`
	// Mode is how the pods on the GPU are kept apart (v1alpha1.GPUSharingMode): what their
	// shares are worth; empty until the GPU is known from the inventory.
	Mode fairwayv1.GPUSharingMode `json:"mode,omitempty"`
	// KernelMemoryLimit: each share's memory limit is set on its pod's cgroup and enforced by
	// the driver for every process of the pod (v1alpha1.GPUDevice.KernelMemoryLimit); shown as
	// "+kernel" after the mode.
	KernelMemoryLimit bool `json:"kernelMemoryLimit,omitempty"`
	// Allocated is the share handed out, 0 to 1 (memory shares over the GPU's memory). Pods on
	// loan are not counted: they use what the GPU's idle notebooks hold and leave when those
	// work again.
	Allocated float64        `json:"allocated"`
	Pods      []SharePodView `json:"pods"`
	// SwappedBytes is the GPU memory of its pods on host RAM (swapped out, or not brought back).
	SwappedBytes int64 `json:"swappedBytes,omitempty"`
}

// SharePodView is a fractional pod on a shared GPU.
type SharePodView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Queue     string `json:"queue,omitempty"`
	// Share is "0.25" or "20000MiB".
	Share string `json:"share"`
	// OnLoan is true for a pod on loan on the GPU while its notebooks are idle.
	OnLoan bool `json:"onLoan,omitempty"`
	// Swap is, for an idle notebook whose GPU memory is on host RAM, what the gpu-agent says
	// of it (fairway.dev/gpu-swap); absent otherwise.
	Swap *SwapView `json:"swap,omitempty"`
}

// SwapView is a pod's GPU memory on host RAM: SwappedOut while its GPU is lent in full,
// RestoreFailed when it could not be brought back (its GPU is then lent to no one).
type SwapView struct {
	State  fairwayv1.GPUSwapState `json:"state"`
	Bytes  int64                  `json:"bytes"`
	Reason string                 `json:"reason,omitempty"`
}

// swapOf is the pod's swap when its memory is on the host, nil otherwise.
func swapOf(p *corev1.Pod) *SwapView {
	s, ok, err := fairwayv1.GPUSwapOf(p.Annotations)
	if !ok || err != nil || (s.State != fairwayv1.GPUSwappedOut && s.State != fairwayv1.GPUSwapRestoreFailed) {
		return nil
	}
	return &SwapView{State: s.State, Bytes: s.Bytes, Reason: s.Reason}
}

// swapNote is how the tables show a pod's swap: "swapped 30Gi", "restore of 30Gi failed".
func (s *SwapView) note() string {
	if s.State == fairwayv1.GPUSwapRestoreFailed {
		return "restore of " + formatAmount("memory", Amount(s.Bytes)) + " failed"
	}
	return "swapped " + formatAmount("memory", Amount(s.Bytes))
}

// NodesSnapshot is what `fairway nodes` reads.
type NodesSnapshot struct {
	Nodes []corev1.Node
	Pods  []corev1.Pod
}

// RunNodes prints the GPU nodes and their shared GPUs.
func RunNodes(ctx context.Context, o *Options) error {
	var nodes corev1.NodeList
	if err := o.list(ctx, &nodes, "nodes"); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := o.list(ctx, &pods, "pods"); err != nil {
		return err
	}
	view := BuildNodes(&NodesSnapshot{Nodes: nodes.Items, Pods: pods.Items})
	if ok, err := o.printStructured(view); ok {
		return err
	}
	if len(view.Items) == 0 {
		_, err := fmt.Fprintln(o.Out, "No GPU nodes: no node has nvidia.com/gpu capacity or a gpu-agent inventory.")
		return err
	}
	if o.Output == OutputWide {
		return PrintNodesWide(o.Out, view)
	}
	return PrintNodes(o.Out, view)
}

// BuildNodes makes the node view.
func BuildNodes(s *NodesSnapshot) NodeList {
	byNode := map[string][]*corev1.Pod{}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Spec.NodeName != "" && !terminated(p) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	out := NodeList{Kind: "NodeList", Items: make([]NodeView, 0, len(s.Nodes))}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		inv := inventoryOf(n)
		capacity := n.Status.Capacity[fairwayv1.ResourceGPU]
		if inv == nil && capacity.Value() == 0 {
			continue
		}
		out.Items = append(out.Items, nodeView(n, inv, byNode[n.Name]))
	}
	slices.SortFunc(out.Items, func(a, b NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func nodeView(n *corev1.Node, inv *fairwayv1.GPUInventory, pods []*corev1.Pod) NodeView {
	v := NodeView{Name: n.Name, GPUType: n.Labels[fairwayv1.GPUTypeLabel], SharedGPUs: []SharedGPUView{}}
	capacity := n.Status.Capacity[fairwayv1.ResourceGPU]
	v.GPUs = int(capacity.Value())
	gpuMiB, _ := strconv.ParseInt(n.Labels[fairwayv1.GPUMemoryLabel], 10, 64)
	byUUID := map[string]fairwayv1.GPUDevice{}
	if inv != nil {
		v.GPUs = len(inv.GPUs)
		v.Sharing = map[fairwayv1.GPUSharingMode]int{}
		for _, g := range inv.GPUs {
			v.Sharing[inv.SharingMode(g)]++
			byUUID[g.UUID] = g
			if !g.Healthy {
				v.Unhealthy++
			}
		}
	}
	// Fractional pods and the reservation that holds their GPU share the fairway.dev/gpu-group
	// label; before the scheduler labels them, the UUID or the slot stands in.
	groups := map[string]*SharedGPUView{}
	var order []string
	group := func(key string) *SharedGPUView {
		if g := groups[key]; g != nil {
			return g
		}
		g := &SharedGPUView{Pods: []SharePodView{}}
		groups[key] = g
		order = append(order, key)
		return g
	}
	for _, p := range pods {
		g := gpuOf(p)
		switch {
		case isReservation(p):
			sg := group(groupKey(p, g))
			if uuid := p.Annotations[fairwayv1.GPUUUIDAnnotation]; uuid != "" {
				sg.UUID = uuid
			}
		case g.shared():
			sg := group(groupKey(p, g))
			if g.UUID != "" {
				sg.UUID = g.UUID
			}
			if g.Slot >= 0 {
				slot := g.Slot
				sg.Slot = &slot
			}
			loan := isLoan(p)
			sp := SharePodView{Namespace: p.Namespace, Name: p.Name, Queue: queueOf(p), Share: g.share(), OnLoan: loan}
			if !loan {
				sp.Swap = swapOf(p)
			}
			if sp.Swap != nil {
				sg.SwappedBytes += sp.Swap.Bytes
			}
			sg.Pods = append(sg.Pods, sp)
			switch {
			case loan:
			case g.Milli > 0:
				sg.Allocated += float64(g.Milli) / 1000
			default:
				if mib := deviceMiB(byUUID, g.UUID, gpuMiB); mib > 0 {
					sg.Allocated += float64(g.MemoryMiB) / float64(mib)
				}
			}
		case g.Whole > 0:
			v.Whole += g.Whole
			if v.WholeGPUPods == nil {
				v.WholeGPUPods = make([]WholeGPUPodView, 0, len(pods))
			}
			v.WholeGPUPods = append(v.WholeGPUPods, WholeGPUPodView{Namespace: p.Namespace, Name: p.Name, Queue: queueOf(p), GPUs: g.Whole})
		}
	}
	slices.SortFunc(v.WholeGPUPods, func(a, b WholeGPUPodView) int {
		return compareNamespaced(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	for _, key := range order {
		sg := groups[key]
		if d, ok := byUUID[sg.UUID]; ok && sg.UUID != "" {
			idx := d.Index
			sg.Index = &idx
			sg.Mode = inv.SharingMode(d)
			sg.KernelMemoryLimit = d.KernelMemoryLimit
		}
		slices.SortFunc(sg.Pods, func(a, b SharePodView) int {
			return compareNamespaced(a.Namespace, a.Name, b.Namespace, b.Name)
		})
		v.SharedGPUs = append(v.SharedGPUs, *sg)
		if sg.SwappedBytes > 0 {
			v.Swapped++
		}
	}
	slices.SortFunc(v.SharedGPUs, func(a, b SharedGPUView) int { return compareSlots(a, b) })
	v.Shared = len(v.SharedGPUs)
	v.Free = max(int64(v.GPUs-v.Unhealthy-v.Shared)-v.Whole, 0)
	return v
}

func groupKey(p *corev1.Pod, g podGPU) string {
	if k := p.Labels[fairwayv1.GPUGroupLabel]; k != "" {
		return "group:" + k
	}
	if uuid := p.Annotations[fairwayv1.GPUUUIDAnnotation]; uuid != "" {
		return "uuid:" + uuid
	}
	return "slot:" + strconv.Itoa(g.Slot)
}

func deviceMiB(byUUID map[string]fairwayv1.GPUDevice, uuid string, fallback int64) int64 {
	if d, ok := byUUID[uuid]; ok && d.MemoryMiB > 0 {
		return d.MemoryMiB
	}
	return fallback
}

// compareSlots orders shared GPUs by physical index, then slot, then UUID.
func compareSlots(a, b SharedGPUView) int {
	key := func(s SharedGPUView) (int, int) {
		i, sl := 1<<30, 1<<30
		if s.Index != nil {
			i = int(*s.Index)
		}
		if s.Slot != nil {
			sl = *s.Slot
		}
		return i, sl
	}
	ai, as := key(a)
	bi, bs := key(b)
	switch {
	case ai != bi:
		return ai - bi
	case as != bs:
		return as - bs
	}
	return strings.Compare(a.UUID, b.UUID)
}

func inventoryOf(n *corev1.Node) *fairwayv1.GPUInventory {
	s := n.Annotations[fairwayv1.GPUInventoryAnnotation]
	if s == "" {
		return nil
	}
	var inv fairwayv1.GPUInventory
	if err := json.Unmarshal([]byte(s), &inv); err != nil {
		return nil
	}
	return &inv
}

// PrintNodes writes the node table and, below it, the shared GPUs.
func PrintNodes(w io.Writer, v NodeList) error {
	t := newTable(w, "NODE", "TYPE", "GPUS", "WHOLE", "SHARED", "FREE", "UNHEALTHY", "SHARING")
	var shared bool
	for _, n := range v.Items {
		t.row(n.Name, n.GPUType, strconv.Itoa(n.GPUs), strconv.FormatInt(n.Whole, 10), strconv.Itoa(n.Shared),
			strconv.FormatInt(n.Free, 10), strconv.Itoa(n.Unhealthy), sharingColumn(n.Sharing))
		shared = shared || len(n.SharedGPUs) > 0
	}
	if err := t.flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(v.Items, func(n NodeView) bool { return len(n.Sharing) > 0 }) {
		if _, err := fmt.Fprintln(w, sharingLegend); err != nil {
			return err
		}
	}
	if !shared {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t = newTable(w, "NODE", "GPU", "UUID", "SLOT", "MODE", "ALLOCATED", "PODS")
	swapped, kernel := false, false
	for _, n := range v.Items {
		swapped = swapped || n.Swapped > 0
		for _, g := range n.SharedGPUs {
			kernel = kernel || g.KernelMemoryLimit
			idx, slot := "", ""
			if g.Index != nil {
				idx = strconv.Itoa(int(*g.Index))
			}
			if g.Slot != nil {
				slot = strconv.Itoa(*g.Slot)
			}
			pods := make([]string, 0, len(g.Pods))
			for _, p := range g.Pods {
				s := fmt.Sprintf("%s/%s=%s", p.Namespace, p.Name, p.Share)
				if p.OnLoan {
					s += "(on loan)"
				}
				if p.Swap != nil {
					s += "(" + p.Swap.note() + ")"
				}
				pods = append(pods, s)
			}
			mode := g.modeColumn()
			if mode == "" {
				mode = "-"
			}
			t.row(n.Name, idx, g.UUID, slot, mode, decimal(g.Allocated), strings.Join(pods, ","))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if swapped {
		if _, err := fmt.Fprintln(w, swapLegend); err != nil {
			return err
		}
	}
	if kernel {
		if _, err := fmt.Fprintln(w, kernelLegend); err != nil {
			return err
		}
	}
	return nil
}

// modeColumn is the GPU's sharing mode, with "+kernel" where the driver enforces each share's
// memory on its pod's cgroup.
func (g SharedGPUView) modeColumn() string {
	if g.KernelMemoryLimit && g.Mode != "" {
		return string(g.Mode) + "+kernel"
	}
	return string(g.Mode)
}

// swapLegend explains "swapped", shown with the shared GPUs when a notebook's memory is on the
// host.
const swapLegend = "swapped: an idle notebook's GPU memory moved to host RAM while its GPU is lent in full; it comes back at the notebook's next cell"

// sharingLegend explains the SHARING column, which a newcomer cannot read otherwise.
const sharingLegend = "SHARING: how pods on one GPU are kept apart: soft (time-sliced, each pod keeps to its share), mps (an MPS server per pod enforces its memory), mig (MIG mode: no shares)"

// kernelLegend explains "+kernel" in the MODE column, shown with the shared GPUs when one has it.
const kernelLegend = "+kernel: each share's memory limit is on its pod's cgroup, enforced by the driver for every process of the pod (NVIDIA r615+)"

// PrintNodesWide writes the node table and, below it, every pod holding a GPU of each node:
// the GPU (its index for a shared GPU; "-" for GPUs held whole, whose devices the kubelet
// chooses), the pod, its queue and what it holds.
func PrintNodesWide(w io.Writer, v NodeList) error {
	if err := PrintNodes(w, NodeList{Kind: v.Kind, Items: stripShared(v.Items)}); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := newTable(w, "NODE", "GPU", "MODE", "POD", "QUEUE", "HOLDS")
	for _, n := range v.Items {
		for _, p := range n.WholeGPUPods {
			t.row(n.Name, "", "", p.Namespace+"/"+p.Name, p.Queue, plural(p.GPUs, "whole GPU", "whole GPUs"))
		}
		for _, g := range n.SharedGPUs {
			gpu := "slot ?"
			switch {
			case g.Index != nil:
				gpu = strconv.Itoa(int(*g.Index))
			case g.Slot != nil:
				gpu = "slot " + strconv.Itoa(*g.Slot)
			}
			for _, p := range g.Pods {
				holds := p.Share + " of the GPU"
				if p.OnLoan {
					holds += ", on loan"
				}
				if p.Swap != nil {
					holds += ", " + p.Swap.note()
					if p.Swap.State == fairwayv1.GPUSwappedOut {
						holds += " to host RAM"
					}
				}
				t.row(n.Name, gpu, g.modeColumn(), p.Namespace+"/"+p.Name, p.Queue, holds)
			}
		}
		if n.Free > 0 {
			t.row(n.Name, "", "", "", "", plural(n.Free, "GPU free", "GPUs free"))
		}
		if n.Unhealthy > 0 {
			t.row(n.Name, "", "", "", "", plural(int64(n.Unhealthy), "GPU unhealthy", "GPUs unhealthy"))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "GPU: the device index of a shared GPU (\"slot N\" until the gpu-agent reports it); \"-\" for GPUs held whole, whose devices the kubelet chooses.")
	return err
}

// stripShared drops the shared GPUs from a copy of the nodes, so that the wide view prints them
// once, in its holders table.
func stripShared(items []NodeView) []NodeView {
	out := slices.Clone(items)
	for i := range out {
		out[i].SharedGPUs = nil
	}
	return out
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// sharingColumn is the node's sharing modes: the mode when every GPU has it, else each mode with
// its count ("mig:1,soft:7"); "-" without an inventory.
func sharingColumn(modes map[fairwayv1.GPUSharingMode]int) string {
	if len(modes) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(modes))
	if len(keys) == 1 {
		return string(keys[0])
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = string(k) + ":" + strconv.Itoa(modes[k])
	}
	return strings.Join(parts, ",")
}
