package engine_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//   - no node over its CPU, memory or pod capacity, no GPU index out of range, no more GPUs
//     held than the node has physically (some nodes are time-sliced: each GPU advertised
//     several times under nvidia.com/gpu);
//   - GPU shares on a GPU sum to at most 1000 milli-GPU, memory to at most the GPU's memory, and
//     no GPU is held by a whole-GPU pod and a fraction at once;
//   - gangs all or nothing: a gang that gets pods gets at least its minimum;
//   - non-preemptible pods are never evicted (except whole stale gangs);
//   - no queue (or department) holds more GPU than its limit;
//   - every waiting gang has a reason;
//   - the snapshot's incremental bookkeeping equals a recomputation from scratch;
//   - loans (idle GPU lending): a loan's GPU keeps room for it (loans' memory plus the idle
//     holders' resident memory within the GPU's memory, at most maxLoansPerGPU loans), and once
//     the cycle's evictions are issued no loan runs on a GPU that is not lendable (held whole,
//     a holder active, leaving, not idle long enough or in a queue that does not lend). Loans
//     never count in a GPU's shares (the share and memory checks above exclude them, and the
//     snapshot's Verify recomputes the slots).
//
// TestGuaranteesMet adds the guarantee invariant on workloads where it must hold.

type gen struct {
	r    *rand.Rand
	s    *sim
	jobs int
	// lr drives idle lending (queue policies, opt-ins, idleness) apart from r, so that the
	// rest of a seed's workload stays what it was before lending existed.
	lr    *rand.Rand
	lends int
	// leaves are the queues that take pods.
	leaves []string
}

// lendingPolicies gives some queues an idle-lending policy.
func (g *gen) lendingPolicies(t *testing.T) {
	if g.lr == nil {
		return
	}
	// Half the GPU nodes without an inventory get one: only there may a GPU be lent.
	for _, name := range slices.Sorted(maps.Keys(g.s.nodes)) {
		n := g.s.nodes[name]
		gpus := n.Status.Allocatable[v1alpha1.ResourceGPU]
		if gpus.Value() == 0 || n.Annotations[v1alpha1.GPUInventoryAnnotation] != "" || g.lr.IntN(2) == 0 {
			continue
		}
		n = n.DeepCopy()
		var inv []string
		for i := range int(gpus.Value()) {
			inv = append(inv, fmt.Sprintf(`{"index":%d,"uuid":"GPU-%s-%d","memoryMiB":81920}`, i, name, i))
		}
		n.Annotations[v1alpha1.GPUInventoryAnnotation] = "[" + strings.Join(inv, ",") + "]"
		mustNoErr(t, g.s.addNode(n))
	}
	// Small tainted nodes only notebooks and borrowers go to: there GPUs fill up, and borrowers
	// find no room but loans.
	for i := range 1 + g.lr.IntN(3) {
		b := testutil.MakeNode(fmt.Sprintf("lend-%d", i)).GPUs(1, "A100").Inventory(81920).Label("pool", "lend").
			Taint("pool", "lend", corev1.TaintEffectNoSchedule)
		mustNoErr(t, g.s.addNode(b.Obj()))
	}
	lendNodes := 0
	for _, name := range slices.Sorted(maps.Keys(g.s.nodes)) {
		if strings.HasPrefix(name, "lend-") {
			lendNodes++
		}
	}
	// Notebooks to fill them, half a GPU each.
	for range 2 * lendNodes {
		g.notebook(t, "0.5", true)
	}
	names := slices.Sorted(maps.Keys(g.s.queues))
	for _, name := range names {
		if g.lr.IntN(4) == 0 {
			continue
		}
		q := g.s.queues[name].DeepCopy()
		l := &v1alpha1.IdleLending{}
		if g.lr.IntN(6) != 0 {
			l.Lend = ptr(g.lr.IntN(6) != 0)
		}
		if g.lr.IntN(3) == 0 {
			l.Borrow = ptr([]v1alpha1.BorrowPolicy{v1alpha1.BorrowOptIn, v1alpha1.BorrowAlways, v1alpha1.BorrowNever}[g.lr.IntN(3)])
		}
		if g.lr.IntN(3) == 0 {
			l.MinIdleTime = &metav1.Duration{Duration: time.Duration(g.lr.IntN(6)) * time.Minute}
		}
		if g.lr.IntN(3) == 0 {
			l.MaxLoansPerGPU = ptr(int32(1 + g.lr.IntN(3)))
		}
		q.Spec.IdleLending = l
		mustNoErr(t, g.s.addQueue(q))
	}
}

