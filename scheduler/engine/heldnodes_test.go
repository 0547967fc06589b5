package engine_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A gang that waits for GPUs names the other schedulers whose pods wait for GPUs too; a gang
// that waits for something else, or for no GPU, does not.
func TestReasonNamesForeignPending(t *testing.T) {
	snap := snapshot.New()
	_ = snap.UpsertNode(testutil.MakeNode("n1").GPUs(1, "H100").Obj())
	_ = snap.UpsertQueue(testutil.MakeQueue("team-a").Obj())
	_ = snap.UpsertPod(testutil.MakePod("team-a", "big").Queue("team-a").GPU(2).Obj())
	snap.UpsertForeignPending(types.NamespacedName{Namespace: "plain", Name: "p1"}, "default-scheduler", 1)
	snap.UpsertForeignPending(types.NamespacedName{Namespace: "plain", Name: "p2"}, "volcano", 1)
	res := engine.New(engine.Options{}).Schedule(snap, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	if len(res.Unschedulable) != 1 {
		t.Fatalf("want one waiting gang, got %+v", res.Unschedulable)
	}
	r := res.Unschedulable[0]
	if r.Code != engine.ReasonNoNodeFits || !strings.Contains(r.Message, "pods of other schedulers (default-scheduler, volcano) also wait for GPUs") {
		t.Errorf("reason %s: %q; want NoNodeFits naming default-scheduler and volcano", r.Code, r.Message)
	}

	snap.DeleteForeignPending(types.NamespacedName{Namespace: "plain", Name: "p1"})
	snap.DeleteForeignPending(types.NamespacedName{Namespace: "plain", Name: "p2"})
	res = engine.New(engine.Options{}).Schedule(snap, time.Date(2026, 1, 1, 9, 0, 1, 0, time.UTC))
	if m := res.Unschedulable[0].Message; strings.Contains(m, "other schedulers") {
		t.Errorf("no foreign pod waits any more, yet the reason says %q", m)
	}
}
