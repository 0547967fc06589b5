package engine_test

// Peer-shaped benchmarks: the topologies of KAI-Scheduler's action benchmarks
// (pkg/scheduler/actions/benchmark_test.go) and of its reclaim benchmarks
// (pkg/scheduler/actions/integration_tests/reclaim), rebuilt here with the same nodes, queues and
// jobs and named after them, so that a reader can put the two side by side. The code is ours;
// only the shapes were read there.
//
// Each benchmark has two forms:
//
//   - decision: one cycle on a snapshot built once, its decisions undone between iterations
//     (runBench). This is the engine's own cost, what a warm scheduler pays per cycle.
//   - scratch: every iteration builds the snapshot from the Kubernetes objects (nodes, queues,
//     pods, built once outside the loop) and runs one full cycle with a new engine. This is the
//     work KAI's benchmarks time (they build the session inside every iteration).
//
// fairway has no separate actions: every iteration runs the whole cycle (allocate, stale gangs,
// reclaim, preempt, consolidate, lending, holds, reasons), so a KAI benchmark of one action is
// compared here with fairway's whole cycle on the same cluster. Every iteration checks the
// cycle's outcome exactly (counts of bindings, evictions by reason, nominations and waiting
// gangs) and that it made the same decisions as the first iteration.

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// peerTopology is a cluster as Kubernetes objects, with the outcome one cycle must have.
type peerTopology struct {
	nodes  []*corev1.Node
	queues []*v1alpha1.Queue
	pods   []*corev1.Pod
	want   outcome
}

// snapshot builds a snapshot from the objects as the runtime's rebuild does: sized for the
// objects, then nodes, queues and pods in that order.
func (t *peerTopology) snapshot(tb testing.TB) *snapshot.Snapshot {
	snap := snapshot.NewSized(len(t.nodes), len(t.pods))
	for _, n := range t.nodes {
		mustNoErr(tb, snap.UpsertNode(n))
	}
	for _, q := range t.queues {
		mustNoErr(tb, snap.UpsertQueue(q))
	}
	for _, p := range t.pods {
		mustNoErr(tb, snap.UpsertPod(p))
	}
	return snap
}

// benchPeer runs both forms of a peer-shaped benchmark.
func benchPeer(b *testing.B, build func() *peerTopology) {
	t := build()
	b.Run("decision", func(b *testing.B) {
		runBench(b, t.snapshot(b), func(res engine.Result) { t.want.check(b, res) })
	})
	b.Run("scratch", func(b *testing.B) { runScratch(b, t) })
}

