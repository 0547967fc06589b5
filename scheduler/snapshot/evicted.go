package snapshot

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The engine remembers, for a while, which pods it evicted for which gang, so that it does not
// evict the same pod (its controller's recreated pod, which keeps its name) for the same gang
// again: a plan redone for a gang (one of its pods bound and lost again, an elastic gang's next
// pod) takes other pods, and no pod is disrupted over and over for one beneficiary. An eviction
// the runtime could not make (CancelEviction) is not remembered, nor are the others of its plan.
// Kept in memory: a restarted scheduler forgets.

// NoteEvictedFor records that the engine evicted the pod for the beneficiary gang at the time.
func (s *Snapshot) NoteEvictedFor(beneficiary GangKey, pod types.NamespacedName, at time.Time) {
	if s.evictedFor == nil {
		s.evictedFor = map[GangKey]map[types.NamespacedName]time.Time{}
	}
	m := s.evictedFor[beneficiary]
	if m == nil {
		m = map[types.NamespacedName]time.Time{}
		s.evictedFor[beneficiary] = m
	}
	m[pod] = at
}

// EvictedFor returns the pods the engine evicted for the gang and still remembers, with when;
// nil when there are none. The map is owned by the snapshot.
func (s *Snapshot) EvictedFor(beneficiary GangKey) map[types.NamespacedName]time.Time {
	return s.evictedFor[beneficiary]
}

// ForgetEvictedBy drops what NoteEvictedFor recorded at or before the time.
func (s *Snapshot) ForgetEvictedBy(by time.Time) {
	for g, m := range s.evictedFor {
		for k, at := range m {
			if !at.After(by) {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(s.evictedFor, g)
		}
	}
}

// forgetEviction drops what is recorded of the pod, whose eviction did not happen (the runtime
// does not say for which gang it was, so every record of the pod goes), with the evictions made
// in the same cycle for the same gang: its plan broke, and redoing it may take them again (the
// rest of a gang whose minimum the refused pod kept, say).
func (s *Snapshot) forgetEviction(pod types.NamespacedName) {
	for g, m := range s.evictedFor {
		at, ok := m[pod]
		if !ok {
			continue
		}
		for k, t := range m {
			if t.Equal(at) {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(s.evictedFor, g)
		}
	}
}
