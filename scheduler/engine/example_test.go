package engine_test

import (
	"fmt"
	"time"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// The runtime owns one snapshot, feeds it informer objects, runs a cycle and applies the result.
func Example() {
	snap := snapshot.New()
	// Informer events, applied between cycles from one goroutine.
	_ = snap.UpsertNode(testutil.MakeNode("n1").GPUs(8, "H100").Inventory(81920).Obj())
	_ = snap.UpsertQueue(testutil.MakeQueue("team-a").GPU("4", 1, "").Obj())
	_ = snap.UpsertPod(testutil.MakePod("team-a", "train").Queue("team-a").GPU(2).Obj())
	_ = snap.UpsertPod(testutil.MakePod("team-a", "notebook").Queue("team-a").Fraction("0.5").Priority(100).Obj())

	eng := engine.New(engine.Options{})
	res := eng.Schedule(snap, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	for _, b := range res.Bindings {
		if b.Shared != nil {
			fmt.Printf("bind %s to %s, %d milli-GPU of GPU %s\n", b.Pod, b.Node, b.Shared.MilliGPU, b.Shared.UUID)
			continue
		}
		fmt.Printf("bind %s to %s, GPUs %v\n", b.Pod, b.Node, b.GPUs)
	}
	// A binding the API server refused is forgotten, and the pod is pending again.
	_ = snap.Forget(res.Bindings[0].Pod)
	fmt.Println("team-a fair share:", snapshot.FormatAmount(snapshot.DimGPU, res.Queues[0].FairShare["gpu"]), "GPU")
	// Output:
	// bind team-a/notebook to n1, 500 milli-GPU of GPU GPU-n1-0
	// bind team-a/train to n1, GPUs [{1 GPU-n1-1} {2 GPU-n1-2}]
	// team-a fair share: 2.5 GPU
}