// runScratch times snapshot building plus one cycle of a new engine, and checks every cycle
// (untimed).
func runScratch(b *testing.B, t *peerTopology) {
	same := sameDecisions()
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := processCPU()
		snap := t.snapshot(b)
		res := engine.New(engine.Options{}).Schedule(snap, benchNow)
		cpu += processCPU() - before
		b.StopTimer()
		t.want.check(b, res)
		same(b, res)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

const kaiGPUsPerNode = 8

// kaiNodes are n empty 8-GPU nodes named prefix<i>.
func kaiNodes(prefix string, n int) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = gpuNode(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// kaiLeaf is one leaf queue of KAI's topologies: a quota of GPUs (KAI's deserved GPUs), an
// over-quota weight and a parent ("" for none).
type kaiLeaf struct {
	name, parent string
	quota        int
	weight       int32
}

// kaiQueues builds departments (KAI's TestDepartmentBasic: a quota, the default weight) and
// leaves under them.
func kaiQueues(depts map[string]int, leaves []kaiLeaf) []*v1alpha1.Queue {
	var out []*v1alpha1.Queue
	for _, name := range slices.Sorted(maps.Keys(depts)) {
		out = append(out, testutil.MakeQueue(name).GPU(fmt.Sprint(depts[name]), -1, "").Obj())
	}
	for _, l := range leaves {
		out = append(out, testutil.MakeQueue(l.name).Parent(l.parent).GPU(fmt.Sprint(l.quota), l.weight, "").Obj())
	}
	return out
}

// fourQueues is the queue tree of most of KAI's action benchmarks: queue-0 and queue-1 under
// dept-a, queue-2 and queue-3 under dept-b; each department deserves half the cluster's GPUs,
// each queue a quarter, over-quota weight 1.
func fourQueues(nodes int) []*v1alpha1.Queue {
	total := nodes * kaiGPUsPerNode
	var leaves []kaiLeaf
	for i := range 4 {
		leaves = append(leaves, kaiLeaf{name: fmt.Sprintf("queue-%d", i), parent: []string{"dept-a", "dept-b"}[i/2], quota: total / 4, weight: 1})
	}
	return kaiQueues(map[string]int{"dept-a": total / 2, "dept-b": total / 2}, leaves)
}

// kaiJob is a 1-GPU pod of priority 50 (KAI's PriorityTrainNumber) asking 1 CPU and 1 GB, in
// the namespace its queue serves.
func kaiJob(queue, name string, gpus int) *testutil.PodWrapper {
	return benchPod(queue, name, queue, gpus)
}

// placer gives running pods the next free GPU indexes of their node, as the runtime records them.
type placer map[string]int

func (p placer) run(w *testutil.PodWrapper, node string, gpus int) *corev1.Pod {
	idx := make([]int, gpus)
	for i := range idx {
		idx[i] = p[node]
		p[node]++
	}
	return w.Node(node).GPUIndex(idx...).Started(benchNow.Add(-time.Hour)).Obj()
}

// allocateTopology is KAI's createBenchmarkTopology: nodes empty 8-GPU nodes, jobs pending 1-GPU
// jobs, job i in queue-(i mod 4). Every job fits: all are bound, nothing else happens.
func allocateTopology(nodes, jobs int) *peerTopology {
	t := &peerTopology{nodes: kaiNodes("node-", nodes), queues: fourQueues(nodes)}
	for i := range jobs {
		t.pods = append(t.pods, kaiJob(fmt.Sprintf("queue-%d", i%4), fmt.Sprintf("job-%d", i), 1).Obj())
	}
	t.want = outcome{Bindings: jobs}
	return t
}

// runningTopology is KAI's createBenchmarkTopologyWithRunningJobs (its reclaim benchmarks):
// jobs running 1-GPU jobs, job i on node-(i mod nodes) in queue-(i mod 4), and nothing pending.
// Every queue is within its quota and nothing waits: the cycle decides nothing.
func runningTopology(nodes, jobs int) *peerTopology {
	t := &peerTopology{nodes: kaiNodes("node-", nodes), queues: fourQueues(nodes)}
	at := placer{}
	for i := range jobs {
		t.pods = append(t.pods, at.run(kaiJob(fmt.Sprintf("queue-%d", i%4), fmt.Sprintf("job-%d", i), 1), fmt.Sprintf("node-%d", i%nodes), 1))
	}
	t.want = outcome{}
	return t
}

// mixedTopology is KAI's createBenchmarkTopologyWithMixedJobs (its preempt, consolidation and
// full-cycle benchmarks): the even jobs run (job i on node-(i mod nodes)), the odd ones wait;
// job i in queue-(i mod 4). The waiting half fits on free GPUs: all of it is bound.
func mixedTopology(nodes, jobs int) *peerTopology {
	t := &peerTopology{nodes: kaiNodes("node-", nodes), queues: fourQueues(nodes)}
	at := placer{}
	for i := range jobs {
		w := kaiJob(fmt.Sprintf("queue-%d", i%4), fmt.Sprintf("job-%d", i), 1)
		if i%2 == 0 {
			t.pods = append(t.pods, at.run(w, fmt.Sprintf("node-%d", i%nodes), 1))
			continue
		}
		t.pods = append(t.pods, w.Obj())
		t.want.Bindings++
	}
	return t
}

// manyQueuesTopology is KAI's createBenchmarkTopologyWithManyQueues: queues leaf queues, each
// deserving an equal part of the GPUs, spread over ceil(queues/4) departments that deserve an
// equal part each; job i pending in queue-(i mod queues). All are bound.
func manyQueuesTopology(nodes, jobs, queues int) *peerTopology {
	total := nodes * kaiGPUsPerNode
	depts := (queues + 3) / 4
	deptQuota := map[string]int{}
	for d := range depts {
		deptQuota[fmt.Sprintf("dept-%d", d)] = total / depts
	}
	var leaves []kaiLeaf
	for q := range queues {
		leaves = append(leaves, kaiLeaf{name: fmt.Sprintf("queue-%d", q), parent: fmt.Sprintf("dept-%d", q%depts), quota: total / queues, weight: 1})
	}
	t := &peerTopology{nodes: kaiNodes("node-", nodes), queues: kaiQueues(deptQuota, leaves)}
	for i := range jobs {
		t.pods = append(t.pods, kaiJob(fmt.Sprintf("queue-%d", i%queues), fmt.Sprintf("job-%d", i), 1).Obj())
	}
	t.want = outcome{Bindings: jobs}
	return t
}

// gangTopology is KAI's createBenchmarkTopologyWithGangJobs: jobs pending gangs of tasks 1-GPU
// pods each (all needed), job i in queue-(i mod 4). At 50 nodes, 100 gangs of 4 fill every GPU:
// all are bound.
func gangTopology(nodes, jobs, tasks int) *peerTopology {
	t := &peerTopology{nodes: kaiNodes("node-", nodes), queues: fourQueues(nodes)}
	for i := range jobs {
		q, g := fmt.Sprintf("queue-%d", i%4), fmt.Sprintf("job-%d", i)
		for j := range tasks {
			t.pods = append(t.pods, kaiJob(q, fmt.Sprintf("%s-%d", g, j), 1).PodGroup(g).MinMember(tasks).Obj())
		}
	}
	t.want = outcome{Bindings: jobs * tasks}
	return t
}

// reclaimLargeJobsTopology is KAI's BenchmarkReclaimLargeJobs: nodes full 8-GPU nodes, each GPU
// taken by a 1-GPU job of queue-0 (deserves 0, weight 0), job i on node(i mod nodes); one
// pending job of nodes/2 pods of 8 GPUs in queue-1, which deserves every GPU (weight 0). The job
// is nominated whole on nodes/2 nodes whose 8 pods each are reclaimed; KAI's benchmark asserts
// the same (every pod pipelined, nodes/2 x 8 victims releasing).
func reclaimLargeJobsTopology(nodes int) *peerTopology {
	t := &peerTopology{nodes: kaiNodes("node", nodes), queues: kaiQueues(nil, []kaiLeaf{
		{name: "queue-0", quota: 0, weight: 0}, {name: "queue-1", quota: nodes * kaiGPUsPerNode, weight: 0},
	})}
	at := placer{}
	for i := range nodes * kaiGPUsPerNode {
		t.pods = append(t.pods, at.run(kaiJob("queue-0", fmt.Sprintf("running-job-%d", i), 1), fmt.Sprintf("node%d", i%nodes), 1))
	}
	tasks := nodes / 2
	for i := range tasks {
		t.pods = append(t.pods, kaiJob("queue-1", fmt.Sprintf("very-large-job-%d", i), kaiGPUsPerNode).PodGroup("very-large-job").MinMember(tasks).Obj())
	}
	t.want = outcome{Evictions: tasks * kaiGPUsPerNode, Reclaimed: tasks * kaiGPUsPerNode, Nominations: 1, NominatedPods: tasks, Unschedulable: 1}
	return t
}

// reclaimManySingleGPUTopology is KAI's BenchmarkReclaimManySingleGPUJobsFullCycle: nodes full
// 8-GPU nodes, each GPU taken by a 1-GPU job of the running queue (deserves 0, weight 0); as
// many pending 1-GPU jobs in the pending queue, which deserves them all (weight 0). Every
// running job is reclaimed and every pending job nominated on its GPU; KAI's test of the
// topology asserts the same (one releasing task per running job, one pipelined per pending job).
func reclaimManySingleGPUTopology(nodes int) *peerTopology {
	const running, pending = "many-single-gpu-running-queue", "many-single-gpu-pending-queue"
	jobs := nodes * kaiGPUsPerNode
	t := &peerTopology{nodes: kaiNodes("node", nodes), queues: kaiQueues(nil, []kaiLeaf{
		{name: running, quota: 0, weight: 0}, {name: pending, quota: jobs, weight: 0},
	})}
	at := placer{}
	for i := range jobs {
		t.pods = append(t.pods, at.run(kaiJob(running, fmt.Sprintf("many-single-gpu-running-job-%d", i), 1), fmt.Sprintf("node%d", i%nodes), 1))
	}
	for i := range jobs {
		t.pods = append(t.pods, kaiJob(pending, fmt.Sprintf("many-single-gpu-pending-job-%d", i), 1).Obj())
	}
	t.want = outcome{Evictions: jobs, Reclaimed: jobs, Nominations: jobs, NominatedPods: jobs, Unschedulable: jobs}
	return t
}

// KAI's allocate benchmarks.

func BenchmarkAllocateAction_SmallCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return allocateTopology(10, 50) })
}

