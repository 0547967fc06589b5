package runtime

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// BenchmarkIncrementalCycle times the cycle the runtime runs in a warm cluster: 1,000 8-GPU
// nodes and 20,000 running pods (6,000 of one GPU, 14,000 CPU-only) of 10 queues, then per
// iteration N informer deltas, then loop.cycle: draining the event queue, applying every changed
// object to the snapshot through loop.apply (the path the informers' events take), the engine's
// cycle, handing the bindings to the binder, housekeeping, status and metrics.
//
// The deltas are those of a cluster at a steady rate, in the proportions 3:3:3:1: pods created
// (pending; 30% ask for a GPU), pods bound by an earlier cycle that the informer now shows on
// their node, running pods that finished (deleted, oldest first), and nodes whose labels
// changed. The informers' part (storing the trimmed object, queueing its key, as their event
// handlers do) is not timed: it runs on the informers' goroutines, not the loop's.
//
// The binder's workers run against a fake clientset that accepts every call and records the
// bindings. Every iteration checks the outcome: every pod created in it was bound (the fake API
// server received exactly those bindings), nothing was evicted, and the snapshot holds exactly
// the pods the informer does.
func BenchmarkIncrementalCycle(b *testing.B) {
	c := newIncrementalCluster(b, 1000, 20)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("1000Nodes20kPods/deltas=%d", n), func(b *testing.B) { c.run(b, n) })
	}
}

// incrementalCluster is a runtime whose informer stores the benchmark writes by hand.
type incrementalCluster struct {
	rt  *Runtime
	l   *loop
	ctx context.Context
	clk *clocktesting.FakeClock

	nodes []*corev1.Node
	// running are the pods on nodes, oldest first; created counts the pods made so far.
	running []types.NamespacedName
	created int
	// delta counts the deltas made so far: its value picks the next one's kind.
	delta int
	// toConfirm are the bindings the fake API server received and the informer has not shown.
	toConfirm []*corev1.Binding

	mu        sync.Mutex
	bindings  []*corev1.Binding
	evictions int
}

const incrementalQueues = 10

