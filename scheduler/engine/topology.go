package engine

import (
	"cmp"
	"slices"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// TightestDomains returns the indexes of the domains (of doms' topology level) that have at
// least needMilliGPU of GPU capacity free on nodes in cls, ordered tightest first: the domain
// with the least free GPU capacity that can still take the request comes first, so large
// domains stay free for large gangs. Ties go to the domain name. afterRelease counts releasing
// pods as gone. A gang without GPUs considers every domain, least GPU capacity first.
func TightestDomains(snap *snapshot.Snapshot, doms *snapshot.Domains, cls bitset.Set, needMilliGPU int64, afterRelease bool) []int {
	type cand struct {
		i    int
		free int64
	}
	nodes := snap.Nodes()
	var cands []cand
	for i := range doms.Values {
		var free int64
		for id := bitset.NextAnd(doms.Nodes[i], cls, nil, 0); id >= 0; id = bitset.NextAnd(doms.Nodes[i], cls, nil, id+1) {
			free += freeMilliGPU(nodes[id], afterRelease)
		}
		if free >= needMilliGPU {
			cands = append(cands, cand{i, free})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(a.free, b.free); c != 0 {
			return c
		}
		return cmp.Compare(doms.Values[a.i], doms.Values[b.i])
	})
	out := make([]int, len(cands))
	for i, c := range cands {
		out[i] = c.i
	}
	return out
}

// domainOrder lists the domains to try for a gang: those that fit all its pending pods, tightest
// first, then those that fit only the pods it needs to start.
func domainOrder(snap *snapshot.Snapshot, doms *snapshot.Domains, cls bitset.Set, allMilli, minMilli int64, afterRelease bool) []int {
	order := TightestDomains(snap, doms, cls, allMilli, afterRelease)
	if minMilli < allMilli {
		for _, d := range TightestDomains(snap, doms, cls, minMilli, afterRelease) {
			if !slices.Contains(order, d) {
				order = append(order, d)
			}
		}
	}
	return order
}

// runningDomain returns the domain of the gang's pods already on nodes (they fix where the rest
// must go), or -1 when none runs.
func runningDomain(g *snapshot.Gang, doms *snapshot.Domains, subGroup string, bySubGroup bool) int {
	for _, t := range g.Tasks {
		if t.Node == nil || (bySubGroup && t.SubGroup != subGroup) {
			continue
		}
		if d := doms.DomainOf(t.Node); d >= 0 {
			return d
		}
	}
	return -1
}

// and returns a ∩ b as a new set; a nil set stands for every node.
func and(a, b bitset.Set) bitset.Set {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := make(bitset.Set, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}
