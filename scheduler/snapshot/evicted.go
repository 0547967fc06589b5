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
	// cancelled are pods whose eviction did not happen (forgetEviction), forgotten with their
	// plans in one pass over the memory at its next use (settle): the runtime cancels a large
	// reclaim's refused evictions one pod at a time, and a pass per pod was quadratic (58% of
	// the process's CPU undoing 2,000 evictions in Reclaim500Nodes8000Jobs).
	cancelled map[types.NamespacedName]struct{}
}

// NoteEvictedFor records that the engine evicted the pod for the beneficiary gang at the time.
func (s *Snapshot) NoteEvictedFor(beneficiary GangKey, pod types.NamespacedName, at time.Time) {
	e := &s.evicted
	e.settle()
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
func (s *Snapshot) EvictedForAny(beneficiary GangKey) bool {
	s.evicted.settle()
	return s.evicted.gangs[beneficiary] > 0
}

// EvictedFor reports whether the engine remembers evicting the pod for the gang.
func (s *Snapshot) EvictedFor(beneficiary GangKey, pod types.NamespacedName) bool {
	s.evicted.settle()
	_, ok := s.evicted.at[evictedKey{beneficiary, pod}]
	return ok
}

// ForgetEvictedBy drops what NoteEvictedFor recorded at or before the time.
func (s *Snapshot) ForgetEvictedBy(by time.Time) {
	s.evicted.settle()
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
// rest of a gang whose minimum the refused pod kept, say). The records go at the memory's next
// use (settle), with those of every other pod cancelled before it.
func (s *Snapshot) forgetEviction(pod types.NamespacedName) {
	e := &s.evicted
	if len(e.at) == 0 {
		return
	}
	if e.cancelled == nil {
		e.cancelled = map[types.NamespacedName]struct{}{}
	}
	e.cancelled[pod] = struct{}{}
}

// settle forgets the cancelled pods' records and their plans' (forgetEviction) in two passes
// over the memory, however many pods were cancelled.
func (e *evictions) settle() {
	if len(e.cancelled) == 0 {
		return
	}
	type plan struct {
		gang GangKey
		at   int64
	}
	broken := make(map[plan]struct{}, len(e.cancelled))
	for k, at := range e.at {
		if _, ok := e.cancelled[k.pod]; ok {
			broken[plan{k.gang, at}] = struct{}{}
		}
	}
	for k, at := range e.at {
		if _, ok := broken[plan{k.gang, at}]; ok {
			e.drop(k)
		}
	}
	clear(e.cancelled)
}
