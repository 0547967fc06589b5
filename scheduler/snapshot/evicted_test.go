package snapshot

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestCancelledEvictionForgetsItsPlan: an eviction that did not happen takes the rest of its
// plan (same gang, same time) out of the memory, and nothing else; a pod evicted again after
// its cancellation is remembered.
func TestCancelledEvictionForgetsItsPlan(t *testing.T) {
	s := New()
	g, h := GangKey{Namespace: "b", Name: "g", PodGroup: true}, GangKey{Namespace: "b", Name: "h", PodGroup: true}
	pod := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "a", Name: n} }
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	for _, p := range []string{"a", "b", "c"} {
		s.NoteEvictedFor(g, pod(p), t1)
	}
	s.NoteEvictedFor(h, pod("d"), t1)
	s.NoteEvictedFor(g, pod("e"), t2)

	s.forgetEviction(pod("a"))
	for _, tc := range []struct {
		gang GangKey
		pod  string
		want bool
	}{{g, "a", false}, {g, "b", false}, {g, "c", false}, {h, "d", true}, {g, "e", true}} {
		if got := s.EvictedFor(tc.gang, pod(tc.pod)); got != tc.want {
			t.Errorf("EvictedFor(%s, %s) = %v, want %v", tc.gang.Name, tc.pod, got, tc.want)
		}
	}
	if !s.EvictedForAny(g) || !s.EvictedForAny(h) {
		t.Errorf("EvictedForAny: g %v h %v, want both (e and d remain)", s.EvictedForAny(g), s.EvictedForAny(h))
	}

	s.forgetEviction(pod("e"))
	s.NoteEvictedFor(g, pod("e"), t2.Add(time.Second))
	if !s.EvictedFor(g, pod("e")) {
		t.Error("a pod evicted again after its cancellation is forgotten")
	}
}

// TestManyCancelledEvictionsSettleOnce: cancelling every eviction of a large reclaim one pod at
// a time, as the runtime does, empties the memory; each cancel is O(1) and the memory is walked
// once at its next use (was a walk per cancelled pod).
func TestManyCancelledEvictionsSettleOnce(t *testing.T) {
	s := New()
	g := GangKey{Namespace: "b", Name: "g", PodGroup: true}
	at := time.Unix(100, 0)
	for i := range 4000 {
		s.NoteEvictedFor(g, types.NamespacedName{Namespace: "a", Name: fmt.Sprint(i)}, at.Add(time.Duration(i%4)*time.Second))
	}
	for i := range 4000 {
		s.forgetEviction(types.NamespacedName{Namespace: "a", Name: fmt.Sprint(i)})
	}
	if len(s.evicted.cancelled) != 4000 || len(s.evicted.at) != 4000 {
		t.Fatalf("before settling: %d cancelled, %d remembered; want 4000 and 4000", len(s.evicted.cancelled), len(s.evicted.at))
	}
	if s.EvictedForAny(g) {
		t.Error("every eviction was cancelled, but the gang is still remembered")
	}
	if len(s.evicted.at) != 0 || len(s.evicted.gangs) != 0 || len(s.evicted.cancelled) != 0 {
		t.Errorf("after settling: %d remembered, %d gangs, %d cancelled; want none", len(s.evicted.at), len(s.evicted.gangs), len(s.evicted.cancelled))
	}
}