func BenchmarkAllocateAction_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return allocateTopology(50, 200) })
}

func BenchmarkAllocateAction_LargeCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return allocateTopology(100, 500) })
}

// KAI's reclaim benchmarks (running jobs only).

func BenchmarkReclaimAction_SmallCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return runningTopology(10, 50) })
}

func BenchmarkReclaimAction_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return runningTopology(50, 200) })
}

func BenchmarkReclaimAction_LargeCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return runningTopology(200, 1000) })
}

// KAI's preempt benchmarks (mixed jobs).

func BenchmarkPreemptAction_SmallCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(10, 50) })
}

func BenchmarkPreemptAction_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(50, 200) })
}

func BenchmarkPreemptAction_LargeCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(200, 1000) })
}

// KAI's consolidation benchmarks (mixed jobs).

func BenchmarkConsolidationAction_SmallCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(10, 50) })
}

func BenchmarkConsolidationAction_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(50, 200) })
}

// KAI's full-cycle benchmarks (mixed jobs, all actions in sequence).

func BenchmarkFullSchedulingCycle_SmallCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(10, 50) })
}

func BenchmarkFullSchedulingCycle_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(50, 200) })
}

func BenchmarkFullSchedulingCycle_LargeCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return mixedTopology(100, 500) })
}

func BenchmarkManyQueues_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return manyQueuesTopology(50, 200, 20) })
}

