package engine_test

import (
	"flag"
	"fmt"
	"maps"
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

// The guarantee liveness property: on random clusters whose guarantees add up to no more than
// the capacity, every queue below its guarantee whose waiting work fits within its guarantee
// reaches it within a bounded number of cycles, whatever the other queues run. `make unit` runs
// the default seeds; `make test-liveness` runs 20,000 (-liveness.seeds).
//
// Each seed builds 1-16 nodes of one GPU size (1, 2, 4 or 8: sizes that divide each other, so
// that guarantees that add up to the capacity can always be packed), 2-8 leaf queues, flat or
// under departments, guarantees adding up to at most the capacity (a department's children to
// at most the department's), limits at or above guarantees, and PodDisruptionBudgets on some
// jobs. First the queues borrow: random jobs (whole GPUs of every size that fits a node, shares
// of 1/4 and 1/2, gangs, elastic gangs, priorities 50, 100 and 125, recreatable or not) run
// for a few cycles with churn. Then some queues claim work within their guarantee, nothing else
// changes, and the harness runs the cycles the property allows: K cycles plus the budget
// timeout in simulated time. Then, for every queue, every waiting gang whose minimum would keep
// the queue within its guarantee must have been placed, unless it could not be placed even if
// every pod that nothing may evict or move (non-preemptible pods, the queue's own, pods nothing
// recreates, and pods within their queue's guarantee whose PodDisruptionBudget allows no
// disruption: such a budget keeps its full protection, no budget timeout overrides it) stayed
// where it is, the other pods within their queues' guarantees found room again, and everything
// else were gone (probePlaceable). And no pod was evicted twice for the same beneficiary: no
// ping-pong.

// livenessDebug, when set, is told each cycle's decisions (a debugging hook for one seed).
var livenessDebug func(cycle int, decisions any)

var livenessSeeds = flag.Int("liveness.seeds", 500, "seeds TestGuaranteeLiveness runs")

var livenessDump = flag.Bool("liveness.dump", false, "log the cluster's final state of a seed that fails")

const (
	// livenessK is the cycles a guarantee may take once claimed, beyond the budget timeout.
	livenessK = 10
	// livenessStep is the simulated time between cycles.
	livenessStep = 10 * time.Second
)

func TestGuaranteeLiveness(t *testing.T) {
	seeds := *livenessSeeds
	if testing.Short() {
		seeds = min(seeds, 50)
	}
	stats := livenessStats{}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			livenessRun(t, uint64(seed), &stats)
		})
	}
	t.Logf("guarantee liveness: %d seeds, %d gangs claimed within guarantees (%d seeds needed evictions), %d still waiting within their guarantee at the end (%d of them unplaceable with what may not move kept), %d evictions, %d overrode a budget, %d refused by a budget",
		seeds, stats.claimed, stats.reclaimed, stats.claims, stats.unplaceable, stats.evictions, stats.overrides, stats.refusals)
	if seeds >= 500 && (stats.reclaimed < seeds/10 || stats.refusals < 20) {
		t.Errorf("the workloads exercise reclaim too little: %d claims needed reclaim, %d evictions refused by a budget", stats.reclaimed, stats.refusals)
	}
}

type livenessStats struct {
	claimed, claims, reclaimed, unplaceable, evictions, overrides, refusals int
}

type livenessGen struct {
	r        *rand.Rand
	s        *sim
	nodeGPUs int
	leaves   []string
	quota    map[string]int64 // milli-GPU, leaves and departments
	jobs     int
}

