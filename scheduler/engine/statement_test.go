package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func buildSnapshot(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot.Snapshot {
	t.Helper()
	s := snapshot.New()
	for _, n := range nodes {
		if err := s.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestStatementRollbackLeavesNoTrace(t *testing.T) {
	snap := buildSnapshot(t,
		[]*corev1.Node{testutil.MakeNode("n1").GPUs(4, "H100").Obj(), testutil.MakeNode("n2").GPUs(4, "H100").Obj()},
		[]*corev1.Pod{
			testutil.MakePod("a", "run").Queue("a").GPU(2).Node("n1").GPUIndex(0, 1).Obj(),
			testutil.MakePod("a", "frac").Queue("a").Fraction("0.5").Node("n2").GPUIndex(0).Obj(),
			testutil.MakePod("b", "wait").Queue("b").GPU(2).Obj(),
			testutil.MakePod("b", "wait-frac").Queue("b").Fraction("0.25").Obj(),
		})
	held := snap.Gang(snapshot.GangKey{Namespace: "a", Name: "frac"})
	snap.AddHold(held, snapshot.Hold{Node: snap.Node("n2"), WholeGPUs: 1, MilliGPU: 1000, Pods: 1})
	before := snap.Summary()

	now := testutil.Epoch.Add(time.Hour)
	st := NewStatement(snap, now)
	cp := st.Checkpoint()
	st.Allocate(snap.Task(key("b", "wait")), snap.Node("n1"), snapshot.Assignment{Whole: []int32{2, 3}, Shared: -1})
	st.Allocate(snap.Task(key("b", "wait-frac")), snap.Node("n2"), snapshot.Assignment{Shared: 0, Milli: 250, MemMiB: 20480})
	st.Evict(snap.Task(key("a", "run")), EvictReclaim, "test", nil)
	st.Hold(snap.Gang(snapshot.GangKey{Namespace: "b", Name: "wait"}), snapshot.Hold{Node: snap.Node("n2"), WholeGPUs: 2, MilliGPU: 2000})
	st.ClearHolds(held)
	if err := snap.Verify(); err != nil {
		t.Fatalf("inconsistent inside the statement: %v", err)
	}
	st.Rollback(cp)
	if err := snap.Verify(); err != nil {
		t.Fatalf("inconsistent after rollback: %v", err)
	}
	if diff := cmp.Diff(before, snap.Summary()); diff != "" {
		t.Errorf("Snapshot was modified (-initial +end):\n%s", diff)
	}
}

func TestStatementNestedCheckpointsAndCommit(t *testing.T) {
	snap := buildSnapshot(t,
		[]*corev1.Node{testutil.MakeNode("n1").GPUs(2, "").Obj()},
		[]*corev1.Pod{
			testutil.MakePod("a", "run").Queue("a").GPU(1).Node("n1").GPUIndex(0).Obj(),
			testutil.MakePod("b", "wait").Queue("b").GPU(1).Obj(),
		})
	st := NewStatement(snap, testutil.Epoch)
	st.Allocate(snap.Task(key("b", "wait")), snap.Node("n1"), snapshot.Assignment{Whole: []int32{1}, Shared: -1})
	afterAlloc := snap.Summary()
	cp := st.Checkpoint()
	st.Evict(snap.Task(key("a", "run")), EvictPreempt, "test", nil)
	st.Rollback(cp)
	if diff := cmp.Diff(afterAlloc, snap.Summary()); diff != "" {
		t.Errorf("rolling back to the inner checkpoint undid more than the eviction (-want +got):\n%s", diff)
	}
	var res Result
	st.Commit(&res, func(*snapshot.Task) time.Duration { return 30 * time.Second })
	want := []Binding{{Pod: key("b", "wait"), Gang: snapshot.GangKey{Namespace: "b", Name: "wait"}, Node: "n1", GPUs: []GPU{{Index: 1}}}}
	if diff := cmp.Diff(want, res.Bindings); diff != "" {
		t.Errorf("committed bindings (-want +got):\n%s", diff)
	}
	if len(res.Evictions) != 0 || st.Checkpoint() != 0 {
		t.Errorf("commit must report only what was not rolled back and empty the log: %+v", res.Evictions)
	}
}

// TestFailedWhatIfsLeaveNoTrace runs a cycle in which reclaim, preemption and consolidation are
// all tried and all fail: the snapshot must come out exactly as it went in.
func TestFailedWhatIfsLeaveNoTrace(t *testing.T) {
	snap := buildSnapshot(t,
		[]*corev1.Node{testutil.MakeNode("n1").GPUs(4, "").Obj(), testutil.MakeNode("n2").GPUs(4, "").Obj()},
		[]*corev1.Pod{
			// The lender's gangs would fall below its fair share if evicted.
			testutil.MakePod("lender", "g1-0").Queue("lender").GPU(2).PodGroup("g1").MinMember(2).Node("n1").GPUIndex(0, 1).Obj(),
			testutil.MakePod("lender", "g1-1").Queue("lender").GPU(2).PodGroup("g1").MinMember(2).Node("n2").GPUIndex(0, 1).Obj(),
			// Pinned pods cannot be moved by consolidation; equal priority cannot be preempted.
			testutil.MakePod("q", "pinned-1").Queue("q").GPU(1).Priority(50).NodeSelector(corev1.LabelHostname, "n1").Node("n1").GPUIndex(2).Obj(),
			testutil.MakePod("q", "pinned-2").Queue("q").GPU(1).Priority(50).NodeSelector(corev1.LabelHostname, "n2").Node("n2").GPUIndex(2).Obj(),
			testutil.MakePod("q", "big").Queue("q").GPU(3).Priority(50).Obj(),
			testutil.MakePod("borrower", "b").Queue("borrower").GPU(2).Obj(),
		})
	before := snap.Summary()
	res := New(Options{}).Schedule(snap, testutil.Epoch)
	if len(res.Bindings)+len(res.Evictions)+len(res.Nominations) != 0 {
		t.Fatalf("expected nothing to be decided, got %+v", res)
	}
	if diff := cmp.Diff(before, snap.Summary()); diff != "" {
		t.Errorf("Snapshot was modified (-initial +end):\n%s", diff)
	}
	if len(res.Unschedulable) != 2 {
		t.Errorf("want a reason for both waiting gangs, got %+v", res.Unschedulable)
	}
}