func BenchmarkGangScheduling_MediumCluster(b *testing.B) {
	benchPeer(b, func() *peerTopology { return gangTopology(50, 100, 4) })
}

// KAI's reclaim integration benchmarks at 500 nodes.

func BenchmarkReclaimLargeJobs_500Node(b *testing.B) {
	benchPeer(b, func() *peerTopology { return reclaimLargeJobsTopology(500) })
}

func BenchmarkReclaimManySingleGPUJobsFullCycle_500Node(b *testing.B) {
	benchPeer(b, func() *peerTopology { return reclaimManySingleGPUTopology(500) })
}

// TestPeerTopologiesDecide runs one cycle of every peer-shaped topology at its KAI size and
// checks the outcome and the snapshot's invariants, so that `go test` catches a topology whose
// outcome changed without running the benchmarks.
func TestPeerTopologiesDecide(t *testing.T) {
	for name, build := range map[string]func() *peerTopology{
		"AllocateAction_LargeCluster":                  func() *peerTopology { return allocateTopology(100, 500) },
		"ReclaimAction_LargeCluster":                   func() *peerTopology { return runningTopology(200, 1000) },
		"PreemptAction_LargeCluster":                   func() *peerTopology { return mixedTopology(200, 1000) },
		"ManyQueues_MediumCluster":                     func() *peerTopology { return manyQueuesTopology(50, 200, 20) },
		"GangScheduling_MediumCluster":                 func() *peerTopology { return gangTopology(50, 100, 4) },
		"ReclaimLargeJobs_500Node":                     func() *peerTopology { return reclaimLargeJobsTopology(500) },
		"ReclaimManySingleGPUJobsFullCycle_500Node":    func() *peerTopology { return reclaimManySingleGPUTopology(500) },
		"ReclaimManySingleGPUJobsFullCycle_10Node":     func() *peerTopology { return reclaimManySingleGPUTopology(10) },
		"AllocateAction_SmallCluster":                  func() *peerTopology { return allocateTopology(10, 50) },
		"FullSchedulingCycle_LargeCluster (100 nodes)": func() *peerTopology { return mixedTopology(100, 500) },
	} {
		t.Run(name, func(t *testing.T) {
			topo := build()
			snap := topo.snapshot(t)
			res := engine.New(engine.Options{}).Schedule(snap, benchNow)
			topo.want.check(t, res)
			mustNoErr(t, snap.Verify())
		})
	}
}

// BenchmarkReclaimLargeJobsHeld_500Node times the cycles after ReclaimLargeJobs_500Node's
// decision: the gang of 250 pods holds the 250 nodes its victims are leaving, and every cycle
// until they are gone tries its pods again on every node, asking what the gang holds on each.
// At 500 nodes this was two thirds of the scheduler's CPU in issue 37's reclaim-large, while
// the holds were summed per node by walking all of the gang's; the cycle must evict nothing more
// and keep the gang nominated.
func BenchmarkReclaimLargeJobsHeld_500Node(b *testing.B) {
	t := reclaimLargeJobsTopology(500)
	snap := t.snapshot(b)
	e := engine.New(engine.Options{})
	t.want.check(b, e.Schedule(snap, benchNow))
	want := outcome{Nominations: 1, NominatedPods: 250, Unschedulable: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := e.Schedule(snap, benchNow)
		b.StopTimer()
		want.check(b, res)
		b.StartTimer()
	}
}
