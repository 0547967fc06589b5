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

// evictedKey is one remembered eviction: a pod, and the gang it was evicted for.
type evictedKey struct {
	gang GangKey
	pod  types.NamespacedName
}

// evictions are the remembered evictions, in two flat maps (an eviction adds no map of its own).
// The time is Unix nanoseconds, not a time.Time: a large reclaim remembers thousands of
// evictions a cycle, and the smaller entry makes the map a sixth smaller.
type evictions struct {
	at    map[evictedKey]int64
	gangs map[GangKey]int32
}

// NoteEvictedFor records that the engine evicted the pod for the beneficiary gang at the time.
func (s *Snapshot) NoteEvictedFor(beneficiary GangKey, pod types.NamespacedName, at time.Time) {
	e := &s.evicted
	if e.at == nil {
		e.at, e.gangs = map[evictedKey]int64{}, map[GangKey]int32{}
	}
	k := evictedKey{beneficiary, pod}
	if _, ok := e.at[k]; !ok {
		e.gangs[beneficiary]++
	}
	e.at[k] = at.UnixNano()
}

// EvictedForAny reports whether the engine remembers evicting any pod for the gang.
func (s *Snapshot) EvictedForAny(beneficiary GangKey) bool { return s.evicted.gangs[beneficiary] > 0 }

// EvictedFor reports whether the engine remembers evicting the pod for the gang.
func (s *Snapshot) EvictedFor(beneficiary GangKey, pod types.NamespacedName) bool {
	_, ok := s.evicted.at[evictedKey{beneficiary, pod}]
	return ok
}

// ForgetEvictedBy drops what NoteEvictedFor recorded at or before the time.
func (s *Snapshot) ForgetEvictedBy(by time.Time) {
	cut := by.UnixNano()
	for k, at := range s.evicted.at {
		if at <= cut {
			s.evicted.drop(k)
		}
	}
}

func (e *evictions) drop(k evictedKey) {
	delete(e.at, k)
	if e.gangs[k.gang]--; e.gangs[k.gang] <= 0 {
		delete(e.gangs, k.gang)
	}
}

// forgetEviction drops what is recorded of the pod, whose eviction did not happen (the runtime
// does not say for which gang it was, so every record of the pod goes), with the evictions made
// at the same time for the same gang: its plan broke, and redoing it may take them again (the
// rest of a gang whose minimum the refused pod kept, say).
func (s *Snapshot) forgetEviction(pod types.NamespacedName) {
	type plan struct {
		gang GangKey
		at   int64
	}
	var broken []plan
	for k, at := range s.evicted.at {
		if k.pod == pod {
			broken = append(broken, plan{k.gang, at})
		}
	}
	for _, b := range broken {
		for k, at := range s.evicted.at {
			if k.gang == b.gang && at == b.at {
				s.evicted.drop(k)
			}
		}
	}
}