func livenessRun(t *testing.T, seed uint64, stats *livenessStats) {
	r := rand.New(rand.NewPCG(seed, 33))
	g := &livenessGen{r: r, s: newSim(engine.Options{StarvationThreshold: -1}, testutil.Epoch), quota: map[string]int64{}}
	g.s.evictionDelay = r.IntN(2)
	capacity := g.cluster(t)
	// Demand of one and a half times the cluster, so that queues borrow what others are owed.
	var demand int64
	for demand < capacity*3/2 && g.jobs < 60 {
		j := g.draw(false)
		g.submit(t, g.leaves[r.IntN(len(g.leaves))], j)
		demand += j.need() * int64(j.replicas) / int64(j.minMember)
	}
	g.budgets()
	evicted := map[string]int{}
	excused := map[string]bool{} // first evicted in a plan a budget broke
	var last engine.Result
	run := func(cycles int, churn bool) {
		for c := range cycles {
			res, err := g.s.cycle()
			last = res
			if livenessDebug != nil {
				var b strings.Builder
				for _, x := range res.Bindings {
					fmt.Fprintf(&b, "bind %s -> %s %v %v\n", x.Pod, x.Node, x.GPUs, x.Shared)
				}
				for _, x := range res.Evictions {
					fmt.Fprintf(&b, "evict %s (%s) for %v: %s\n", x.Pod, x.Reason, x.Beneficiary, x.Message)
				}
				for _, x := range res.Nominations {
					fmt.Fprintf(&b, "nominate %s %v\n", x.Gang, x.Nodes)
				}
				for _, x := range res.Unschedulable {
					fmt.Fprintf(&b, "pending %s %s: %.300s\n", x.Gang, x.Code, x.Message)
				}
				for _, x := range g.s.refused {
					fmt.Fprintf(&b, "refused %s\n", x.pod)
				}
				for _, hg := range g.s.snap.HeldGangs() {
					for _, h := range hg.Holds() {
						fmt.Fprintf(&b, "hold %s on %s whole=%d milli=%d slots=%v\n", hg.Key, h.Node.Name, h.WholeGPUs, h.MilliGPU, h.Slots)
					}
				}
				livenessDebug(c, b.String())
			}
			if err != nil {
				t.Fatalf("cycle %d: %v", c, err)
			}
			// Beneficiaries some of whose victims the API server refused this cycle: their plan
			// broke, and redoing it may take a pod of the same gang unit again.
			broken := map[snapshot.GangKey]bool{}
			for _, e := range res.Evictions {
				if e.Beneficiary != nil && g.refusedLately(e.Pod) {
					broken[*e.Beneficiary] = true
				}
			}
			for _, e := range res.Evictions {
				stats.evictions++
				if e.OverridesBudget != nil {
					stats.overrides++
				}
				if e.Beneficiary == nil || e.Reason == engine.EvictLoanReturn {
					continue
				}
				if g.refusedLately(e.Pod) {
					continue // the API server refused it: no eviction happened
				}
				k := e.Pod.String() + " for " + e.Beneficiary.String()
				if broken[*e.Beneficiary] {
					excused[k] = true
				}
				evicted[k]++
				if evicted[k] > 1 && !excused[k] {
					t.Errorf("cycle %d: pod %s evicted %d times for the same beneficiary (%s)", c, e.Pod, evicted[k], e.Reason)
				}
			}
			stats.refusals += len(g.s.refused)
			g.s.now = g.s.now.Add(livenessStep)
			if churn {
				g.churn(t)
			}
		}
	}
	// The queues borrow.
	run(3+r.IntN(4), true)
	// Claims within guarantees, then nothing changes but what the scheduler decides.
	claimed := g.claims(t)
	if len(claimed) == 0 {
		return
	}
	stats.claimed += len(claimed)
	timeout := snapshot.DefaultReclaimBudgetTimeout
	cycles := livenessK + int((timeout+budgetBackoff)/livenessStep) + 1
	before := stats.evictions
	run(cycles, false)
	if stats.evictions > before {
		stats.reclaimed++
	}
	g.check(t, last, stats)
	if t.Failed() && *livenessDump {
		t.Log("final state:\n" + g.dump())
	}
}

