package engine

// PodDisruptionBudgets, as kube-scheduler's default preemption reads them
// (filterPodsWithPDBViolation, SelectVictimsOnNode, pickOneNodeForPreemption): a victim
// violates a budget when the budget allows no more disruptions, counting the victims taken
// before it on the node and, unlike kube-scheduler, which deletes its victims at once, the
// engine's evictions the budget does not count yet (Budget.Left: decided this cycle, or in
// flight); victims that violate none are taken first, and the node with the fewest violations
// wins. Evictions go through the Eviction API, so a violating one is
// refused (429); the runtime then cancels it and blocks the budget for a while (refuseBudget).

import (
	"slices"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// whyCode is the reason code of a gang the latest makeRoom could not place: it waits for a
// PodDisruptionBudget when pods that budget protects were refused (their eviction, or their
// move), otherwise no node fits.
func whyCode(p *victimPolicy) ReasonCode {
	if refusedFor(p, refuseBudget, refuseMoveBudget) {
		return ReasonWaitingForBudget
	}
	return ReasonNoNodeFits
}

// budgetRefused reports whether the latest makeRoom left pods alone because the API server
// refused to evict a pod of their budget lately. Unlike whyCode it leaves out refused moves:
// a budget that only held up a move starts no budget wait (no timeout overrides it).
func budgetRefused(p *victimPolicy) bool { return refusedFor(p, refuseBudget) }

// movesHeldByBudget reports whether the latest makeRoom refused a move for a
// PodDisruptionBudget.
func movesHeldByBudget(p *victimPolicy) bool { return refusedFor(p, refuseMoveBudget) }

// refusedFor reports whether the latest makeRoom of p refused pods for one of kinds.
func refusedFor(p *victimPolicy, kinds ...refusalKind) bool {
	if p == nil {
		return false
	}
	for r := range p.refused {
		if slices.Contains(kinds, r.kind) {
			return true
		}
	}
	return false
}

// movesWhy tells the refused moves of the latest makeRoom that a PodDisruptionBudget held:
// "moving pods instead: 1 pod may only move (...), and its PodDisruptionBudget ns/b allows
// no disruption now: ..."; "" when there are none.
func (c *cycle) movesWhy(p *victimPolicy) string {
	var parts []string
	for r, n := range p.refused {
		if r.kind == refuseMoveBudget {
			parts = append(parts, c.describeRefusal(p, r, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return "moving pods instead: " + strings.Join(parts, "; ")
}

// waitForBudget makes the reason of a gang that found no capacity say that it waits for a
// PodDisruptionBudget, when the what-if that failed had to leave pods of a blocked budget alone;
// also when its fair share refused it a reclaim (OverFairShare): a later what-if, consolidation,
// that the budget held is the nearer thing it waits for.
func (c *cycle) waitForBudget(g *snapshot.Gang, p *victimPolicy) {
	if r, ok := c.reasons[g]; ok && (r.Code == ReasonNoNodeFits || r.Code == ReasonOverFairShare) && whyCode(p) == ReasonWaitingForBudget {
		r.Code = ReasonWaitingForBudget
		c.reasons[g] = r
	}
}

// blockedBudget returns a budget of the pod the API server refused an eviction for lately, or
// nil.
func blockedBudget(t *snapshot.Task, now time.Time) *snapshot.Budget {
	for _, b := range t.Budgets {
		if b.BlockedAt(now) {
			return b
		}
	}
	return nil
}

// violatesBudget reports whether evicting the pod exceeds one of its budgets' allowed
// disruptions, given what the victims taken before it on the node use of them (used; nil for
// none). The snapshot already counts the evictions decided earlier (in this cycle, or in flight
// and not yet counted by the API server: Budget.Left).
func violatesBudget(t *snapshot.Task, used []budgetUse) bool {
	for _, b := range t.Budgets {
		if !b.Gone() && b.Left()-useOf(used, b) <= 0 {
			return true
		}
	}
	return false
}

// budgetUse counts the victims of one node evaluation under a budget.
type budgetUse struct {
	b *snapshot.Budget
	n int32
}

func useOf(used []budgetUse, b *snapshot.Budget) int32 {
	for _, u := range used {
		if u.b == b {
			return u.n
		}
	}
	return 0
}

// chargeBudgets counts one more eviction against each of t's budgets.
func chargeBudgets(used []budgetUse, t *snapshot.Task) []budgetUse {
	for _, b := range t.Budgets {
		i := slices.IndexFunc(used, func(u budgetUse) bool { return u.b == b })
		if i < 0 {
			used = append(used, budgetUse{b: b})
			i = len(used) - 1
		}
		used[i].n++
	}
	return used
}

// takeBudgets charges a unit to its budgets and returns how many of its pods violate one.
func takeBudgets(used []budgetUse, unit []*snapshot.Task) ([]budgetUse, int) {
	violations := 0
	for _, t := range unit {
		if len(t.Budgets) == 0 {
			continue
		}
		if violatesBudget(t, used) {
			violations++
		}
		used = chargeBudgets(used, t)
	}
	return used, violations
}

// violatedBudget returns the budget the pod's eviction breaks now, with the evictions decided
// before it counted: one the API server refused lately (blocked), else one that allows no more
// disruptions; nil when none.
func violatedBudget(t *snapshot.Task, now time.Time) *snapshot.Budget {
	if b := blockedBudget(t, now); b != nil {
		return b
	}
	for _, b := range t.Budgets {
		if !b.Gone() && b.Left() <= 0 {
			return b
		}
	}
	return nil
}

// moveBudget returns the budget that keeps the unit from moving, after the victims of one node
// evaluation (used): one of its pods' budgets the API server refused an eviction for lately, or
// one that the unit's eviction violates; nil when none.
func moveBudget(unit []*snapshot.Task, used []budgetUse, now time.Time) *snapshot.Budget {
	any := false
	for _, t := range unit {
		if b := blockedBudget(t, now); b != nil {
			return b
		}
		any = any || len(t.Budgets) > 0
	}
	if !any {
		return nil
	}
	used = slices.Clone(used)
	for _, t := range unit {
		for _, b := range t.Budgets {
			if !b.Gone() && b.Left()-useOf(used, b) <= 0 {
				return b
			}
		}
		used = chargeBudgets(used, t)
	}
	return nil
}
