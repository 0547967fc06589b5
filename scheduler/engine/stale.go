package engine

import (
	"fmt"
	"slices"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// evictStaleGangs evicts, whole, every gang that has run with fewer than its minimum of live pods
// (bound or succeeded) for longer than Options.StaleGangGracePeriod: a distributed job that lost a
// worker usually cannot make progress, and what it holds is better given back. The clock starts
// the first cycle that sees the gang short; it stops if the gang recovers.
func (c *cycle) evictStaleGangs() {
	stale := slices.Clone(c.snap.StaleGangs())
	slices.SortFunc(stale, func(a, b *snapshot.Gang) int { return a.Key.Compare(b.Key) })
	grace := c.e.opts.StaleGangGracePeriod
	for _, g := range stale {
		if g.StaleSince.IsZero() {
			g.StaleSince = c.now
		}
		if c.now.Sub(g.StaleSince) < grace {
			continue
		}
		msg := fmt.Sprintf("gang %s has run with %d of its minimum %s since %s, longer than the %s grace period",
			g.Key, g.Bound+g.Succeeded, count(int(g.MinMember), "pod", "pods"), g.StaleSince.UTC().Format("15:04:05"), grace)
		for _, t := range slices.Clone(g.Tasks) {
			// A pod whose PodDisruptionBudget refused its eviction lately waits for the
			// runtime's backoff rather than being asked again every cycle.
			if t.State == snapshot.TaskBound && (len(t.Budgets) == 0 || blockedBudget(t, c.now) == nil) {
				c.stmt.Evict(t, EvictStaleGang, msg, nil)
			}
		}
		c.commit()
	}
}
