package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// The randomized tests generate clusters and workloads from fixed seeds and run several cycles
// each, applying the decisions, finishing some pods and submitting more between cycles. After
// every cycle sim.cycle checks, from the pod objects and independently of the engine's
// bookkeeping:
//
//   - no node over its CPU, memory or pod capacity, no GPU index out of range;
//   - GPU shares on a GPU sum to at most 1000 milli-GPU, memory to at most the GPU's memory, and
//     no GPU is held by a whole-GPU pod and a fraction at once;
//   - gangs all or nothing: a gang that gets pods gets at least its minimum;
//   - non-preemptible pods are never evicted (except whole stale gangs);
//   - no queue (or department) holds more GPU than its limit;
//   - every waiting gang has a reason;
//   - the snapshot's incremental bookkeeping equals a recomputation from scratch.
//
// TestGuaranteesMet adds the guarantee invariant on workloads where it must hold.

type gen struct {
	r    *rand.Rand
	s    *sim
	jobs int
}

func (g *gen) pick(n int) int { return g.r.IntN(n) }

// cluster makes nodes and a queue tree; flat makes only top-level queues.
func (g *gen) cluster(t *testing.T, flat bool) (queues []string) {
	nodes := 3 + g.pick(10)
	for i := range nodes {
		b := testutil.MakeNode(fmt.Sprintf("n%02d", i)).Label("rack", fmt.Sprintf("r%d", i%3))
		switch g.pick(6) {
		case 0:
			// CPU only.
		case 1:
			b.GPUs(4, "A100").Inventory(40960)
		default:
			b.GPUs(8, []string{"H100", "A100"}[g.pick(2)])
		}
		if !flat && g.pick(8) == 0 {
			b.Taint("dedicated", "infer", corev1.TaintEffectNoSchedule)
		}
		mustNoErr(t, g.s.addNode(b.Obj()))
	}
	if flat {
		for i := range 2 + g.pick(4) {
			name := fmt.Sprintf("q%d", i)
			mustNoErr(t, g.s.addQueue(testutil.MakeQueue(name).GPU(fmt.Sprint(g.pick(9)), int32(g.pick(4)), "").Obj()))
			queues = append(queues, name)
		}
		return queues
	}
	for d := range 1 + g.pick(2) {
		dept := fmt.Sprintf("dept%d", d)
		qb := testutil.MakeQueue(dept).GPU(fmt.Sprint(g.pick(16)), 1, "")
		if g.pick(3) == 0 {
			qb.GPU(fmt.Sprint(g.pick(8)), 1, fmt.Sprint(8+g.pick(24)))
		}
		mustNoErr(t, g.s.addQueue(qb.Obj()))
		for p := range 1 + g.pick(3) {
			name := fmt.Sprintf("%s-p%d", dept, p)
			qb := testutil.MakeQueue(name).Parent(dept).GPU(fmt.Sprint(g.pick(6)), int32(g.pick(3)), "")
			if g.pick(4) == 0 {
				qb.GPU(fmt.Sprint(g.pick(4)), int32(1+g.pick(2)), fmt.Sprint(4+g.pick(12)))
			}
			if g.pick(4) == 0 {
				qb.ReclaimMinRuntime(time.Duration(g.pick(10)) * time.Minute)
			}
			if g.pick(4) == 0 {
				qb.PreemptMinRuntime(time.Duration(g.pick(10)) * time.Minute)
			}
			mustNoErr(t, g.s.addQueue(qb.Obj()))
			queues = append(queues, name)
		}
	}
	if g.pick(2) == 0 {
		mustNoErr(t, g.s.addQueue(testutil.MakeQueue("solo").GPU("2", 1, "").Obj()))
		queues = append(queues, "solo")
	}
	return queues
}

// job submits one random job to queue q; simple makes only preemptible or non-preemptible
// 1-GPU pods and gangs of them.
func (g *gen) job(t *testing.T, q string, simple bool) {
	g.jobs++
	name := fmt.Sprintf("j%03d", g.jobs)
	prio := []int32{10, 50, 50, 90, 100, 125}[g.pick(6)]
	replicas, minMember := 1, 1
	shape := g.pick(10)
	if simple {
		shape = []int{0, 0, 4}[g.pick(3)]
	}
	if shape == 4 || shape == 5 {
		replicas = 2 + g.pick(3)
		minMember = replicas
		if g.pick(2) == 0 {
			minMember = 1 + g.pick(replicas)
		}
	}
	for i := range replicas {
		b := testutil.MakePod(q, fmt.Sprintf("%s-%d", name, i)).Queue(q).Priority(prio).CPU("1").Memory("1Gi").Created(g.s.now)
		if replicas > 1 {
			b.PodGroup(name).MinMember(minMember)
		}
		switch shape {
		case 0, 4:
			b.GPU(1)
		case 1:
			b.GPU([]int{2, 4, 8}[g.pick(3)])
		case 2:
			b.Fraction([]string{"0.25", "0.5", "0.3333", "0.2"}[g.pick(4)])
		case 3:
			b.GPUMemory(int64(8000 + g.pick(32000)))
		case 5:
			b.GPU(1 + g.pick(4))
			if g.pick(3) == 0 {
				b.TopologyRequired("rack")
			}
		case 6:
			b.CPU(fmt.Sprint(1 + g.pick(8)))
		case 7:
			b.GPU(1).Toleration("dedicated", "infer", corev1.TaintEffectNoSchedule)
		case 8:
			b.GPU(1).NodeSelector(v1alpha1.GPUTypeLabel, "H100")
		default:
			b.Fraction("0.5").NodeSelector(v1alpha1.GPUTypeLabel, "A100")
		}
		mustNoErr(t, g.s.addPod(b.Obj(), g.pick(3) != 0))
	}
}

