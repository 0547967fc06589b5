package snapshot

import (
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
)

// reindex moves a node to the index entries its state now calls for. Called after every change
// of the node's usage.
func (s *Snapshot) reindex(n *Node) {
	k := int(n.FreeWholeSlots())
	if k != n.bucket {
		if n.bucket >= 0 && n.bucket < len(s.byFree) {
			s.byFree[n.bucket].Remove(n.ID)
		}
		for len(s.byFree) <= k {
			s.byFree = append(s.byFree, nil)
		}
		s.byFree[k].Add(n.ID)
		n.bucket = k
	}
	if n.HasSharedRoom() {
		s.sharedRoom.Add(n.ID)
	} else {
		s.sharedRoom.Remove(n.ID)
	}
	if n.Releasing.Pods > 0 {
		s.releasing.Add(n.ID)
	} else {
		s.releasing.Remove(n.ID)
	}
}

func (s *Snapshot) unindex(n *Node) {
	if n.bucket >= 0 && n.bucket < len(s.byFree) {
		s.byFree[n.bucket].Remove(n.ID)
	}
	n.bucket = -1
	s.sharedRoom.Remove(n.ID)
	s.releasing.Remove(n.ID)
	s.cpuOnly.Remove(n.ID)
	s.allNodes.Remove(n.ID)
}

// NodesWithFreeGPUs returns the set of nodes on which exactly k GPUs are free for whole-GPU pods
// (holds not counted), or nil when there are none. Owned by the snapshot.
func (s *Snapshot) NodesWithFreeGPUs(k int) bitset.Set {
	if k < 0 || k >= len(s.byFree) {
		return nil
	}
	return s.byFree[k]
}

// MaxFreeGPUs is the largest k for which NodesWithFreeGPUs may be non-empty.
func (s *Snapshot) MaxFreeGPUs() int { return len(s.byFree) - 1 }

// NodesWithSharedRoom is the set of nodes with a GPU shared by fractional pods that has room left.
func (s *Snapshot) NodesWithSharedRoom() bitset.Set { return s.sharedRoom }

// NodesReleasing is the set of nodes where pods are leaving (evicted or terminating).
func (s *Snapshot) NodesReleasing() bitset.Set { return s.releasing }

// CPUOnlyNodes is the set of nodes without GPUs.
func (s *Snapshot) CPUOnlyNodes() bitset.Set { return s.cpuOnly }

// AllNodes is the set of every node.
func (s *Snapshot) AllNodes() bitset.Set { return s.allNodes }

// Domains are the topology domains of one level: nodes grouped by the value of one label.
type Domains struct {
	// Key is the node label.
	Key string
	// Values are the label's values, sorted; Nodes[i] is the set of nodes with Values[i].
	Values []string
	Nodes  []bitset.Set
	// Of maps a node ID to its domain's index, or -1 for nodes without the label.
	Of  []int32
	gen uint64
}

// Domains returns the domains of a topology level (a node label key). They are rebuilt only
// after nodes were added, removed or relabelled.
func (s *Snapshot) Domains(key string) *Domains {
	d := s.topo[key]
	if d != nil && d.gen == s.nodeGen {
		return d
	}
	d = &Domains{Key: key, gen: s.nodeGen, Of: make([]int32, len(s.nodes))}
	idx := map[string]int{}
	for _, n := range s.nodes {
		if n == nil {
			continue
		}
		v, ok := n.Obj.Labels[key]
		if !ok {
			continue
		}
		if _, seen := idx[v]; !seen {
			idx[v] = 0
			d.Values = append(d.Values, v)
		}
	}
	slices.SortFunc(d.Values, strings.Compare)
	d.Nodes = make([]bitset.Set, len(d.Values))
	for i, v := range d.Values {
		idx[v] = i
		d.Nodes[i] = make(bitset.Set, (len(s.nodes)+63)/64)
	}
	for i := range d.Of {
		d.Of[i] = -1
	}
	for _, n := range s.nodes {
		if n == nil {
			continue
		}
		if v, ok := n.Obj.Labels[key]; ok {
			d.Of[n.ID] = int32(idx[v])
			d.Nodes[idx[v]].Add(n.ID)
		}
	}
	s.topo[key] = d
	return d
}

// DomainOf returns the domain index of a node, or -1.
func (d *Domains) DomainOf(n *Node) int {
	if n.ID < len(d.Of) {
		return int(d.Of[n.ID])
	}
	return -1
}

// swapRemove removes x from list in O(1) and returns the shorter list: the last element takes
// x's place, so the order is not kept. The snapshot's unordered lists (a node's and a gang's
// tasks, a gang's pending tasks, a queue's pending gangs, the stale and held gangs) keep each
// element's index in the element itself; pos returns that field, which follows the move and is
// -1 for x afterwards.
func swapRemove[T any](list []*T, x *T, pos func(*T) *int) []*T {
	i, end := *pos(x), len(list)-1
	last := list[end]
	list[i] = last
	*pos(last) = i
	list[end] = nil
	*pos(x) = -1
	return list[:end]
}
