package engine

import (
	"slices"
	"strings"
)

// reserve reports the nodes capacity is held on (Result.Reserved). The holds keep fairway's
// other gangs off that capacity; other schedulers know nothing of them, so the runtime taints
// these nodes until the holds go. A node held for several gangs names the least by key: the
// taint's value is for people, the holds decide among fairway's gangs.
func (c *cycle) reserve() {
	held := c.snap.HeldGangs()
	if len(held) == 0 {
		return
	}
	at := make(map[string]int, len(held))
	for _, g := range held {
		for _, h := range g.Holds() {
			if i, ok := at[h.Node.Name]; ok {
				if g.Key.Compare(c.res.Reserved[i].Gang) < 0 {
					c.res.Reserved[i].Gang = g.Key
				}
				continue
			}
			at[h.Node.Name] = len(c.res.Reserved)
			c.res.Reserved = append(c.res.Reserved, Reservation{Node: h.Node.Name, Gang: g.Key})
		}
	}
	slices.SortFunc(c.res.Reserved, func(a, b Reservation) int { return strings.Compare(a.Node, b.Node) })
}
