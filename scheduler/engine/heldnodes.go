package engine

import (
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// heldNodes reports the nodes capacity is held on (Result.HeldNodes). The holds keep fairway's
// other gangs off that capacity; other schedulers know nothing of them, so the runtime puts the
// hold taint on these nodes until the holds go. A node held for several gangs names the least by key: the
// taint's value is for people, the holds decide among fairway's gangs.
func (c *cycle) heldNodes() {
	held := c.snap.HeldGangs()
	if len(held) == 0 {
		return
	}
	n := 0
	for _, g := range held {
		n += len(g.Holds())
	}
	out := make([]NodeHold, 0, n)
	for _, g := range held {
		for _, h := range g.Holds() {
			out = append(out, NodeHold{Node: h.Node.Name, Gang: g.Key})
		}
	}
	slices.SortFunc(out, func(a, b NodeHold) int {
		if d := strings.Compare(a.Node, b.Node); d != 0 {
			return d
		}
		return a.Gang.Compare(b.Gang)
	})
	c.res.HeldNodes = slices.CompactFunc(out, func(a, b NodeHold) bool { return a.Node == b.Node })
}

// foreignCompetition is what a reason adds when pods of other schedulers wait for GPUs as well
// ("" when none do, or the gang does not wait for GPUs): they compete for the same nodes, and
// only what fairway holds for the gang is kept from them. The schedulers are named, not counted,
// so that the reason, which is written to every waiting pod, does not change with each of their
// pods (`fairway why` counts them).
func (c *cycle) foreignCompetition(g *snapshot.Gang, code ReasonCode) string {
	switch code {
	case ReasonNoNodeFits, ReasonOverFairShare, ReasonWaitingEvictions, ReasonStarvationHold, ReasonTopology:
	default:
		return ""
	}
	foreign := c.snap.ForeignPending()
	if len(foreign) == 0 || !slices.ContainsFunc(g.Pending, func(t *snapshot.Task) bool { return t.Req.GPU() }) {
		return ""
	}
	names := make([]string, len(foreign))
	for i, f := range foreign {
		names[i] = f.Scheduler
	}
	return "; pods of other schedulers (" + strings.Join(names, ", ") + ") also wait for GPUs: fairway does not place them, " +
		"and capacity it does not hold for a gang goes to whichever scheduler binds first"
}
