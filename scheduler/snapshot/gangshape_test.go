package snapshot_test

import (
	"fmt"
	"testing"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// TestGrownGangIsNotStale follows a running gang whose PodGroup grows from 2 to 4 (its owner was
// scaled up): it is not stale while its new members wait, nor after a what-if assumed them and
// rolled back; once they are confirmed on nodes the new minimum is the one it must keep, and
// losing a member makes it stale. A PodGroup that shrinks applies at once.
func TestGrownGangIsNotStale(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(8, "A100").Obj()); err != nil {
		t.Fatal(err)
	}
	pod := func(i int, bound bool) *testutil.PodWrapper {
		p := testutil.MakePod("a", fmt.Sprintf("w-%d", i)).Queue("a").PodGroup("g").GPU(1)
		if bound {
			p.Node("n1").GPUIndex(i)
		}
		return p
	}
	upsert := func(p *testutil.PodWrapper) {
		t.Helper()
		if err := s.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	resize := func(min int32) {
		t.Helper()
		if err := s.UpsertPodGroup(testutil.MakePodGroup("a", "g").MinMember(min).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	resize(2)
	upsert(pod(0, true))
	upsert(pod(1, true))
	g := s.Gang(snapshot.GangKey{Namespace: "a", Name: "g", PodGroup: true})
	if g.Stale() {
		t.Fatal("a gang at its minimum is stale")
	}
	resize(4)
	upsert(pod(2, false))
	upsert(pod(3, false))
	mustVerify(t, s)
	if g.Stale() || len(s.StaleGangs()) != 0 {
		t.Fatal("a gang whose minimum rose under it is stale")
	}
	n := s.Node("n1")
	for i, k := range []string{"w-2", "w-3"} {
		s.Assume(s.Task(key("a", k)), n, snapshot.Assignment{Whole: []int32{int32(2 + i)}, Shared: -1}, testutil.Epoch)
	}
	for _, k := range []string{"w-2", "w-3"} {
		s.Unassume(s.Task(key("a", k)))
	}
	mustVerify(t, s)
	if g.Stale() {
		t.Fatal("a what-if that assumed the new members and rolled back left the gang stale")
	}
	for i, k := range []string{"w-2", "w-3"} {
		s.Assume(s.Task(key("a", k)), n, snapshot.Assignment{Whole: []int32{int32(2 + i)}, Shared: -1}, testutil.Epoch)
	}
	upsert(pod(2, true))
	upsert(pod(3, true))
	mustVerify(t, s)
	s.DeletePod(key("a", "w-3"))
	mustVerify(t, s)
	if !g.Stale() {
		t.Fatal("a gang that reached its new minimum and lost a member is not stale")
	}
	resize(3)
	mustVerify(t, s)
	if g.Stale() {
		t.Fatal("a gang whose minimum dropped to what it runs is stale")
	}
}
