package view

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// NodeGrid is one GPU node drawn as a row of GPUs, like the demo's terminal grid.
type NodeGrid struct {
	Name    string
	GPUType string
	GPUs    []GPUCell
	// Counts of the node's GPUs: held whole, shared by fractional pods, shared GPUs that hold
	// pods on loan, GPUs whose holders are all idle, free, unhealthy.
	Whole, Shared, Lent, Idle, Free, Unhealthy int
}

// GPU cell states.
const (
	CellWhole     = "whole"
	CellShared    = "shared"
	CellFree      = "free"
	CellUnhealthy = "unhealthy"
)

// GPUCell is one GPU of a node.
type GPUCell struct {
	// Index is the GPU's device index on the node. For a shared GPU it is the real index the
	// gpu-agent reports; GPUs held whole fill the other indexes in order, since the kubelet
	// chooses their devices without saying which (IndexKnown is false for them).
	Index      int
	IndexKnown bool
	State      string
	// Holders are the pods on the GPU: one for a GPU held whole (a pod holding 4 GPUs is on 4
	// cells), every fractional pod for a shared one.
	Holders []Holder
	// Allocated is the share of a shared GPU handed out, 0 to 1 (loans not counted).
	Allocated float64
	// Mode is how a shared GPU's pods are kept apart (soft, mps, mig), when known.
	Mode string
	// Lent is true for a shared GPU with pods on loan on it; Idle when every holder that is
	// not on loan is idle (the gpu-agent's GPUIdle condition).
	Lent, Idle bool
}

// Holder is a pod on a GPU. Hidden holders belong to namespaces the user does not see: only
// that the GPU is taken is shown.
type Holder struct {
	Namespace string
	Name      string
	Queue     string
	// Share is the fractional share ("0.25", "20000MiB"), "" for a whole GPU.
	Share  string
	OnLoan bool
	Idle   bool
	Hidden bool
}

// buildGrids draws every GPU node from cli.BuildNodes' view of it.
func buildGrids(s *Snapshot) []NodeGrid {
	nodes := cli.BuildNodes(&cli.NodesSnapshot{Nodes: s.Nodes, Pods: s.Pods})
	idlePods := map[types.NamespacedName]bool{}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		if c := fairwayv1.GPUIdleConditionOf(p); c != nil && c.Status == corev1.ConditionTrue {
			idlePods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	isIdle := func(ns, name string) bool { return idlePods[types.NamespacedName{Namespace: ns, Name: name}] }
	out := make([]NodeGrid, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		g := NodeGrid{Name: n.Name, GPUType: n.GPUType, Whole: int(n.Whole), Shared: n.Shared, Free: int(n.Free), Unhealthy: n.Unhealthy}
		cells := make([]GPUCell, n.GPUs)
		used := make([]bool, n.GPUs)
		for i := range cells {
			cells[i] = GPUCell{Index: i, State: CellFree}
		}
		var unplaced []GPUCell
		for _, sg := range n.SharedGPUs {
			c := GPUCell{State: CellShared, Allocated: sg.Allocated, Mode: string(sg.Mode), Idle: true}
			owned := false
			for _, p := range sg.Pods {
				h := Holder{Namespace: p.Namespace, Name: p.Name, Queue: p.Queue, Share: p.Share, OnLoan: p.OnLoan, Idle: isIdle(p.Namespace, p.Name)}
				c.Holders = append(c.Holders, h)
				if p.OnLoan {
					c.Lent = true
				} else {
					owned = true
					c.Idle = c.Idle && h.Idle
				}
			}
			c.Idle = c.Idle && owned
			if sg.Index != nil && int(*sg.Index) < len(cells) && !used[*sg.Index] {
				c.Index, c.IndexKnown = int(*sg.Index), true
				cells[c.Index], used[c.Index] = c, true
			} else {
				unplaced = append(unplaced, c)
			}
		}
		next := func() int {
			for i := range used {
				if !used[i] {
					used[i] = true
					return i
				}
			}
			return -1
		}
		for _, c := range unplaced {
			if i := next(); i >= 0 {
				c.Index = i
				cells[i] = c
			}
		}
		for _, p := range n.WholeGPUPods {
			h := Holder{Namespace: p.Namespace, Name: p.Name, Queue: p.Queue, Idle: isIdle(p.Namespace, p.Name)}
			// The pod's cells share their holder: the model is read only (CutGrids copies).
			hs := []Holder{h}
			for range p.GPUs {
				i := next()
				if i < 0 {
					break
				}
				cells[i] = GPUCell{Index: i, State: CellWhole, Holders: hs, Idle: h.Idle}
			}
		}
		// Unhealthy GPUs are those the inventory marks; they are drawn last, over free cells.
		for k := 0; k < n.Unhealthy; k++ {
			for i := len(cells) - 1; i >= 0; i-- {
				if cells[i].State == CellFree {
					cells[i].State = CellUnhealthy
					break
				}
			}
		}
		for _, c := range cells {
			if c.Lent {
				g.Lent++
			}
			if c.Idle {
				g.Idle++
			}
		}
		g.GPUs = cells
		out = append(out, g)
	}
	return out
}

// GPUTypeTotals are a GPU type's GPUs by what holds them.
type GPUTypeTotals struct {
	Type                                           string
	Total, Whole, Shared, Lent, Idle, Free, Broken int
}

// gpuTypes totals the grids per GPU type, by type name ("" last, shown as "untyped").
func gpuTypes(grids []NodeGrid) []GPUTypeTotals {
	byType := map[string]*GPUTypeTotals{}
	var order []string
	for _, g := range grids {
		t := byType[g.GPUType]
		if t == nil {
			t = &GPUTypeTotals{Type: g.GPUType}
			byType[g.GPUType] = t
			order = append(order, g.GPUType)
		}
		t.Total += len(g.GPUs)
		t.Whole += g.Whole
		t.Shared += g.Shared
		t.Lent += g.Lent
		t.Idle += g.Idle
		t.Free += g.Free
		t.Broken += g.Unhealthy
	}
	slices.SortFunc(order, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "":
			return 1
		case b == "":
			return -1
		case a < b:
			return -1
		}
		return 1
	})
	out := make([]GPUTypeTotals, 0, len(order))
	for _, k := range order {
		out = append(out, *byType[k])
	}
	return out
}

// CutGrids hides the holders a user may not see. Grids without a visible holder are kept: the
// node's capacity is not a secret to a user who may list nodes.
func CutGrids(grids []NodeGrid, sc Scope) []NodeGrid {
	if sc.All {
		return grids
	}
	out := make([]NodeGrid, len(grids))
	for i, g := range grids {
		cells := make([]GPUCell, len(g.GPUs))
		for j, c := range g.GPUs {
			if len(c.Holders) > 0 {
				hs := make([]Holder, len(c.Holders))
				for k, h := range c.Holders {
					if !sc.Sees(h.Namespace) {
						h = Holder{Hidden: true, Share: h.Share, OnLoan: h.OnLoan}
					}
					hs[k] = h
				}
				c.Holders = hs
			}
			cells[j] = c
		}
		g.GPUs = cells
		out[i] = g
	}
	return out
}