// churn finishes some running pods and deletes some pending ones.
func (g *gen) churn(t *testing.T) {
	keys := make([]types.NamespacedName, 0, len(g.s.pods))
	for k := range g.s.pods {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := g.s.pods[k]
		switch {
		case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && g.pick(6) == 0:
			mustNoErr(t, g.s.finishPod(k))
		case p.Spec.NodeName == "" && g.pick(20) == 0:
			g.s.deletePod(k)
		}
	}
}

func TestRandomizedInvariants(t *testing.T) {
	seeds := 500
	if testing.Short() {
		seeds = 15
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			opts := engine.Options{StarvationThreshold: 5 * time.Minute, StaleGangGracePeriod: time.Minute}
			if seed%3 == 0 {
				opts.Placement = engine.Spread
			}
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 42)), s: newSim(opts, testutil.Epoch)}
			g.s.evictionDelay = seed % 2
			queues := g.cluster(t, false)
			for range 5 + g.pick(20) {
				g.job(t, queues[g.pick(len(queues))], false)
			}
			for cycle := range 15 {
				if _, err := g.s.cycle(); err != nil {
					t.Fatalf("cycle %d: %v", cycle, err)
				}
				g.s.now = g.s.now.Add(time.Duration(1+g.pick(4)) * time.Minute)
				g.churn(t)
				for range g.pick(4) {
					g.job(t, queues[g.pick(len(queues))], false)
				}
			}
		})
	}
}

// TestGuaranteesMet checks that guarantees are met whenever the guarantees fit in the cluster:
// flat queues whose quotas add up to no more than the cluster's GPUs, 1-GPU pods and gangs of
// them, no minimum runtimes. Once the cluster has settled (two cycles without a decision), no
// queue holds less than its quota while one of its waiting gangs would fit in the rest of it.
func TestGuaranteesMet(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 20
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 7)), s: newSim(engine.Options{StarvationThreshold: -1}, testutil.Epoch)}
			nodes := 2 + g.pick(6)
			for i := range nodes {
				mustNoErr(t, g.s.addNode(testutil.MakeNode(fmt.Sprintf("n%02d", i)).GPUs(8, "H100").Obj()))
			}
			capacity := 8 * nodes
			var queues []string
			left := capacity
			for i := range 2 + g.pick(4) {
				quota := g.pick(left/2 + 1)
				left -= quota
				name := fmt.Sprintf("q%d", i)
				mustNoErr(t, g.s.addQueue(testutil.MakeQueue(name).GPU(fmt.Sprint(quota), int32(g.pick(4)), "").Obj()))
				queues = append(queues, name)
			}
			// Demand well above the cluster, submitted in two waves so that reclaim has work.
			for range 12 + g.pick(12) {
				g.job(t, queues[g.pick(len(queues))], true)
			}
			settle := func(wave int) {
				quiet := 0
				for cycle := 0; cycle < 30 && quiet < 2; cycle++ {
					res, err := g.s.cycle()
					if err != nil {
						t.Fatalf("wave %d cycle %d: %v", wave, cycle, err)
					}
					if len(res.Bindings)+len(res.Evictions)+len(res.Nominations) == 0 {
						quiet++
					} else {
						quiet = 0
					}
					g.s.now = g.s.now.Add(time.Minute)
				}
				if quiet < 2 {
					t.Fatalf("wave %d: the cluster did not settle in 30 cycles", wave)
				}
			}
			settle(1)
			for range 8 + g.pick(8) {
				g.job(t, queues[g.pick(len(queues))], true)
			}
			settle(2)
			checkGuarantees(t, g.s)
		})
	}
}

func checkGuarantees(t *testing.T, s *sim) {
	t.Helper()
	held := map[string]int64{}
	for _, p := range s.pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			held[p.Namespace] += snapshot.PodInfoFromPod(p).Req.WholeGPUs
		}
	}
	for _, q := range s.snap.Queues() {
		quota := q.Quota.At(snapshot.DimGPU) / snapshot.MilliPerGPU
		for _, g := range q.PendingGangs {
			need := int64(0)
			for _, task := range g.Pending {
				need += task.Req.WholeGPUs
			}
			// A running elastic gang needs one more pod; a fresh one its minimum.
			if min := int64(g.MinMember - g.Bound); g.Bound == 0 && min < int64(len(g.Pending)) {
				need = min * g.Pending[0].Req.WholeGPUs
			} else if g.Bound > 0 {
				need = g.Pending[0].Req.WholeGPUs
			}
			if held[q.Name]+need <= quota {
				t.Errorf("queue %s holds %d of its %d guaranteed GPUs while gang %s, needing %d, waits", q.Name, held[q.Name], quota, g.Key, need)
			}
		}
	}
}