func newIncrementalCluster(b *testing.B, nodes, podsPerNode int) *incrementalCluster {
	b.Helper()
	c := &incrementalCluster{clk: clocktesting.NewFakeClock(testutil.Epoch.Add(48 * time.Hour))}
	cs := fake.NewClientset()
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		if cr, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			c.mu.Lock()
			switch a.GetSubresource() {
			case "binding":
				c.bindings = append(c.bindings, cr.GetObject().(*corev1.Binding))
			case "eviction":
				c.evictions++
			}
			c.mu.Unlock()
		}
		return true, nil, nil
	})
	crd := crfake.NewClientBuilder().WithScheme(scheme()).Build()
	rt, err := New(Clients{Scheduling: cs, Status: cs, Events: cs, CRD: crd}, Options{StatusInterval: time.Hour, Clock: c.clk})
	if err != nil {
		b.Fatal(err)
	}
	c.rt, c.l = rt, rt.loop
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	c.ctx = ctx
	for _, run := range []func(context.Context) error{rt.binder.Start, rt.evictor.Start} {
		go func() { _ = run(ctx) }()
	}

	inf := rt.inf
	for q := range incrementalQueues {
		name := fmt.Sprintf("team-%d", q)
		mustAdd(b, inf.Queues.GetStore(), cache.TrimQueue(testutil.MakeQueue(name).GPU(fmt.Sprint(nodes*8/incrementalQueues), 1, "").Obj()))
	}
	for i := range nodes {
		n := cache.TrimNode(testutil.MakeNode(fmt.Sprintf("node-%04d", i)).GPUs(8, "H100").Obj())
		c.nodes = append(c.nodes, n)
		mustAdd(b, inf.Nodes.GetStore(), n)
	}
	// Pod i runs on node i mod nodes; of every 10 slots of a node, 3 hold a 1-GPU pod.
	gpuSlot := map[string]int{}
	for i := range nodes * podsPerNode {
		node := c.nodes[i%nodes].Name
		slot := i / nodes
		w := c.newPod(slot%10 < 3)
		if slot%10 < 3 {
			w.GPUIndex(gpuSlot[node])
			gpuSlot[node]++
		}
		p := cache.TrimPod(w.Node(node).Started(testutil.Epoch).Obj())
		mustAdd(b, inf.Pods.GetStore(), p)
		c.running = append(c.running, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
	c.l.rebuild()
	c.l.cycle(ctx)
	c.settle(b, 0)
	if got := c.l.snap.TaskCount(); got != nodes*podsPerNode {
		b.Fatalf("snapshot has %d pods, want %d", got, nodes*podsPerNode)
	}
	return c
}

func mustAdd(b *testing.B, s interface{ Add(any) error }, obj any) {
	if err := s.Add(obj); err != nil {
		b.Fatal(err)
	}
}

// newPod makes the next pod: a 1-GPU pod or a CPU-only one, of queue created mod 10, created now.
func (c *incrementalCluster) newPod(gpu bool) *testutil.PodWrapper {
	q := fmt.Sprintf("team-%d", c.created%incrementalQueues)
	w := testutil.MakePod(q, fmt.Sprintf("p-%d", c.created)).Queue(q).CPU("500m").Memory("1G").Priority(50).Created(c.clk.Now())
	if gpu {
		w.CPU("1").GPU(1)
	}
	c.created++
	return w
}

// The kinds of delta, picked in turn by incrementalPattern.
const (
	deltaCreate = iota
	deltaConfirm
	deltaFinish
	deltaNode
)

var incrementalPattern = [10]int{deltaCreate, deltaConfirm, deltaFinish, deltaCreate, deltaConfirm, deltaFinish, deltaCreate, deltaConfirm, deltaFinish, deltaNode}

// deltas makes n informer deltas, as the informers' event handlers would: the trimmed object
// stored, its key queued. It returns the pods created.
func (c *incrementalCluster) deltas(b *testing.B, n int) int {
	inf, q := c.rt.inf, c.rt.queue
	created := 0
	for range n {
		kind := incrementalPattern[c.delta%len(incrementalPattern)]
		c.delta++
		if kind == deltaConfirm && len(c.toConfirm) == 0 {
			kind = deltaNode
		}
		switch kind {
		case deltaCreate:
			p := cache.TrimPod(c.newPod(c.created%10 < 3).Obj())
			mustAdd(b, inf.Pods.GetStore(), p)
			q.Add(cache.Key{Kind: cache.KindPod, Namespace: p.Namespace, Name: p.Name}, true)
			created++
		case deltaConfirm:
			bd := c.toConfirm[0]
			c.toConfirm = c.toConfirm[1:]
			old := inf.Pod(bd.Namespace, bd.Name)
			if old == nil {
				b.Fatalf("bound pod %s/%s not in the informer", bd.Namespace, bd.Name)
			}
			p := *old
			p.Spec.NodeName = bd.Target.Name
			p.Status.Phase = corev1.PodRunning
			st := metav1.NewTime(c.clk.Now())
			p.Status.StartTime = &st
			if err := inf.Pods.GetStore().Update(&p); err != nil {
				b.Fatal(err)
			}
			q.Add(cache.Key{Kind: cache.KindPod, Namespace: p.Namespace, Name: p.Name}, true)
			c.running = append(c.running, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		case deltaFinish:
			k := c.running[0]
			c.running = c.running[1:]
			p := inf.Pod(k.Namespace, k.Name)
			if err := inf.Pods.GetStore().Delete(p); err != nil {
				b.Fatal(err)
			}
			q.Add(cache.Key{Kind: cache.KindPod, Namespace: k.Namespace, Name: k.Name}, true)
		case deltaNode:
			i := c.delta % len(c.nodes)
			n := c.nodes[i].DeepCopy()
			n.Labels["bench.fairway.dev/tick"] = fmt.Sprint(c.delta)
			c.nodes[i] = n
			if err := inf.Nodes.GetStore().Update(n); err != nil {
				b.Fatal(err)
			}
			q.Add(cache.Key{Kind: cache.KindNode, Name: n.Name}, true)
		}
	}
	return created
}

// settle waits for the binder to finish the cycle's bindings and checks the cycle's outcome:
// exactly the pods created were bound, nothing was evicted, and the snapshot has the informer's
// pods.
func (c *incrementalCluster) settle(b *testing.B, created int) {
	deadline := time.Now().Add(10 * time.Second)
	for c.rt.binder.InFlight() > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d bindings still in flight after 10s", c.rt.binder.InFlight())
		}
		time.Sleep(20 * time.Microsecond)
	}
	c.mu.Lock()
	bound, evicted := c.bindings, c.evictions
	c.bindings = nil
	c.mu.Unlock()
	if len(bound) != created || evicted != 0 {
		b.Fatalf("cycle bound %d pods and evicted %d, want the %d pods just created bound and nothing evicted", len(bound), evicted, created)
	}
	c.toConfirm = append(c.toConfirm, bound...)
	if got, want := c.l.snap.TaskCount(), len(c.rt.inf.Pods.GetStore().ListKeys()); got != want {
		b.Fatalf("snapshot has %d pods, the informer %d", got, want)
	}
}

func (c *incrementalCluster) run(b *testing.B, n int) {
	// One untimed round first: the confirmations of the previous run's bindings come due.
	c.settle(b, c.cycle(b, n))
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		created := c.deltas(b, n)
		c.clk.Step(100 * time.Millisecond)
		b.StartTimer()
		before := incrementalCPU()
		c.l.cycle(c.ctx)
		cpu += incrementalCPU() - before
		b.StopTimer()
		c.settle(b, created)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cycle makes n deltas and runs one cycle, untimed; it returns the pods created.
func (c *incrementalCluster) cycle(b *testing.B, n int) int {
	created := c.deltas(b, n)
	c.clk.Step(100 * time.Millisecond)
	c.l.cycle(c.ctx)
	return created
}

// incrementalCPU is the CPU the process spent (all threads), as the engine's benchmarks report
// it: it includes the binder's workers, which run while the loop cycles.
func incrementalCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
