package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// The consolidation budget's liveness property: whatever hopeless gangs wait ahead of it, a gang
// that a move would place gets its what-if, and its move, within ⌈(D+1)/B⌉ cycles, D being the
// distinct shapes of the hopeless gangs and B the budget (MaxConsolidationsPerCycle).
//
// Each seed builds pool x, 2-4 nodes of 8 GPUs with 4 taken on each by bare pods (nothing
// recreates them, so consolidation never moves them), and 1-12 hopeless gangs that may run only
// there: 1 or 2 pods of 5-8 GPUs, no more GPUs than pool x has free, so each looks fragmented and
// gets a what-if, which fails. Shapes repeat (identical gangs are skipped after one failure) and
// creation times are shuffled. Behind them in waiting order (a lower priority) waits big, one pod
// as large as a node of pool node (4 or 8 GPUs): half of node-1 runs pods a ReplicaSet recreates,
// half of node-2 bare pods, so moving node-1's pods to node-2 places big. Without turns the first
// B shapes took the budget every cycle and big waited for ever whenever D ≥ B.
//
// The tenants variant adds 1-3 other queues ahead of big's in waiting order (they run nothing; big's
// queue has the larger weight, so no reclaim takes its pods), each with up to 30 hopeless gangs of
// distinct shapes (CPU requests differ), as a tenant can submit: the budget goes round the queues
// first, so big gets its move within (Dq+1)·⌈Q/B⌉ cycles, Dq the distinct shapes ahead of it in its
// own queue and Q the queues, however many shapes the tenants make.
func TestConsolidationTurns(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for _, tenants := range []bool{false, true} {
		name := "one-queue"
		if tenants {
			name = "tenants"
		}
		t.Run(name, func(t *testing.T) {
			worst := 0
			for seed := 1; seed <= seeds; seed++ {
				t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
					worst = max(worst, consolidationTurnsRun(t, uint64(seed), tenants))
				})
			}
			t.Logf("consolidation turns (%s): %d seeds; the most cycles a placeable gang waited for its move: %d", name, seeds, worst)
		})
	}
}

func consolidationTurnsRun(t *testing.T, seed uint64, tenants bool) int {
	r := rand.New(rand.NewPCG(seed, 0x7a11))
	budget := 1 + r.IntN(4)
	s := newSim(engine.Options{MaxConsolidationsPerCycle: budget}, testutil.Epoch.Add(24*time.Hour))
	pool := 2 + r.IntN(3)
	big := []int{4, 8}[r.IntN(2)]
	for _, ns := range []nodeSpec{
		{Name: "x", Count: pool, GPUs: 8, CPU: "256", Labels: map[string]string{"pool": "x"}},
		{Name: "node", Count: 2, GPUs: big, CPU: "256", Labels: map[string]string{"pool": "node"}},
	} {
		for _, n := range buildNodes(ns) {
			if err := s.addNode(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	weight := func(w int32) *termsSpec { return &termsSpec{Weight: &w} }
	if err := s.addQueue(buildQueue(queueSpec{Name: "q", GPU: weight(100)})); err != nil {
		t.Fatal(err)
	}
	queues := []string{"q"}
	if tenants {
		for i := range 1 + r.IntN(3) {
			name := fmt.Sprintf("t%d", i+1)
			if err := s.addQueue(buildQueue(queueSpec{Name: name, GPU: weight(1)})); err != nil {
				t.Fatal(err)
			}
			queues = append(queues, name)
		}
	}
	jobs := map[string]*jobSpec{}
	no, prio := false, func(p int32) *int32 { return &p }
	hour := &duration{time.Hour}
	addJob(t, s, &jobSpec{Name: "a", Queue: "q", Replicas: big / 2, Gang: &no, GPU: 1, Priority: prio(50), Running: []string{"node-1"}, StartedAgo: hour}, jobs)
	addJob(t, s, &jobSpec{Name: "b", Queue: "q", Replicas: big / 2, Gang: &no, GPU: 1, Priority: prio(50), Running: []string{"node-2"}, StartedAgo: hour, Recreate: &no}, jobs)
	for i := 1; i <= pool; i++ {
		addJob(t, s, &jobSpec{Name: fmt.Sprintf("bare-%d", i), Queue: "q", Replicas: 4, Gang: &no, GPU: 1, Priority: prio(50),
			Running: []string{fmt.Sprintf("x-%d", i)}, StartedAgo: hour, Recreate: &no}, jobs)
	}
	hopeless := func(q string, n int, cpus bool) int {
		shapes := map[[3]int]bool{}
		for i := range n {
			replicas, gpus, cpu := 1+r.IntN(2), 5+r.IntN(4), 1
			if replicas*gpus > pool*4 {
				replicas = 1
			}
			if cpus {
				cpu = 1 + i // a shape of its own each
			}
			shapes[[3]int{replicas, gpus, cpu}] = true
			addJob(t, s, &jobSpec{Name: fmt.Sprintf("%s-w%d", q, i), Queue: q, Replicas: replicas, GPU: gpus, CPU: fmt.Sprint(cpu),
				Priority: prio(50), NodeSelector: map[string]string{"pool": "x"}, CreatedAgo: duration{time.Duration(r.IntN(600)) * time.Second}}, jobs)
		}
		return len(shapes)
	}
	var bound, shapes, count int
	if !tenants {
		count = 1 + r.IntN(12)
		shapes = hopeless("q", count, false)
		bound = (shapes + 1 + budget - 1) / budget
	} else {
		count = r.IntN(4)
		shapes = hopeless("q", count, false)
		for _, q := range queues[1:] {
			count += hopeless(q, 1+r.IntN(30), true)
		}
		bound = (shapes + 1) * ((len(queues) + budget - 1) / budget)
	}
	addJob(t, s, &jobSpec{Name: "big", Queue: "q", GPU: big, Priority: prio(40), NodeSelector: map[string]string{"pool": "node"}}, jobs)

	for cycle := 1; cycle <= bound; cycle++ {
		res, err := s.cycle()
		if err != nil {
			t.Fatalf("cycle %d: invariant broken: %v", cycle, err)
		}
		for _, e := range res.Evictions {
			if e.Reason != engine.EvictConsolidate || e.Beneficiary == nil || e.Beneficiary.Name != "big" {
				t.Fatalf("cycle %d: unexpected eviction of %s (%s for %v)", cycle, e.Pod, e.Reason, e.Beneficiary)
			}
		}
		if len(res.Evictions) > 0 {
			if len(res.Evictions) != big/2 {
				t.Fatalf("cycle %d: %d pods moved for big, want node-1's %d", cycle, len(res.Evictions), big/2)
			}
			return cycle
		}
		s.now = s.now.Add(10 * time.Second)
	}
	t.Fatalf("big (%d GPUs) was not given its move within %d cycles: %d hopeless gangs in %d queues, %d shapes ahead in its own, budget %d",
		big, bound, count, len(queues), shapes, budget)
	return 0
}
