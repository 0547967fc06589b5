package engine_test

import (
	"fmt"
	"hash/fnv"
	"io"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// Benchmarks time one whole cycle, snapshot to decisions; building the snapshot is not timed
// (peer_bench_test.go has benchmarks that time it too). Between iterations the cycle's decisions
// are undone through the runtime's own calls (Forget, CancelEviction) so every iteration
// schedules the same cluster, and every iteration's outcome is checked: exact counts, and the
// same decisions as the first iteration's.

var benchNow = testutil.Epoch.Add(48 * time.Hour)

// mustNoErr fails tb on err. Helper is called only then: it walks the stack (runtime.Callers),
// which inside the scratch benchmarks' loops, once per object, was 4% of the time they report.
func mustNoErr(tb testing.TB, err error) {
	if err != nil {
		tb.Helper()
		tb.Fatal(err)
	}
}

// gpuNode is an 8-GPU node sized so that 8 pods of 1 CPU and 1 GB always fit beside their GPUs.
func gpuNode(name string) *corev1.Node {
	return testutil.MakeNode(name).GPUs(8, "H100").Obj()
}

// benchPod is a 1-GPU pod asking 1 CPU and 1 GB, as in KAI-Scheduler's action benchmarks.
func benchPod(ns, name, queue string, gpus int) *testutil.PodWrapper {
	return testutil.MakePod(ns, name).Queue(queue).GPU(gpus).CPU("1").Memory("1G").Priority(50)
}

// undo reverts a cycle's decisions.
func undo(tb testing.TB, snap *snapshot.Snapshot, res engine.Result) {
	for _, b := range res.Bindings {
		mustNoErr(tb, snap.Forget(b.Pod))
	}
	for _, e := range res.Evictions {
		mustNoErr(tb, snap.CancelEviction(e.Pod))
	}
	for _, n := range res.Nominations {
		snap.ClearHolds(snap.Gang(n.Gang))
	}
	// The eviction memory forgets cancelled evictions at its next use (snapshot/evicted.go),
	// which would be the next, timed cycle: use it here, untimed. A real cycle settles only the
	// evictions the API server refused, not a whole reclaim's.
	snap.EvictedForAny(snapshot.GangKey{})
}

// runBench times Schedule. Besides wall time it reports cpu-ns/op, the CPU the process spent
// per cycle (getrusage, all threads: the cycle and the garbage collector), which stays
// meaningful when other work on the machine inflates wall time.
func runBench(b *testing.B, snap *snapshot.Snapshot, check func(engine.Result)) {
	e := engine.New(engine.Options{})
	same := sameDecisions()
	res := e.Schedule(snap, benchNow)
	check(res)
	same(b, res)
	undo(b, snap, res)
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := processCPU()
		res = e.Schedule(snap, benchNow)
		cpu += processCPU() - before
		b.StopTimer()
		check(res)
		same(b, res)
		undo(b, snap, res)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// outcome is what a benchmark's cycle must decide, counted.
type outcome struct {
	Bindings, Evictions, Nominations int
	// Reclaimed and Preempted count the evictions for reclaim and for preemption.
	Reclaimed, Preempted int
	// NominatedPods is the sum of the nominations' pods.
	NominatedPods int
	// Unschedulable is the number of gangs still waiting after the cycle.
	Unschedulable int
}

func outcomeOf(res engine.Result) outcome {
	o := outcome{Bindings: len(res.Bindings), Evictions: len(res.Evictions), Nominations: len(res.Nominations), Unschedulable: len(res.Unschedulable)}
	for _, n := range res.Nominations {
		o.NominatedPods += n.Pods
	}
	for _, e := range res.Evictions {
		switch e.Reason {
		case engine.EvictReclaim:
			o.Reclaimed++
		case engine.EvictPreempt:
			o.Preempted++
		}
	}
	return o
}

// check fails tb unless res is exactly the outcome.
func (want outcome) check(tb testing.TB, res engine.Result) {
	tb.Helper()
	if got := outcomeOf(res); got != want {
		tb.Fatalf("cycle decided %+v, want %+v", got, want)
	}
}

// sameDecisions returns a check that every cycle it is given decides what the first one did:
// the same pods bound to the same nodes and GPUs, evicted for the same reasons and gangs, the
// same gangs nominated. Every iteration of a benchmark schedules the same cluster, and the engine
// is deterministic, so a difference is a bug (in the engine, or in the benchmark's undo).
func sameDecisions() func(testing.TB, engine.Result) {
	var first uint64
	seen := false
	return func(tb testing.TB, res engine.Result) {
		tb.Helper()
		d := decisionDigest(res)
		if !seen {
			first, seen = d, true
			return
		}
		if d != first {
			tb.Fatalf("the cycle decided differently from the first iteration's (digest %x, first %x): %+v", d, first, outcomeOf(res))
		}
	}
}

func decisionDigest(res engine.Result) uint64 {
	h := fnv.New64a()
	w := func(fields ...string) {
		for _, f := range fields {
			_, _ = io.WriteString(h, f)
			_, _ = h.Write([]byte{0})
		}
	}
	for _, x := range res.Bindings {
		w("B", x.Pod.String(), x.Node)
		for _, g := range x.GPUs {
			w(strconv.Itoa(g.Index))
		}
		if x.Shared != nil {
			w("shared", strconv.Itoa(x.Shared.Index), strconv.FormatInt(x.Shared.MilliGPU, 10))
		}
	}
	for _, x := range res.Evictions {
		w("E", x.Pod.String(), x.Node, string(x.Reason))
		if x.Beneficiary != nil {
			w(x.Beneficiary.String())
		}
	}
	for _, x := range res.Nominations {
		w("N", x.Gang.String(), strconv.Itoa(x.Pods))
		w(x.Nodes...)
	}
	for _, x := range res.Unschedulable {
		w("U", x.Gang.String(), string(x.Code))
	}
	return h.Sum64()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocateCluster: 100 empty 8-GPU nodes, 500 pending 1-pod 1-GPU jobs; two departments with
// two leaf projects each, each leaf guaranteed a quarter of the cluster, weight 1; job i in
// project i mod 4.
func allocateCluster(tb testing.TB) *snapshot.Snapshot {
	snap := snapshot.New()
	for i := range 100 {
		mustNoErr(tb, snap.UpsertNode(gpuNode(fmt.Sprintf("node-%03d", i))))
	}
	for d := range 2 {
		mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue(fmt.Sprintf("dept-%d", d)).Obj()))
		for p := range 2 {
			mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue(fmt.Sprintf("proj-%d", 2*d+p)).Parent(fmt.Sprintf("dept-%d", d)).GPU("200", 1, "").Obj()))
		}
	}
	for i := range 500 {
		q := fmt.Sprintf("proj-%d", i%4)
		mustNoErr(tb, snap.UpsertPod(benchPod(q, fmt.Sprintf("job-%03d", i), q, 1).Obj()))
	}
	return snap
}

