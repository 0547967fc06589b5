package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/testutil"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

// TestFairShareOverTimeSettles is the time-based variant of the randomized invariants: fair
// share over time (usage history, 1h half-life) under constant demand must reach a stable
// outcome, not ping-pong. Random clusters of 8-GPU nodes, flat queues or two departments, random
// weights and guarantees that fit; every leaf keeps more 1-GPU pods waiting than the cluster has
// GPUs, none ever finishes. One queue takes the idle cluster first and the others arrive half an
// hour later, so that history has work to do (reclaim from the queue that had the cluster).
// After 12 simulated hours the last two hours must see no eviction and no binding; the checks of
// sim.cycle hold throughout, and the guarantees hold at the end.
func TestFairShareOverTimeSettles(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 16)), s: newSim(engine.Options{StarvationThreshold: -1}, testutil.Epoch)}
			g.s.hist = usage.New(time.Hour)
			nodes := 2 + g.pick(5)
			for i := range nodes {
				mustNoErr(t, g.s.addNode(testutil.MakeNode(fmt.Sprintf("n%02d", i)).GPUs(8, "H100").Obj()))
			}
			capacity := 8 * nodes
			var leaves []string
			left := capacity / 2
			quota := func() string {
				q := g.pick(left/3 + 1)
				left -= q
				return fmt.Sprint(q)
			}
			if seed%2 == 0 {
				for i := range 2 + g.pick(3) {
					name := fmt.Sprintf("q%d", i)
					mustNoErr(t, g.s.addQueue(testutil.MakeQueue(name).GPU(quota(), int32(1+g.pick(3)), "").Obj()))
					leaves = append(leaves, name)
				}
			} else {
				for d := range 2 {
					dept := fmt.Sprintf("dept%d", d)
					mustNoErr(t, g.s.addQueue(testutil.MakeQueue(dept).GPU("0", int32(1+g.pick(2)), "").Obj()))
					for p := range 1 + g.pick(3) {
						name := fmt.Sprintf("%s-p%d", dept, p)
						mustNoErr(t, g.s.addQueue(testutil.MakeQueue(name).Parent(dept).GPU(quota(), int32(1+g.pick(3)), "").Obj()))
						leaves = append(leaves, name)
					}
				}
			}
			backlog := func(q string) {
				for i := range capacity + 4 {
					p := testutil.MakePod(q, fmt.Sprintf("%s-%d-%03d", q, g.s.gen, i)).Queue(q).Priority(50).CPU("1").Memory("1Gi").
						Created(g.s.now).GPU(1).Obj()
					mustNoErr(t, g.s.addPod(p, true))
				}
			}
			step := 2 * time.Minute
			backlog(leaves[0])
			evictions := make([]int, 0, 360)
			bindings := make([]int, 0, 360)
			for cycle := range 360 {
				if cycle == 15 {
					for _, q := range leaves[1:] {
						backlog(q)
					}
				}
				res, err := g.s.cycle()
				if err != nil {
					t.Fatalf("cycle %d: %v", cycle, err)
				}
				evictions = append(evictions, len(res.Evictions))
				bindings = append(bindings, len(res.Bindings))
				g.s.now = g.s.now.Add(step)
			}
			late, lateBind, total := 0, 0, 0
			for i, n := range evictions {
				total += n
				if i >= 300 {
					late += n
					lateBind += bindings[i]
				}
			}
			if late+lateBind > 0 {
				t.Errorf("not settled under constant demand: %d evictions and %d bindings in the last two hours (%d evictions in all)", late, lateBind, total)
			}
			checkGuarantees(t, g.s)
		})
	}
}
