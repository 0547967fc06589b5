package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func woken(q *Queue) bool {
	select {
	case <-q.Wake():
		return true
	default:
		return false
	}
}

func TestQueueCoalescesPerObject(t *testing.T) {
	q := NewQueue()
	pod := Key{Kind: KindPod, Namespace: "a", Name: "p"}
	for range 3 {
		q.Add(pod, false)
	}
	q.Add(Key{Kind: KindNode, Name: "n1"}, false)
	if woken(q) {
		t.Error("irrelevant changes must not wake the loop")
	}
	keys, outs := q.Drain(nil, nil)
	want := []Key{{Kind: KindNode, Name: "n1"}, pod}
	if diff := cmp.Diff(want, keys); diff != "" || len(outs) != 0 {
		t.Errorf("drain (-want +got):\n%s outcomes %v", diff, outs)
	}
	if keys, _ := q.Drain(keys, nil); len(keys) != 0 || q.Len() != 0 {
		t.Errorf("second drain: %v", keys)
	}
}

func TestQueueWakesOnRelevantChangesAndOutcomes(t *testing.T) {
	q := NewQueue()
	q.Add(Key{Kind: KindPod, Name: "p"}, true)
	q.Add(Key{Kind: KindPod, Name: "q"}, true)
	if !woken(q) || woken(q) {
		t.Error("relevant changes wake the loop once (coalesced)")
	}
	first := Outcome{Kind: BindFailed, Pod: types.NamespacedName{Namespace: "a", Name: "x"}, UID: "1"}
	second := Outcome{Kind: EvictionFailed, Pod: types.NamespacedName{Namespace: "a", Name: "y"}, UID: "2"}
	q.Report(first)
	q.Report(second)
	if !woken(q) {
		t.Error("an outcome wakes the loop")
	}
	_, outs := q.Drain(nil, nil)
	if diff := cmp.Diff([]Outcome{first, second}, outs); diff != "" {
		t.Errorf("outcomes keep their order (-want +got):\n%s", diff)
	}
}

func TestKeysSortNodesBeforePods(t *testing.T) {
	q := NewQueue()
	for _, k := range []Key{{Kind: KindPod, Namespace: "b", Name: "p"}, {Kind: KindPodGroup, Namespace: "a", Name: "g"},
		{Kind: KindQueue, Name: "q"}, {Kind: KindPod, Namespace: "a", Name: "p"}, {Kind: KindNode, Name: "n"}} {
		q.Add(k, false)
	}
	keys, _ := q.Drain(nil, nil)
	want := []Key{{Kind: KindNode, Name: "n"}, {Kind: KindQueue, Name: "q"}, {Kind: KindPodGroup, Namespace: "a", Name: "g"},
		{Kind: KindPod, Namespace: "a", Name: "p"}, {Kind: KindPod, Namespace: "b", Name: "p"}}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