func BenchmarkAllocate100Nodes500Jobs(b *testing.B) {
	want := outcome{Bindings: 500}
	runBench(b, allocateCluster(b), func(res engine.Result) { want.check(b, res) })
}

// reclaimLargeJobCluster: 500 8-GPU nodes full of 4000 1-GPU pods of a queue without quota; one
// pending gang of 250 pods x 8 GPUs in a queue whose quota covers it.
func reclaimLargeJobCluster(tb testing.TB) *snapshot.Snapshot {
	snap := snapshot.New()
	mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue("borrower").GPU("0", 1, "").Obj()))
	mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue("owner").GPU("2000", 1, "").Obj()))
	for i := range 500 {
		node := fmt.Sprintf("node-%03d", i)
		mustNoErr(tb, snap.UpsertNode(gpuNode(node)))
		for j := range 8 {
			p := benchPod("borrower", fmt.Sprintf("b-%03d-%d", i, j), "borrower", 1).Node(node).GPUIndex(j).Started(benchNow.Add(-time.Hour))
			mustNoErr(tb, snap.UpsertPod(p.Obj()))
		}
	}
	for i := range 250 {
		p := benchPod("owner", fmt.Sprintf("big-%03d", i), "owner", 8).PodGroup("big").MinMember(250)
		mustNoErr(tb, snap.UpsertPod(p.Obj()))
	}
	return snap
}

func BenchmarkReclaimLargeJob500Nodes(b *testing.B) {
	want := outcome{Evictions: 2000, Reclaimed: 2000, Nominations: 1, NominatedPods: 250, Unschedulable: 1}
	runBench(b, reclaimLargeJobCluster(b), func(res engine.Result) { want.check(b, res) })
}

