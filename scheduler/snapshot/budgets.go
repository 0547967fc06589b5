package snapshot

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Budget is a PodDisruptionBudget as the engine sees it: how many more of its pods may be
// evicted now, and whether the API server refused an eviction for it recently. The runtime
// reads PodDisruptionBudgets and tells the snapshot which pods each one covers
// (SetPodBudgets); the engine only reads these facts, so that its victim choice can prefer pods
// whose eviction violates no budget, as kube-scheduler's default preemption does.
type Budget struct {
	Key types.NamespacedName
	// Allowed is the budget's status.disruptionsAllowed as last observed.
	Allowed int32
	// evicting counts its pods the engine evicted that the budget does not count yet: the
	// eviction is in flight, or the API server's update of the budget has not been observed
	// (until it lists them in status.disruptedPods, when the runtime drops them from the pod's
	// budgets). Kept by chargeBudgets.
	evicting int32
	// blockedUntil is when the API server may be asked again to evict a pod of the budget
	// after it refused one (429: the eviction would violate the budget); Unix nanoseconds, 0
	// when it did not refuse.
	blockedUntil int64
	// gone is set when the budget was deleted: tasks may still point at it until the runtime
	// sets their budgets again, and then it counts for nothing.
	gone bool
}

// Left is how many more of its pods may be evicted now: the allowed disruptions less the
// engine's evictions the budget does not count yet. At most 0 means none.
func (b *Budget) Left() int32 { return b.Allowed - b.evicting }

// chargeBudgets counts (delta 1) or uncounts (-1) a pod the engine evicts against its budgets,
// while it is releasing.
func chargeBudgets(t *Task, delta int32) {
	if !t.Evicted || t.State != TaskReleasing {
		return
	}
	for _, b := range t.Budgets {
		b.evicting += delta
	}
}

// Gone reports whether the budget was deleted (a task's stale reference).
func (b *Budget) Gone() bool { return b.gone }

// BlockedAt reports whether, at now, the API server's latest refusal to evict a pod of the
// budget still stands (the runtime backs off before it tries again).
func (b *Budget) BlockedAt(now time.Time) bool {
	return !b.gone && b.blockedUntil != 0 && now.UnixNano() < b.blockedUntil
}

// BlockedUntil is when the latest refusal stops standing (zero when there is none).
func (b *Budget) BlockedUntil() time.Time {
	if b.blockedUntil == 0 {
		return time.Time{}
	}
	return time.Unix(0, b.blockedUntil).UTC()
}

// UpsertBudget records a PodDisruptionBudget's allowed disruptions; a refusal recorded with
// BlockBudget stands until its time.
func (s *Snapshot) UpsertBudget(key types.NamespacedName, allowed int32) *Budget {
	if s.budgets == nil {
		s.budgets = make(map[types.NamespacedName]*Budget)
	}
	b := s.budgets[key]
	if b == nil {
		b = &Budget{Key: key}
		s.budgets[key] = b
	}
	b.Allowed = allowed
	return b
}

// DeleteBudget forgets a PodDisruptionBudget. Tasks that still name it count it for nothing
// until the runtime sets their budgets again.
func (s *Snapshot) DeleteBudget(key types.NamespacedName) {
	if b := s.budgets[key]; b != nil {
		b.gone = true
		delete(s.budgets, key)
	}
}

// Budget returns a PodDisruptionBudget by key, or nil.
func (s *Snapshot) Budget(key types.NamespacedName) *Budget { return s.budgets[key] }

// SetPodBudgets records the PodDisruptionBudgets whose allowance evicting the pod would use:
// those whose selector matches it, less those that list it among their disrupted pods already
// (the API server counted it). Keys of unknown budgets are an error: upsert them first.
func (s *Snapshot) SetPodBudgets(pod types.NamespacedName, keys []types.NamespacedName) error {
	t := s.tasks[pod]
	if t == nil {
		return fmt.Errorf("set budgets of %s: %w", pod, ErrNotFound)
	}
	var out []*Budget
	for _, k := range keys {
		b := s.budgets[k]
		if b == nil {
			return fmt.Errorf("set budgets of %s: PodDisruptionBudget %s: %w", pod, k, ErrNotFound)
		}
		out = append(out, b)
	}
	chargeBudgets(t, -1)
	t.Budgets = out
	chargeBudgets(t, 1)
	return nil
}

// BlockBudget records that the API server refused to evict a pod because of the budget: until
// the given time the engine takes no more of its pods as victims, and the gangs that would need
// them say that they wait for it.
func (s *Snapshot) BlockBudget(key types.NamespacedName, until time.Time) error {
	b := s.budgets[key]
	if b == nil {
		return fmt.Errorf("block PodDisruptionBudget %s: %w", key, ErrNotFound)
	}
	b.blockedUntil = until.UnixNano()
	return nil
}
