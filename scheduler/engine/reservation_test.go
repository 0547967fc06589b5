package engine_test

import (
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A GPU held only by a reservation pod (its fractional pods are gone, the runtime has not
// deleted it yet) is joined by the next fractional pod and never given to a whole-GPU pod.
func TestReservationOnlyGPU(t *testing.T) {
	snap := snapshot.New()
	mustNoErr(t, snap.UpsertNode(testutil.MakeNode("n1").GPUs(2, "H100").Inventory(81920).Obj()))
	mustNoErr(t, snap.UpsertQueue(testutil.MakeQueue("a").Obj()))
	mustNoErr(t, snap.UpsertPod(testutil.MakePod("fairway-system", "resv").Reservation("n1", 1, 0).Obj()))
	mustNoErr(t, snap.UpsertPod(testutil.MakePod("a", "whole").Queue("a").GPU(1).Obj()))
	mustNoErr(t, snap.UpsertPod(testutil.MakePod("a", "whole2").Queue("a").GPU(1).Created(testutil.Epoch.Add(1)).Obj()))
	mustNoErr(t, snap.UpsertPod(testutil.MakePod("a", "frac").Queue("a").Fraction("0.5").Obj()))

	res := engine.New(engine.Options{}).Schedule(snap, benchNow)
	if err := snap.Verify(); err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.Binding{}
	for _, b := range res.Bindings {
		got[b.Pod.Name] = b
	}
	if b, ok := got["frac"]; !ok || b.Shared == nil || b.Shared.Index != 1 {
		t.Errorf("the fraction must join the reserved GPU 1: %+v", b)
	}
	wholes := 0
	for _, name := range []string{"whole", "whole2"} {
		if b, ok := got[name]; ok {
			wholes++
			if len(b.GPUs) != 1 || b.GPUs[0].Index != 0 {
				t.Errorf("%s must take GPU 0, got %+v", name, b.GPUs)
			}
		}
	}
	if wholes != 1 {
		t.Errorf("exactly one whole-GPU pod fits beside the reservation, got %d: %+v", wholes, res.Bindings)
	}
}

// With SharesNeedInventory, fractional pods go only to nodes whose gpu-agent publishes an
// inventory, and wait with that reason when none does; whole-GPU pods go anywhere.
func TestSharesNeedInventory(t *testing.T) {
	for name, tc := range map[string]struct {
		agentNode bool
		want      string
	}{
		"agent on one node": {true, "with-agent"},
		"no agent anywhere": {false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			snap := snapshot.New()
			mustNoErr(t, snap.UpsertNode(testutil.MakeNode("bare").GPUs(8, "H100").Obj()))
			if tc.agentNode {
				mustNoErr(t, snap.UpsertNode(testutil.MakeNode("with-agent").GPUs(8, "H100").Inventory(81920).Obj()))
			}
			mustNoErr(t, snap.UpsertQueue(testutil.MakeQueue("a").Obj()))
			mustNoErr(t, snap.UpsertPod(testutil.MakePod("a", "frac").Queue("a").Fraction("0.5").Obj()))
			mustNoErr(t, snap.UpsertPod(testutil.MakePod("a", "whole").Queue("a").GPU(1).Obj()))
			res := engine.New(engine.Options{SharesNeedInventory: true}).Schedule(snap, benchNow)
			got := map[string]string{}
			for _, b := range res.Bindings {
				got[b.Pod.Name] = b.Node
			}
			if got["frac"] != tc.want || got["whole"] == "" {
				t.Errorf("bindings %v, want frac on %q and whole bound", got, tc.want)
			}
			if tc.want == "" {
				if len(res.Unschedulable) != 1 || !strings.Contains(res.Unschedulable[0].Message, "no fairway gpu-agent") {
					t.Errorf("reason %+v", res.Unschedulable)
				}
			}
		})
	}
}
