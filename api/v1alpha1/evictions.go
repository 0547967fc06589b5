package v1alpha1

import "slices"

// EvictionReason is why fairway evicts a pod. It crosses boundaries as the reason of the event
// the scheduler records on the evicted pod, which `fairway why` reads back to tell a pod's last
// eviction, and, after "Fairway", as the reason of the pod's DisruptionTarget condition
// (DisruptionReason). So the set is owned here (the engine aliases it): a reader tells fairway's
// evictions apart by these values, never by reading the event's note, which is for people.
type EvictionReason string

// Eviction reasons. Adding one: declare it here and list it in evictionReasons.
const (
	// EvictReclaim: borrowed capacity goes back to a queue below its fair share or guarantee.
	EvictReclaim EvictionReason = "Reclaim"
	// EvictPreempt: higher-priority work of the same queue needs the capacity.
	EvictPreempt EvictionReason = "Preempt"
	// EvictConsolidate: the pod moves to make room for a gang; there is room for it elsewhere.
	EvictConsolidate EvictionReason = "Consolidate"
	// EvictStaleGang: the pod's gang ran below its minimum for too long.
	EvictStaleGang EvictionReason = "StaleGang"
	// EvictLoanReturn: the pod ran on loan on an idle interactive pod's GPU, and the GPU goes back.
	EvictLoanReturn EvictionReason = "LoanReturn"
	// EvictNodeDeleted: the pod's node is gone; the pod is deleted.
	EvictNodeDeleted EvictionReason = "NodeDeleted"
	// EvictLoanReturnedPastBudget: a returned loan that a PodDisruptionBudget refused to evict
	// was deleted (event reason only).
	EvictLoanReturnedPastBudget EvictionReason = "LoanReturnedPastBudget"
	// EvictGuaranteePastBudget: an over-quota pod whose budget held up a guaranteed reclaim past
	// the claimant queue's budget timeout was deleted (event reason only).
	EvictGuaranteePastBudget EvictionReason = "GuaranteeReclaimedPastBudget"
)

// evictionReasons lists every EvictionReason, one a line.
var evictionReasons = []EvictionReason{
	EvictReclaim,
	EvictPreempt,
	EvictConsolidate,
	EvictStaleGang,
	EvictLoanReturn,
	EvictNodeDeleted,
	EvictLoanReturnedPastBudget,
	EvictGuaranteePastBudget,
}

// EvictionReasons returns every reason fairway may evict a pod for.
func EvictionReasons() []EvictionReason { return slices.Clone(evictionReasons) }

// Known reports whether r is one of EvictionReasons.
func (r EvictionReason) Known() bool { return slices.Contains(evictionReasons, r) }

// DisruptionReason is the reason of the DisruptionTarget condition fairway sets on a pod it
// evicts for r ("FairwayReclaim").
func DisruptionReason(r EvictionReason) string { return "Fairway" + string(r) }