// idleness makes running interactive pods idle or active at random, and opts pending pods in
// to borrowing.
func (g *gen) idleness(t *testing.T) {
	if g.lr == nil {
		return
	}
	// Notebooks that may lend, and pods that may borrow.
	queues := g.leaves
	for range g.lr.IntN(3) {
		g.notebook(t, []string{"0.25", "0.5", "0.3333"}[g.lr.IntN(3)], g.lr.IntN(4) != 0)
	}
	for range g.lr.IntN(4) {
		g.lends++
		q := queues[g.lr.IntN(len(queues))]
		b := testutil.MakePod(q, fmt.Sprintf("bw%03d", g.lends)).Queue(q).Priority(50).CPU("1").Memory("1Gi").Created(g.s.now)
		if g.lr.IntN(2) == 0 {
			b.Fraction([]string{"0.25", "0.5", "0.2"}[g.lr.IntN(3)])
		} else {
			b.GPUMemory(int64(2000 + g.lr.IntN(30000)))
		}
		if g.lr.IntN(4) != 0 {
			b.Annotation(v1alpha1.BorrowIdleGPUAnnotation, "true")
		}
		g.lendPool(b)
		mustNoErr(t, g.s.addPod(b.Obj(), g.lr.IntN(3) != 0))
	}
	keys := slices.SortedFunc(maps.Keys(g.s.pods), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := g.s.pods[k]
		info := snapshot.PodInfoFromPod(p)
		switch {
		case p.Spec.NodeName != "" && p.DeletionTimestamp == nil && info.Interactive && info.Req.Shared():
			switch g.lr.IntN(4) {
			case 0:
				mustNoErr(t, g.s.setIdle(k, false, -1))
			case 1, 2:
				if !info.Idle {
					mem := int64(-1)
					if g.lr.IntN(6) != 0 {
						mem = int64(g.lr.IntN(16000))
					}
					mustNoErr(t, g.s.setIdle(k, true, mem))
				}
			}
		case p.Spec.NodeName == "" && !info.BorrowOptIn && !info.Interactive && info.Req.Shared() && g.lr.IntN(2) == 0:
			p = p.DeepCopy()
			p.Annotations[v1alpha1.BorrowIdleGPUAnnotation] = "true"
			g.s.pods[k] = p
			mustNoErr(t, g.s.snap.UpsertPod(p))
		}
	}
}

// notebook submits a notebook asking for a fraction of a GPU, in the lend-* pool or not.
func (g *gen) notebook(t *testing.T, fraction string, pool bool) {
	g.lends++
	q := g.leaves[g.lr.IntN(len(g.leaves))]
	b := testutil.MakePod(q, fmt.Sprintf("nb%03d", g.lends)).Queue(q).Priority(100).CPU("1").Memory("1Gi").Created(g.s.now).
		Fraction(fraction).Annotation(v1alpha1.WorkloadKindAnnotation, "notebook")
	if pool {
		b.NodeSelector("pool", "lend").Toleration("pool", "lend", corev1.TaintEffectNoSchedule)
	}
	mustNoErr(t, g.s.addPod(b.Obj(), false))
}

// lendPool sends most lending pods to the lend-* nodes.
func (g *gen) lendPool(b *testutil.PodWrapper) {
	if g.lr.IntN(4) != 0 {
		b.NodeSelector("pool", "lend").Toleration("pool", "lend", corev1.TaintEffectNoSchedule)
	}
}

func ptr[T any](v T) *T { return &v }

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
			if i%2 == 1 {
				// Every other one time-sliced 2 to 4 ways: the same 4 GPUs, advertised as 8 to
				// 16 (decided without r, so that the rest of a seed's workload stays as it was).
				b.TimeSliced(2+i%3, 40960)
			}
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
	// One controller makes all of a job's pods, or none does: a gang whose controller recreates
	// some of its pods only would lose the others for good to any eviction.
	recreate := g.pick(3) != 0
	for i := range replicas {
		b := testutil.MakePod(q, fmt.Sprintf("%s-%d", name, i)).Queue(q).Priority(prio).CPU("1").Memory("1Gi").Created(g.s.now).
			Label(jobLabel, name)
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
		mustNoErr(t, g.s.addPod(b.Obj(), recreate))
	}
}

// budgets gives some of the first jobs a PodDisruptionBudget (drawn from r, apart from the rest
// of the workload): the harness refuses evictions beyond it, as the API server would.
func (g *gen) budgets(r *rand.Rand) {
	for j := 1; j <= g.jobs; j++ {
		if r.IntN(3) != 0 {
			continue
		}
		name := fmt.Sprintf("j%03d", j)
		for k, p := range g.s.pods {
			if p.Labels[jobLabel] == name {
				g.s.budgets = append(g.s.budgets, budgetSpec{Name: name + "-pdb", Namespace: k.Namespace, MaxUnavailable: int32(r.IntN(2)), Jobs: []string{name}})
				break
			}
		}
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
	loans, returns, refusals := 0, 0, 0
	defer func() {
		t.Logf("idle lending: %d loans bound, %d returned; %d evictions refused for a PodDisruptionBudget", loans, returns, refusals)
		if !testing.Short() && refusals < 20 {
			t.Errorf("the workloads exercise PodDisruptionBudgets too little: %d evictions refused", refusals)
		}
		if !testing.Short() && (loans < 40 || returns < 20) {
			t.Errorf("the workloads exercise idle lending too little: %d loans bound, %d returned", loans, returns)
		}
	}()
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			opts := engine.Options{StarvationThreshold: 5 * time.Minute, StaleGangGracePeriod: time.Minute}
			if seed%3 == 0 {
				opts.Placement = engine.Spread
			}
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 42)), s: newSim(opts, testutil.Epoch), lr: rand.New(rand.NewPCG(uint64(seed), 9))}
			g.s.evictionDelay = seed % 2
			queues := g.cluster(t, false)
			g.leaves = queues
			g.lendingPolicies(t)
			for range 5 + g.pick(20) {
				g.job(t, queues[g.pick(len(queues))], false)
			}
			g.budgets(rand.New(rand.NewPCG(uint64(seed), 11)))
			for cycle := range 15 {
				if _, err := g.s.cycle(); err != nil {
					t.Fatalf("cycle %d: %v", cycle, err)
				}
				g.s.now = g.s.now.Add(time.Duration(1+g.pick(4)) * time.Minute)
				g.churn(t)
				for range g.pick(4) {
					g.job(t, queues[g.pick(len(queues))], false)
				}
				g.idleness(t)
			}
			loans += g.s.loans
			returns += g.s.loanReturns
			refusals += g.s.refusals
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