// reclaim8000Cluster: 500 8-GPU nodes, 4000 running and 4000 pending 1-GPU jobs over 10 queues
// with unequal quotas and weights; the running jobs are spread far from the fair shares.
var (
	reclaimQuotas   = []int{0, 100, 200, 300, 400, 500, 600, 700, 0, 0}
	reclaimWeights  = []int32{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}
	reclaimRunning  = []int{400, 100, 100, 100, 100, 100, 100, 100, 1400, 1500}
	reclaimPending  = 400
	reclaimNodeSize = 8
)

func reclaim8000Cluster(tb testing.TB, nodes int) *snapshot.Snapshot {
	snap := snapshot.New()
	scale := float64(nodes) / 500
	for q := range reclaimQuotas {
		name := fmt.Sprintf("q%d", q)
		mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue(name).GPU(fmt.Sprint(int(float64(reclaimQuotas[q])*scale)), reclaimWeights[q], "").Obj()))
	}
	node, slot := 0, 0
	for i := range nodes {
		mustNoErr(tb, snap.UpsertNode(gpuNode(fmt.Sprintf("node-%03d", i))))
	}
	for q, n := range reclaimRunning {
		name := fmt.Sprintf("q%d", q)
		for j := range int(float64(n) * scale) {
			p := benchPod(name, fmt.Sprintf("run-%04d", j), name, 1).Node(fmt.Sprintf("node-%03d", node)).GPUIndex(slot).
				Started(benchNow.Add(-time.Duration(j%60) * time.Minute))
			mustNoErr(tb, snap.UpsertPod(p.Obj()))
			if slot++; slot == reclaimNodeSize {
				node, slot = node+1, 0
			}
		}
		for j := range int(float64(reclaimPending) * scale) {
			mustNoErr(tb, snap.UpsertPod(benchPod(name, fmt.Sprintf("wait-%04d", j), name, 1).Obj()))
		}
	}
	return snap
}

// reclaim8000Outcome is what the first cycle on reclaim8000Cluster(500) decides. The cluster has
// no peer and no outcome to derive by hand: the counts are the engine's, recorded, so that a
// change of decision fails the benchmark instead of changing its time;
// TestBenchmarkClustersDecide checks that the decisions lead to the fair shares.
var reclaim8000Outcome = outcome{Evictions: 2700, Reclaimed: 2700, Nominations: 2700, NominatedPods: 2700, Unschedulable: 4000}

func BenchmarkReclaim500Nodes8000Jobs(b *testing.B) {
	want := reclaim8000Outcome
	runBench(b, reclaim8000Cluster(b, 500), func(res engine.Result) { want.check(b, res) })
}