// dump describes the cluster as the harness sees it: queues, then each node's pods.
func (g *livenessGen) dump() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(g.s.queues)) {
		q := g.s.queues[name]
		limit := ""
		if gq := q.Spec.Resources.GPU; gq != nil && gq.Limit != nil {
			limit = " limit " + gq.Limit.String()
		}
		fmt.Fprintf(&b, "queue %s parent=%q guarantee %s%s holds %s\n", name, q.Spec.Parent,
			snapshot.FormatAmount(snapshot.DimGPU, g.quota[name]), limit, snapshot.FormatAmount(snapshot.DimGPU, g.held(name)))
	}
	budgets := map[string]string{}
	for _, bs := range g.s.budgets {
		for _, j := range bs.Jobs {
			budgets[j] = fmt.Sprintf(" pdb(maxUnavailable %d)", bs.MaxUnavailable)
		}
	}
	pod := func(k types.NamespacedName) string {
		p := g.s.pods[k]
		info := snapshot.PodInfoFromPod(p)
		size := fmt.Sprintf("%dgpu", info.Req.WholeGPUs)
		if info.Req.Shared() {
			size = fmt.Sprintf("%dm", info.Req.SharedMilli(0))
		}
		flags := ""
		if !podPreemptible(p) {
			flags += " nonpreempt"
		}
		if g.s.recreate[k] {
			flags += " recreate"
		}
		if p.DeletionTimestamp != nil {
			flags += " leaving"
		}
		if info.MinMember > 0 {
			flags += fmt.Sprintf(" gang(min %d)", info.MinMember)
		}
		idx := p.Annotations[v1alpha1.GPUIndexAnnotation]
		return fmt.Sprintf("%s %s [%s] prio %d%s%s", k, size, idx, ptrOr(p.Spec.Priority), flags, budgets[p.Labels[jobLabel]])
	}
	byNode := map[string][]string{}
	for _, k := range slices.SortedFunc(maps.Keys(g.s.pods), cmpKey) {
		p := g.s.pods[k]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], pod(k))
	}
	for _, n := range slices.Sorted(maps.Keys(g.s.nodes)) {
		fmt.Fprintf(&b, "node %s (%d GPUs):\n", n, g.nodeGPUs)
		for _, l := range byNode[n] {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	b.WriteString("pending:\n")
	for _, l := range byNode[""] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// refusedLately reports whether the API server refused an eviction of the pod in the harness's
// latest cycle: a refused eviction is asked for again later, which is no ping-pong.
func (g *livenessGen) refusedLately(k types.NamespacedName) bool {
	for _, r := range g.s.refused {
		if r.pod == k {
			return true
		}
	}
	return false
}

// cluster makes uniform nodes and a queue tree with guarantees that fit the capacity.
func (g *livenessGen) cluster(t *testing.T) (capacity int64) {
	r := g.r
	g.nodeGPUs = []int{1, 2, 4, 8}[r.IntN(4)]
	nodes := 1 + r.IntN(16)
	for i := range nodes {
		mustNoErr(t, g.s.addNode(testutil.MakeNode(fmt.Sprintf("n%02d", i)).GPUs(g.nodeGPUs, "H100").Obj()))
	}
	capacity = int64(nodes*g.nodeGPUs) * snapshot.MilliPerGPU
	gpus := int64(nodes * g.nodeGPUs)
	leaves := 2 + r.IntN(7)
	// split gives each of n parts a guarantee, adding up to at most total (whole GPUs).
	split := func(total int64, n int) []int64 {
		out := make([]int64, n)
		left := total
		for i := range out {
			if left <= 0 || r.IntN(4) == 0 {
				continue
			}
			out[i] = 1 + r.Int64N(left)
			if r.IntN(2) == 0 {
				out[i] = min(out[i], max(1, total/int64(n)))
			}
			left -= out[i]
		}
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	add := func(name, parent string, quota int64) {
		qb := testutil.MakeQueue(name).Parent(parent)
		limit := ""
		if r.IntN(4) == 0 {
			limit = fmt.Sprint(quota + r.Int64N(gpus+1))
		}
		qb.GPU(fmt.Sprint(quota), int32(r.IntN(4)), limit)
		if r.IntN(5) == 0 {
			qb.PreemptMinRuntime(time.Duration(r.IntN(3)) * time.Minute)
		}
		mustNoErr(t, g.s.addQueue(qb.Obj()))
		g.quota[name] = quota * snapshot.MilliPerGPU
	}
	if r.IntN(2) == 0 {
		for i, q := range split(gpus, leaves) {
			name := fmt.Sprintf("q%d", i)
			add(name, "", q)
			g.leaves = append(g.leaves, name)
		}
		return capacity
	}
	depts := 1 + r.IntN(3)
	per := make([]int, depts)
	for i := range leaves {
		per[i%depts]++
	}
	for d, dq := range split(gpus, depts) {
		dept := fmt.Sprintf("dept%d", d)
		add(dept, "", dq)
		for i, q := range split(dq, per[d]) {
			name := fmt.Sprintf("%s-p%d", dept, i)
			add(name, dept, q)
			g.leaves = append(g.leaves, name)
		}
	}
	return capacity
}

// livenessJob is one job's shape.
type livenessJob struct {
	prio                int32
	replicas, minMember int
	gpus                int
	fraction            string
	recreate            bool
}

// draw draws a job: whole GPUs in a size that divides the node's, or a share of one; lone pods,
// gangs and elastic gangs; priorities 50, 100 and 125. Claims are more often preemptible.
func (g *livenessGen) draw(claim bool) livenessJob {
	r := g.r
	j := livenessJob{prio: []int32{50, 50, 100, 125}[r.IntN(4)], replicas: 1, minMember: 1}
	if claim && r.IntN(2) == 0 {
		j.prio = 50
	}
	if r.IntN(3) == 0 {
		j.replicas = 2 + r.IntN(3)
		j.minMember = j.replicas
		if r.IntN(3) == 0 {
			j.minMember = 1 + r.IntN(j.replicas)
		}
	}
	var sizes []int
	for s := 1; s <= g.nodeGPUs; s *= 2 {
		sizes = append(sizes, s)
	}
	j.gpus = sizes[r.IntN(len(sizes))]
	if r.IntN(4) == 0 {
		j.fraction = []string{"0.25", "0.5"}[r.IntN(2)]
	}
	j.recreate = r.IntN(3) != 0
	return j
}

// need is what the job needs to start (milli-GPU).
func (j livenessJob) need() int64 {
	milli := int64(j.gpus) * snapshot.MilliPerGPU
	if j.fraction != "" {
		milli = map[string]int64{"0.25": 250, "0.5": 500}[j.fraction]
	}
	return milli * int64(j.minMember)
}

func (g *livenessGen) submit(t *testing.T, q string, j livenessJob) snapshot.GangKey {
	g.jobs++
	name := fmt.Sprintf("j%03d", g.jobs)
	var key snapshot.GangKey
	for i := range j.replicas {
		b := testutil.MakePod(q, fmt.Sprintf("%s-%d", name, i)).Queue(q).Priority(j.prio).CPU("1").Memory("1Gi").Created(g.s.now).
			Label(jobLabel, name)
		if j.replicas > 1 {
			b.PodGroup(name).MinMember(j.minMember)
		}
		if j.fraction != "" {
			b.Fraction(j.fraction)
		} else {
			b.GPU(j.gpus)
		}
		p := b.Obj()
		key = snapshot.PodInfoFromPod(p).Gang
		mustNoErr(t, g.s.addPod(p, j.recreate))
	}
	return key
}

// budgets gives a third of the jobs a PodDisruptionBudget of maxUnavailable 0 or 1.
func (g *livenessGen) budgets() {
	for j := 1; j <= g.jobs; j++ {
		if g.r.IntN(3) != 0 {
			continue
		}
		name := fmt.Sprintf("j%03d", j)
		for _, k := range slices.SortedFunc(maps.Keys(g.s.pods), cmpKey) {
			if g.s.pods[k].Labels[jobLabel] == name {
				g.s.budgets = append(g.s.budgets, budgetSpec{Name: name + "-pdb", Namespace: k.Namespace, MaxUnavailable: int32(g.r.IntN(2)), Jobs: []string{name}})
				break
			}
		}
	}
}

func cmpKey(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }

// churn finishes some running pods.
func (g *livenessGen) churn(t *testing.T) {
	for _, k := range slices.SortedFunc(maps.Keys(g.s.pods), cmpKey) {
		p := g.s.pods[k]
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && g.r.IntN(8) == 0 {
			mustNoErr(t, g.s.finishPod(k))
		}
	}
}

// held is what the queue's running pods hold (milli-GPU), from the pod objects.
func (g *livenessGen) held(q string) int64 {
	var v int64
	for _, p := range g.s.pods {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.Labels[v1alpha1.QueueLabel] != q {
			continue
		}
		info := snapshot.PodInfoFromPod(p)
		v += info.Req.WholeGPUs*snapshot.MilliPerGPU + info.Req.SharedMilli(0)
	}
	return v
}

// claims submits, to some queues below their guarantee, jobs that keep them within it.
func (g *livenessGen) claims(t *testing.T) []snapshot.GangKey {
	var out []snapshot.GangKey
	for _, q := range g.leaves {
		if g.r.IntN(3) == 0 {
			continue
		}
		room := g.quota[q] - g.held(q) - g.pendingMin(q)
		for try := 0; try < 4 && room > 0; try++ {
			j := g.draw(true)
			if j.need() > room {
				continue
			}
			room -= j.need()
			out = append(out, g.submit(t, q, j))
		}
	}
	return out
}

// pendingMin is what the queue's waiting gangs need to start (milli-GPU).
func (g *livenessGen) pendingMin(q string) int64 {
	var v int64
	if sq := g.s.snap.Queue(q); sq != nil {
		for _, gang := range sq.PendingGangs {
			v += gangNeed(gang)
		}
	}
	return v
}

// gangNeed is what a waiting gang needs to start: its minimum's GPUs, or one more pod of a
// running elastic gang.
func gangNeed(gang *snapshot.Gang) int64 {
	if len(gang.Pending) == 0 {
		return 0
	}
	per := gang.Pending[0].PendingGPU()
	n := int64(gang.MinMember - gang.Bound - gang.Succeeded)
	if n < 1 {
		n = 1
	}
	return per * min(n, int64(len(gang.Pending)))
}

// check asserts the property after the claim phase.
func (g *livenessGen) check(t *testing.T, last engine.Result, stats *livenessStats) {
	t.Helper()
	for _, q := range g.leaves {
		sq := g.s.snap.Queue(q)
		if sq == nil {
			continue
		}
		// Capacity held for the queue's own waiting gangs is the queue's: a gang of its own waiting
		// for its evictions uses the guarantee as surely as a running pod.
		held := g.held(q) + sq.Held.At(snapshot.DimGPU)
		for _, gang := range sq.PendingGangs {
			need := gangNeed(gang)
			own := int64(0)
			for _, h := range gang.Holds() {
				own += h.MilliGPU
			}
			if need == 0 || held-own+need > g.quota[q] {
				continue
			}
			stats.claims++
			if !g.probePlaceable(t, gang) {
				stats.unplaceable++
				continue
			}
			reason := ""
			for _, r := range last.Unschedulable {
				if r.Gang == gang.Key {
					reason = string(r.Code) + ": " + r.Message
				}
			}
			t.Errorf("queue %s holds %s of its %s guaranteed GPUs while gang %s, needing %s, still waits after %d cycles: %s",
				q, snapshot.FormatAmount(snapshot.DimGPU, held), snapshot.FormatAmount(snapshot.DimGPU, g.quota[q]), gang.Key,
				snapshot.FormatAmount(snapshot.DimGPU, need), livenessK, reason)
		}
	}
}

// probePlaceable reports whether the gang's minimum fits the cluster with only the pods nothing
// may take away for it kept where they are (non-preemptible pods, its own queue's pods, pods
// whose controller would not recreate them, pods within their queue's guarantee whose budget
// allows no disruption), after the other queues' recreatable pods within their guarantees are
// placed again, every one of them. One cycle of a fresh engine, one queue without limits,
// decides.
func (g *livenessGen) probePlaceable(t *testing.T, gang *snapshot.Gang) bool {
	p := newSim(engine.Options{StarvationThreshold: -1}, g.s.now)
	for _, name := range slices.Sorted(maps.Keys(g.s.nodes)) {
		mustNoErr(t, p.addNode(g.s.nodes[name].DeepCopy()))
	}
	mustNoErr(t, p.addQueue(testutil.MakeQueue("probe").Namespaces(g.leaves...).Obj()))
	// What other queues run within their guarantee must find room too: their recreatable pods,
	// up to the guarantee, go first (placed again, as moves would), largest first.
	inGuarantee := map[types.NamespacedName]bool{}
	byQueue := map[string][]types.NamespacedName{}
	for _, k := range slices.SortedFunc(maps.Keys(g.s.pods), cmpKey) {
		pod := g.s.pods[k]
		if pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning && podPreemptible(pod) && g.s.recreate[k] {
			byQueue[pod.Labels[v1alpha1.QueueLabel]] = append(byQueue[pod.Labels[v1alpha1.QueueLabel]], k)
		}
	}
	milliOf := func(k types.NamespacedName) int64 {
		info := snapshot.PodInfoFromPod(g.s.pods[k])
		return info.Req.WholeGPUs*snapshot.MilliPerGPU + max(0, info.Req.SharedMilli(0))
	}
	for q, keys := range byQueue {
		if q == gang.Queue.Name {
			continue
		}
		slices.SortStableFunc(keys, func(a, b types.NamespacedName) int { return int(milliOf(b) - milliOf(a)) })
		left := g.quota[q] - (g.held(q) - func() (v int64) {
			for _, k := range keys {
				v += milliOf(k)
			}
			return v
		}())
		for _, k := range keys {
			if m := milliOf(k); m <= left {
				inGuarantee[k] = true
				left -= m
			}
		}
	}
	// A pod within its queue's guarantee keeps the full protection of its PodDisruptionBudgets:
	// nothing may move it while one of them allows no disruption (the API server refuses, and
	// no budget timeout overrides it), so it stays where it is.
	pinned := map[types.NamespacedName]bool{}
	for k := range inGuarantee {
		if t := g.s.snap.Task(k); t != nil {
			for _, b := range t.Budgets {
				if !b.Gone() && b.Allowed <= 0 {
					pinned[k] = true
				}
			}
		}
	}
	moved := map[types.NamespacedName]bool{}
	for _, k := range slices.SortedFunc(maps.Keys(g.s.pods), cmpKey) {
		pod := g.s.pods[k]
		info := snapshot.PodInfoFromPod(pod)
		mine := info.Gang == gang.Key
		running := pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning
		keep := running && (!podPreemptible(pod) || pod.Labels[v1alpha1.QueueLabel] == gang.Queue.Name || !g.s.recreate[k] || pinned[k])
		cp := pod.DeepCopy()
		switch {
		case mine && !running && pod.Spec.NodeName == "":
		case keep:
		case pod.Status.Phase == corev1.PodSucceeded:
			// It takes nothing, and counts towards its gang's minimum as in the engine.
		case inGuarantee[k]:
			cp.Spec.NodeName = ""
			cp.Status = corev1.PodStatus{Phase: corev1.PodPending}
			delete(cp.Annotations, v1alpha1.GPUIndexAnnotation)
			cp.Spec.Priority = ptr(int32(1000))
			moved[k] = true
		default:
			continue
		}
		cp.Labels[v1alpha1.QueueLabel] = "probe"
		cp.Labels[v1alpha1.PreemptibilityLabel] = string(v1alpha1.Preemptible)
		mustNoErr(t, p.addPod(cp, false))
	}
	res, err := p.cycle()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	// The gang is placeable only where every moved pod found its room again: a placement that
	// leaves a pod within its queue's guarantee out is not one the engine may make.
	placed := false
	for _, b := range res.Bindings {
		delete(moved, b.Pod)
		placed = placed || b.Gang == gang.Key
	}
	return placed && len(moved) == 0
}