// bigCluster: 4000 8-GPU nodes (128 CPUs each), 50 queues guaranteed 600 GPUs each, and 140,000
// pods: 28,000 running 1-GPU pods fill 3,500 nodes and 16,000 running 0.25-GPU notebooks share
// the 4,000 GPUs of the other 500; 92,000 running CPU-only pods (0.5 CPU) spread over all nodes;
// 4,000 pending pods (1-GPU pods, 0.5 fractions, 2-pod gangs of 8 GPUs, CPU pods). Every GPU is
// taken. Queues q00-q04 run nothing and are below their fair share: their 50 pending pods
// reclaim (about 110 GPUs) from the 45 busy queues, which sit slightly above theirs and whose own
// pending pods wait. With skew in the quotas or weights more of the busy queues reclaim from each
// other; see the closing note of the engine work for how a cycle that evicts thousands fares.
func bigCluster(tb testing.TB) *snapshot.Snapshot {
	snap := snapshot.New()
	const queues = 50
	for q := range queues {
		mustNoErr(tb, snap.UpsertQueue(testutil.MakeQueue(fmt.Sprintf("q%02d", q)).GPU("600", 1, "").Obj()))
	}
	for i := range 4000 {
		mustNoErr(tb, snap.UpsertNode(testutil.MakeNode(fmt.Sprintf("node-%04d", i)).GPUs(8, "H100").Allocatable(corev1.ResourceCPU, "128").Obj()))
	}
	pod := 0
	add := func(p *testutil.PodWrapper) {
		mustNoErr(tb, snap.UpsertPod(p.Obj()))
		pod++
	}
	busy := func(i int) string { return fmt.Sprintf("q%02d", 5+i%(queues-5)) } // queues that run work
	started := func(i int) time.Time { return benchNow.Add(-time.Duration(1+i%600) * time.Minute) }
	for n := range 3500 {
		for g := range 8 {
			q := busy(n*8 + g)
			add(benchPod(q, fmt.Sprintf("w-%d", pod), q, 1).Node(fmt.Sprintf("node-%04d", n)).GPUIndex(g).Started(started(pod)))
		}
	}
	for n := 3500; n < 4000; n++ {
		for g := range 8 {
			for k := range 4 {
				q := busy(n*32 + g*4 + k)
				add(testutil.MakePod(q, fmt.Sprintf("f-%d", pod)).Queue(q).Fraction("0.25").CPU("1").Memory("1G").Priority(100).
					Node(fmt.Sprintf("node-%04d", n)).GPUIndex(g).Started(started(pod)))
			}
		}
	}
	for n := range 4000 {
		for k := range 23 {
			q := busy(n + k)
			add(testutil.MakePod(q, fmt.Sprintf("c-%d", pod)).Queue(q).CPU("500m").Memory("1G").Priority(50).
				Node(fmt.Sprintf("node-%04d", n)).Started(started(pod)))
		}
	}
	for i := range 4000 {
		// Blocks of 10 pods per queue, so that both pods of a gang share a namespace.
		q := fmt.Sprintf("q%02d", 5+(i/10)%(queues-5))
		if i < 50 {
			q = fmt.Sprintf("q%02d", i/10)
		}
		var p *testutil.PodWrapper
		switch i % 10 {
		case 0, 1, 2, 3, 4, 5:
			p = benchPod(q, fmt.Sprintf("p-%d", i), q, 1)
		case 6, 7:
			p = benchPod(q, fmt.Sprintf("p-%d", i), q, 8).PodGroup(fmt.Sprintf("g-%d", i/2)).MinMember(2)
		case 8:
			p = testutil.MakePod(q, fmt.Sprintf("p-%d", i)).Queue(q).Fraction("0.5").CPU("1").Memory("1G").Priority(100)
		default:
			p = testutil.MakePod(q, fmt.Sprintf("p-%d", i)).Queue(q).CPU("2").Memory("4G").Priority(50)
		}
		add(p)
	}
	if snap.TaskCount() != 140000 {
		tb.Fatalf("%d pods, want 140000", snap.TaskCount())
	}
	return snap
}

// bigClusterOutcome is what the first cycle on bigCluster decides, recorded as
// reclaim8000Outcome is: 115 evictions reclaim for the five idle queues, 395 preempt within the
// busy ones, 400 pods are bound and 435 gangs nominated; 3,200 gangs wait.
var bigClusterOutcome = outcome{Bindings: 400, Evictions: 510, Reclaimed: 115, Preempted: 395, Nominations: 435, NominatedPods: 440, Unschedulable: 3200}

func BenchmarkCycle4000Nodes140kPods(b *testing.B) {
	snap := bigCluster(b)
	want := bigClusterOutcome
	runBench(b, snap, func(res engine.Result) { want.check(b, res) })
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	runtime.KeepAlive(snap)
}

// TestBenchmarkClustersDecide checks what the benchmarks' cycles decide, beyond their own quick
// checks: the scaled-down 8000-job cluster reaches its fair shares and stays there.
func TestBenchmarkClustersDecide(t *testing.T) {
	snap := reclaim8000Cluster(t, 50)
	eng, now := engine.New(engine.Options{}), benchNow
	quiet := 0
	for cycle := 0; cycle < 20 && quiet < 2; cycle++ {
		res := eng.Schedule(snap, now)
		mustNoErr(t, snap.Verify())
		if len(res.Bindings)+len(res.Evictions)+len(res.Nominations) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		// The runtime's part: bindings are confirmed, evicted pods go and come back pending.
		for _, e := range res.Evictions {
			task := snap.Task(e.Pod)
			snap.DeletePod(e.Pod)
			mustNoErr(t, snap.UpsertPod(benchPod(e.Pod.Namespace, e.Pod.Name+"r", task.Gang.Queue.Name, 1).Obj()))
		}
		now = now.Add(time.Minute)
	}
	if quiet < 2 {
		t.Fatal("did not settle in 20 cycles")
	}
	for _, q := range snap.Queues() {
		fair, held := q.FairShare.At(snapshot.DimGPU), q.Allocated.At(snapshot.DimGPU)
		if q.PendingPods > 0 && held < fair-snapshot.MilliPerGPU {
			t.Errorf("queue %s holds %d milli-GPU, more than a GPU below its fair share %d, while %d pods wait", q.Name, held, fair, q.PendingPods)
		}
	}
}
