package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// Scenario is one spec of KAI's suite.
type Scenario struct {
	// Name is the scenario's key (Options.Scenarios, the bench's -scenarios).
	Name string
	// Title is what KAI's suite calls it.
	Title string
	// KAI is KAI's published figure (docs/scale-tests/public/2026-03-03/report.json, 500 nodes),
	// as issue 37 quotes it; 0 where the report has none, or where KAI did not finish.
	KAI time.Duration
	// KAINote says what KAI's report says instead of a figure, where it has none.
	KAINote string
	run     func(ctx context.Context, e *env) (Result, error)
}

// Result is a scenario's figure, by KAI's definition, and what its measured window cost.
type Result struct {
	Name   string
	Figure time.Duration
	// Detail says what was placed, evicted or answered.
	Detail string
	Usage
}

// Scenarios are KAI's specs in the order its Ordered suite plays them.
var Scenarios = []Scenario{
	{Name: "topology-preferred", Title: "Allocate single distributed job with preferred topology", KAI: 11*time.Minute + 5*time.Second, run: topologyPreferred},
	{Name: "topology-none", Title: "Allocate single distributed job without preferred topology", KAI: 10*time.Minute + time.Second, run: topologyNone},
	{Name: "fill-off", Title: "Fill Cluster with single GPU Jobs (scheduler disabled during job creation)", KAI: 13*time.Minute + 58*time.Second, run: fillOff},
	{Name: "fill-on", Title: "Fill Cluster with single GPU Jobs - scheduler is running while submitting jobs", KAI: 25*time.Minute + 56*time.Second, run: fillOn},
	{Name: "pending-background", Title: "Fill Cluster with single GPU Jobs with pending tasks in background", KAI: 16*time.Minute + 22*time.Second, run: pendingBackground},
	{Name: "reclaim-impossible", Title: "Average time to unschedulable for distributed job", KAI: 9120 * time.Millisecond, run: reclaimImpossible},
	{Name: "reclaim-large", Title: "Reclaim time for one very large job (single-GPU reclaimees)", KAI: 51800 * time.Millisecond, run: reclaimLarge},
	{Name: "reclaim-floor", Title: "Not KAI's: reclaim-large's API work done by the harness, no scheduler", KAINote: "the machine's floor for reclaim-large", run: reclaimFloor},
	{Name: "reclaim-single", Title: "Measuring reclaim time for single GPU", KAI: 4210 * time.Millisecond, run: reclaimSingle},
	{Name: "reclaim-many", Title: "Reclaim single GPU Jobs (as many as the cluster's GPUs)", KAINote: "not in the issue's table", run: reclaimMany},
	{Name: "reclaim-distributed", Title: "Multi Node Reclaim for distributed jobs", KAINote: "failed: 326 of 500 pods in 90 min", run: reclaimDistributed},
	{Name: "reclaim-full-node", Title: "Reclaim time for one very large job (full-node reclaimees)", KAINote: "not in the issue's table", run: reclaimFullNode},
}

// Run plays the scenarios o names (all by default) on c, a cluster started with ClusterConfig
// and no nodes, and returns each one's result. It stops at the first scenario whose outcome is
// wrong, since the later ones start from the state the earlier ones leave, and returns the
// results so far with the error.
func Run(ctx context.Context, c *cluster.Cluster, o Options) ([]Result, error) {
	if o.Nodes <= 0 {
		o.Nodes = 500
	}
	if o.Nodes < 20 {
		return nil, fmt.Errorf("nodes: %d is too few: the suite's gangs are of 10 nodes, and its impossible gang needs the cluster to hold more than 10 nodes", o.Nodes)
	}
	if o.Samples <= 0 {
		o.Samples = 10
	}
	for _, name := range o.Scenarios {
		if !slices.ContainsFunc(Scenarios, func(s Scenario) bool { return s.Name == name }) {
			return nil, fmt.Errorf("scenario %q: no such scenario (see scale.Scenarios)", name)
		}
	}
	if o.Binary == "" {
		dir, err := os.MkdirTemp("", "fairway-scale-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if o.Binary, err = fairwayproc.Build(ctx, dir); err != nil {
			return nil, err
		}
	}
	e, err := newEnv(ctx, c, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.stopScheduler() }()

	var out []Result
	play := func(names ...string) error {
		for _, s := range Scenarios {
			if !slices.Contains(names, s.Name) || (len(o.Scenarios) > 0 && !slices.Contains(o.Scenarios, s.Name)) {
				continue
			}
			e.logf("%s: %s", s.Name, s.Title)
			r, err := s.run(ctx, e)
			r.Name = s.Name
			if err != nil {
				return fmt.Errorf("scenario %s: %w", s.Name, err)
			}
			e.logf("%s: %v (%s); scheduler CPU %.1fs, peak RSS %d MiB; control plane CPU %.1fs",
				s.Name, r.Figure.Round(time.Millisecond), r.Detail, r.SchedCPU, r.SchedRSSMiB, r.PlaneCPU)
			e.logf("%s: API requests in the window: %s; the scheduler's own: %s", s.Name, r.Requests, r.SchedRequests)
			out = append(out, r)
		}
		return nil
	}
	if e.wants("topology-preferred", "topology-none") {
		pool, levels := topologyPool(o.Nodes)
		e.logf("topology: %d nodes (%s)", pool.Count, levels)
		if err := e.addNodes(ctx, pool); err != nil {
			return out, err
		}
		if err := play("topology-preferred", "topology-none"); err != nil {
			return out, err
		}
		if err := e.deleteNodes(ctx); err != nil {
			return out, err
		}
	}
	e.logf("big cluster: %d nodes of %d GPUs", o.Nodes, GPUsPerNode)
	if err := e.addNodes(ctx, bigPool(o.Nodes)); err != nil {
		return out, err
	}
	if err := play("fill-off", "fill-on", "pending-background"); err != nil {
		return out, err
	}
	// KAI's Reclaim context: the sanity queue deserves nothing and has weight 0 from here on.
	if err := e.setGPU(ctx, queueSanity, gpuQuota{quota: ptr.To[int64](0), weight: ptr.To[int32](0)}); err != nil {
		return out, err
	}
	err = play("reclaim-impossible", "reclaim-large", "reclaim-floor", "reclaim-single", "reclaim-many", "reclaim-distributed", "reclaim-full-node")
	return out, err
}

func newEnv(ctx context.Context, c *cluster.Cluster, o Options) (*env, error) {
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: c.Scheme()})
	if err != nil {
		return nil, err
	}
	e := &env{o: o, c: c, cs: cs, cl: cl}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	e.pprof = fmt.Sprintf("127.0.0.1:%d", port)
	if err := fairwayproc.EnsureSystem(ctx, c, fairwayproc.DefaultNamespace); err != nil {
		return nil, err
	}
	if e.watch, err = startWatch(ctx, cs); err != nil {
		return nil, err
	}
	if err := e.setupQueues(ctx); err != nil {
		return nil, err
	}
	return e, e.startScheduler(ctx)
}

func (e *env) wants(names ...string) bool {
	if len(e.o.Scenarios) == 0 {
		return true
	}
	return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(e.o.Scenarios, n) })
}

// timeout bounds every wait for the scheduler: KAI's is 90 minutes (maxFlowTimeoutMinutes).
func (e *env) timeout() time.Duration { return 30 * time.Minute }

// bigPool is KAI's base_kwok_managed_nodepool.yaml with 8 GPUs a node (its fake GPU operator's
// gpuCount): 32 CPUs, 256 GiB, 110 pods, labels type=kwok (the pods' required affinity),
// kubernetes.io/role=agent and the simulated GPU pool's.
func bigPool(nodes int) cluster.NodePool {
	return cluster.NodePool{Name: "kwok-node", Count: nodes, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3",
		GPUsPerNode: GPUsPerNode, GPUMemoryMiB: 81559, CPU: "32", Memory: "256Gi", Pods: 110,
		Labels:      map[string]string{"kubernetes.io/role": "agent", "run.ai/simulated-gpu-node-pool": "default"},
		Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}
}

// fillResult is one fill of the cluster with one-pod Jobs.
type fillResult struct {
	start, end time.Time
	jobs       int
	Usage
}

// fill is KAI's fillClusterWithJobs: as many one-pod Jobs of gpus GPUs in queue as the cluster
// has room for; with off, the scheduler is stopped while they are created and the clock starts
// when it starts again, else the clock starts before the first Job. The clock stops when every
// pod is bound; fill returns when every pod also runs (the reclaims start from a full cluster of
// running jobs, KAI's "running jobs": kwok may still be starting the last ones, and its backlog
// would delay the first evictions' ends), and checks that no node holds more GPUs than it has.
func (e *env) fill(ctx context.Context, name, queue string, gpus int, off bool) (fillResult, error) {
	r := fillResult{jobs: e.o.Nodes * GPUsPerNode / gpus}
	var m *meter
	if off {
		if err := e.stopScheduler(); err != nil {
			return r, err
		}
	} else {
		r.start, m = time.Now(), e.begin(name)
	}
	err := e.createJobs(ctx, queue, r.jobs, gpus)
	if err == nil {
		err = e.watch.waitCreated(ctx, queue, r.jobs, e.timeout())
	}
	if err != nil {
		if m != nil {
			m.end()
		}
		return r, fmt.Errorf("creating %d Jobs in %s: %w", r.jobs, queue, err)
	}
	if off {
		r.start, m = time.Now(), e.begin(name)
		if err := e.startScheduler(ctx); err != nil {
			m.end()
			return r, err
		}
	}
	end, err := e.watch.waitBound(ctx, queue, r.jobs, nil, e.timeout())
	r.end, r.Usage = end, m.end()
	if err == nil {
		err = e.watch.waitRunning(ctx, queue, r.jobs, e.timeout())
	}
	if err != nil {
		return r, fmt.Errorf("%w\n%s", err, e.schedTail())
	}
	return r, e.checkNodes()
}

func fillOff(ctx context.Context, e *env) (Result, error) { return basic(ctx, e, "fill-off", true) }
func fillOn(ctx context.Context, e *env) (Result, error)  { return basic(ctx, e, "fill-on", false) }

// basic is KAI's basicScaleTest: fill the cluster with one-GPU Jobs of the sanity queue.
func basic(ctx context.Context, e *env, name string, off bool) (Result, error) {
	f, err := e.fill(ctx, name, queueSanity, 1, off)
	if err != nil {
		return Result{}, err
	}
	r := Result{Figure: f.end.Sub(f.start), Usage: f.Usage, Detail: fmt.Sprintf("%d one-GPU jobs bound", f.jobs)}
	return r, e.cleanup(ctx, queueSanity)
}

// pendingBackground is KAI's "schedules jobs with pending tasks in background": one-GPU Jobs in
// the no-quota queue (limit 0), which must all stay pending with reason QueueLimit, then the
// scheduler-off fill. KAI creates 400 whatever its node count; here a tenth of the cluster's
// GPUs, 400 at 500 nodes.
func pendingBackground(ctx context.Context, e *env) (Result, error) {
	bg := e.o.Nodes * GPUsPerNode / 10
	if err := e.createJobs(ctx, queueNoQuota, bg, 1); err != nil {
		return Result{}, err
	}
	if err := e.watch.waitCreated(ctx, queueNoQuota, bg, e.timeout()); err != nil {
		return Result{}, err
	}
	f, err := e.fill(ctx, "pending-background", queueSanity, 1, true)
	if err != nil {
		return Result{}, err
	}
	// Waiting pods' status is written every --status-update-interval (2 s by default).
	var bound, reasoned int
	if err := poll(ctx, 500*time.Millisecond, 2*time.Minute, "every background pod to wait with reason QueueLimit", func() (bool, error) {
		bound, reasoned = 0, 0
		for _, p := range e.watch.pods(queueNoQuota) {
			if p.Spec.NodeName != "" {
				bound++
			}
			if podReason(p) == fairwayv1.ReasonQueueLimit {
				reasoned++
			}
		}
		if bound > 0 {
			return false, fmt.Errorf("%w: %d pods of queue %s (limit 0) were bound", errOutcome, bound, queueNoQuota)
		}
		return reasoned == bg, nil
	}); err != nil {
		return Result{}, fmt.Errorf("%w (%d of %d with the reason)", err, reasoned, bg)
	}
	r := Result{Figure: f.end.Sub(f.start), Usage: f.Usage,
		Detail: fmt.Sprintf("%d one-GPU jobs bound; %d background jobs of a limit-0 queue pending with reason %s", f.jobs, bg, fairwayv1.ReasonQueueLimit)}
	return r, e.cleanup(ctx, leafQueues...)
}

// podReason is the reason code of a waiting pod's PodScheduled condition, "" without one.
func podReason(p *corev1.Pod) fairwayv1.UnschedulableReason {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			r, _, _ := fairwayv1.ParsePodScheduledMessage(c.Message)
			return r
		}
	}
	return ""
}

// checkNodes fails when a node holds more GPUs than it has, or a queue with a limit holds more
// than its limit (the no-quota queue's is 0).
func (e *env) checkNodes() error {
	perNode := map[string]int64{}
	for _, ns := range leafQueues {
		for _, p := range e.watch.pods(ns) {
			if p.Spec.NodeName != "" {
				perNode[p.Spec.NodeName] += podGPUs(p)
				if ns == queueNoQuota {
					return fmt.Errorf("%w: pod %s/%s of queue %s (limit 0) is bound", errOutcome, ns, p.Name, ns)
				}
			}
		}
	}
	for node, n := range perNode {
		if n > GPUsPerNode {
			return fmt.Errorf("%w: node %s holds %d GPUs of pods, it has %d", errOutcome, node, n, GPUsPerNode)
		}
	}
	return nil
}

// checkLost fails unless exactly want GPUs of bound pods of queue were deleted since the last
// reset: a reclaim that evicts more than the claimant is owed, or less, is wrong. It waits a
// moment first, so that an eviction too many, sent after the last binding, is counted.
func (e *env) checkLost(ctx context.Context, queue string, want int64) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Second):
	}
	if got := e.watch.lost(queue); got != want {
		return fmt.Errorf("%w: %d GPUs of queue %s were evicted, the claimant is owed %d", errOutcome, got, queue, want)
	}
	return e.checkNodes()
}

// inGang keeps the pods of gang g.
func inGang(g gang) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Annotations[fairwayv1.PodGroupAnnotation] == g.name }
}

// reclaimImpossible is KAI's "measure time for reclaim to fail on distributed job last pod": the
// sanity queue's guarantee is set to all the cluster's GPUs but 79, and gangs of 10 pods of 8
// GPUs (80) are created in the reclaim queue one after the other; each must be answered with a
// reason on its PodGroup, OverFairShare (its queue's fair share, not the cluster, keeps it out),
// and nothing may be evicted for it. The figure is the mean time from the PodGroup's creation to
// that answer.
func reclaimImpossible(ctx context.Context, e *env) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, 1, true); err != nil {
		return Result{}, err
	}
	const pods = 10 // KAI's defaultPodsPerDistributedJob
	guarantee := int64(e.o.Nodes*GPUsPerNode - pods*GPUsPerNode + 1)
	if err := e.setGPU(ctx, queueSanity, gpuQuota{quota: &guarantee, weight: ptr.To[int32](0)}); err != nil {
		return Result{}, err
	}
	e.watch.resetLost()
	m := e.begin("reclaim-impossible")
	var total time.Duration
	var reason fairwayv1.UnschedulableReason
	var message string
	for range e.o.Samples {
		g, err := e.createGang(ctx, queueReclaim, pods, GPUsPerNode, "")
		if err != nil {
			m.end()
			return Result{}, err
		}
		var at time.Time
		if err := poll(ctx, 20*time.Millisecond, e.timeout(), "the reason on PodGroup "+g.name, func() (bool, error) {
			pg := &fairwayv1.PodGroup{}
			if err := e.cl.Get(ctx, client.ObjectKey{Namespace: g.queue, Name: g.name}, pg); err != nil {
				return false, nil
			}
			c := findCondition(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason == string(fairwayv1.ReasonWaitingForPods) {
				return false, nil
			}
			at, reason, message = time.Now(), fairwayv1.UnschedulableReason(c.Reason), c.Message
			return true, nil
		}); err != nil {
			m.end()
			return Result{}, err
		}
		total += at.Sub(g.created)
		if reason != fairwayv1.ReasonOverFairShare {
			// The first answer must be the one that says why: the queue's fair share, not the
			// cluster's size (the cluster has the GPUs; the sanity queue's guarantee keeps them).
			m.end()
			return Result{}, fmt.Errorf("%w: PodGroup %s waits with reason %q (%s), want %s", errOutcome, g.name, reason, message, fairwayv1.ReasonOverFairShare)
		}
		for _, p := range e.watch.pods(g.queue) {
			if inGang(g)(p) && p.Spec.NodeName != "" {
				m.end()
				return Result{}, fmt.Errorf("%w: pod %s of the impossible gang was bound", errOutcome, p.Name)
			}
		}
		if err := e.deleteGang(ctx, g); err != nil {
			m.end()
			return Result{}, err
		}
	}
	u := m.end()
	if err := e.checkLost(ctx, queueSanity, 0); err != nil {
		return Result{}, err
	}
	r := Result{Figure: total / time.Duration(e.o.Samples), Usage: u,
		Detail: fmt.Sprintf("%d gangs of %d×%d GPUs against %d reclaimable; reason %s: %s", e.o.Samples, pods, GPUsPerNode,
			int64(e.o.Nodes*GPUsPerNode)-guarantee, reason, message)}
	if err := e.setGPU(ctx, queueSanity, gpuQuota{quota: ptr.To[int64](0), weight: ptr.To[int32](0)}); err != nil {
		return r, err
	}
	return r, e.cleanup(ctx, leafQueues...)
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// reclaimLarge is KAI's "reclaims for one very large job" over one-GPU reclaimees: a gang of half
// the node count's pods of 8 GPUs (250 × 8 = 2,000 GPUs at 500 nodes), from its PodGroup's
// creation to its last pod's binding.
func reclaimLarge(ctx context.Context, e *env) (Result, error) {
	return reclaimOneLarge(ctx, e, "reclaim-large", 1, e.o.Nodes/2)
}

// reclaimFullNode is the same over full-node reclaimees (KAI's "Full Node GPU Reclaimees"): the
// cluster filled with 8-GPU Jobs, a gang of one 8-GPU pod per node.
func reclaimFullNode(ctx context.Context, e *env) (Result, error) {
	return reclaimOneLarge(ctx, e, "reclaim-full-node", GPUsPerNode, e.o.Nodes)
}

func reclaimOneLarge(ctx context.Context, e *env, name string, fillGPUs, pods int) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, fillGPUs, true); err != nil {
		return Result{}, err
	}
	e.watch.resetLost()
	m := e.begin(name)
	g, err := e.createGang(ctx, queueReclaim, pods, GPUsPerNode, "")
	if err != nil {
		m.end()
		return Result{}, err
	}
	end, err := e.watch.waitBound(ctx, queueReclaim, pods, inGang(g), e.timeout())
	u := m.end()
	if err != nil {
		return Result{}, fmt.Errorf("%w\n%s", err, e.schedTail())
	}
	owed := int64(pods * GPUsPerNode)
	if err := e.checkLost(ctx, queueSanity, owed); err != nil {
		return Result{}, err
	}
	r := Result{Figure: end.Sub(g.created), Usage: u,
		Detail: fmt.Sprintf("gang of %d×%d GPUs bound whole; exactly %d GPUs of %d-GPU jobs evicted; from the PodGroup: %s",
			pods, GPUsPerNode, owed, fillGPUs, e.watch.phases(g.created, queueSanity, queueReclaim, inGang(g)))}
	return r, e.cleanup(ctx, leafQueues...)
}

// reclaimFloor is not one of KAI's specs: it is what reclaim-large costs the control plane at the
// least, with no scheduler at all, so that reclaim-large's figure can be read against what the
// machine allows. On the cluster full of one-GPU Jobs, with the scheduler stopped, the harness
// creates the same gang, then deletes every pod of half the nodes (grace 0, one DELETE each, 128
// at a time, no client rate limit) and binds one gang pod to each node as soon as its pods have
// stopped (turned terminal or gone). The Job controller recreates every deleted pod, as in
// reclaim-large. The figure runs from the first deletion to the last binding: one write per
// victim and one per binding, where a scheduler also says why (the DisruptionTarget condition),
// goes through the Eviction API (budgets) and records events. A scheduler's reclaim-large
// cannot be faster than this here.
func reclaimFloor(ctx context.Context, e *env) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, 1, true); err != nil {
		return Result{}, err
	}
	if err := e.stopScheduler(); err != nil {
		return Result{}, err
	}
	pods := e.o.Nodes / 2
	g, err := e.createGang(ctx, queueReclaim, pods, GPUsPerNode, "")
	if err != nil {
		return Result{}, err
	}
	if err := e.watch.waitCreated(ctx, queueReclaim, pods, e.timeout()); err != nil {
		return Result{}, err
	}
	var members []*corev1.Pod
	for _, p := range e.watch.pods(queueReclaim) {
		if inGang(g)(p) {
			members = append(members, p)
		}
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range e.watch.pods(queueSanity) {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	nodes := slices.Sorted(maps.Keys(byNode))
	if len(nodes) < pods || len(members) != pods {
		return Result{}, fmt.Errorf("%w: %d nodes hold pods and %d gang pods exist, want %d of each", errOutcome, len(nodes), len(members), pods)
	}
	nodes = nodes[:pods]
	var victims []*corev1.Pod
	for _, n := range nodes {
		victims = append(victims, byNode[n]...)
	}
	e.watch.resetLost()
	m := e.begin("reclaim-floor")
	start := time.Now()
	var deleted error
	var wg sync.WaitGroup
	wg.Go(func() {
		deleted = parallel(len(victims), 128, func(j int) error {
			v := victims[j]
			return ignoreNotFound(e.cs.CoreV1().Pods(queueSanity).Delete(ctx, v.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &v.UID}}))
		})
	})
	// A node is free when its pods have stopped (turned terminal, or gone), not when their
	// deletion was accepted, as kube-scheduler reads it: a Job's pod stays, terminal, until its
	// controller takes off the tracking finalizer.
	err = parallel(pods, pods, func(i int) error {
		if err := poll(ctx, 10*time.Millisecond, e.timeout(), "the pods of node "+nodes[i]+" to stop", func() (bool, error) {
			return !slices.ContainsFunc(byNode[nodes[i]], e.watch.holds), nil
		}); err != nil {
			return err
		}
		p := members[i]
		return e.cs.CoreV1().Pods(queueReclaim).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: queueReclaim, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodes[i]},
		}, metav1.CreateOptions{})
	})
	wg.Wait()
	if err = errors.Join(deleted, err); err != nil {
		m.end()
		return Result{}, err
	}
	end, err := e.watch.waitBound(ctx, queueReclaim, pods, inGang(g), e.timeout())
	u := m.end()
	if err != nil {
		return Result{}, err
	}
	owed := int64(pods * GPUsPerNode)
	if err := e.checkLost(ctx, queueSanity, owed); err != nil {
		return Result{}, err
	}
	r := Result{Figure: end.Sub(start), Usage: u,
		Detail: fmt.Sprintf("the harness deleted %d one-GPU pods and bound %d pods of %d GPUs, no scheduler; from the first deletion: %s",
			owed, pods, GPUsPerNode, e.watch.phases(start, queueSanity, queueReclaim, inGang(g)))}
	if err := e.cleanup(ctx, leafQueues...); err != nil {
		return r, err
	}
	return r, e.startScheduler(ctx)
}

// reclaimSingle is KAI's "reclaims single GPU Jobs at intervals to measure latency": on the full
// cluster, one one-GPU Job at a time in the reclaim queue, each timed from its creation to its
// pod's binding; the figure is the mean.
func reclaimSingle(ctx context.Context, e *env) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, 1, true); err != nil {
		return Result{}, err
	}
	e.watch.resetLost()
	m := e.begin("reclaim-single")
	var total, created, gone time.Duration
	before := e.watch.seen(queueReclaim)
	for i := range e.o.Samples {
		start := time.Now()
		if err := e.createJobs(ctx, queueReclaim, 1, 1); err != nil {
			m.end()
			return Result{}, err
		}
		end, err := e.watch.waitBound(ctx, queueReclaim, i+1, nil, e.timeout())
		if err != nil {
			m.end()
			return Result{}, fmt.Errorf("%w\n%s", err, e.schedTail())
		}
		total += end.Sub(start)
		// The parts: the Job controller's (from the Job to its pod), then until the victim has
		// stopped (the decision, the eviction, and the victim turning terminal; with kwok's
		// stock stages, which skip the terminal phase, the Job controller's removal of the
		// victim's tracking finalizer), then until the binding.
		now := e.watch.seen(queueReclaim)
		for name, at := range now {
			if _, old := before[name]; !old {
				created += at.Sub(start)
				gone += e.watch.lastLost(queueSanity).Sub(at)
			}
		}
		before = now
	}
	u := m.end()
	mean := func(d time.Duration) time.Duration { return (d / time.Duration(e.o.Samples)).Round(time.Millisecond) }
	if err := e.checkLost(ctx, queueSanity, int64(e.o.Samples)); err != nil {
		return Result{}, err
	}
	r := Result{Figure: total / time.Duration(e.o.Samples), Usage: u,
		Detail: fmt.Sprintf("%d one-GPU jobs, one at a time, each for exactly one evicted GPU, %d running; on average %v from the Job to its pod, %v from the pod to its victim's stop, %v from there to the binding",
			e.o.Samples, e.o.Nodes*GPUsPerNode, mean(created), mean(gone), mean(total-created-gone))}
	return r, e.cleanup(ctx, leafQueues...)
}

// reclaimMany is KAI's "reclaims many single GPU Jobs": as many one-GPU Jobs as the cluster has
// GPUs, in the reclaim queue, created with the scheduler off; every running one is evicted.
func reclaimMany(ctx context.Context, e *env) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, 1, true); err != nil {
		return Result{}, err
	}
	e.watch.resetLost()
	f, err := e.fill(ctx, "reclaim-many", queueReclaim, 1, true)
	if err != nil {
		return Result{}, err
	}
	if err := e.checkLost(ctx, queueSanity, int64(f.jobs)); err != nil {
		return Result{}, err
	}
	r := Result{Figure: f.end.Sub(f.start), Usage: f.Usage, Detail: fmt.Sprintf("%d one-GPU jobs bound, each for exactly one evicted GPU", f.jobs)}
	return r, e.cleanup(ctx, leafQueues...)
}

// reclaimDistributed is KAI's "reclaims with distributed jobs": on the cluster full of one-GPU
// jobs, a tenth of the node count's gangs of 10 pods of 5 GPUs (floor(min(8, 8/2+1))), created
// with the scheduler off; from its start to the last binding. Every node then holds one
// 5-GPU pod, and exactly 5 GPUs of each node were evicted.
func reclaimDistributed(ctx context.Context, e *env) (Result, error) {
	if _, err := e.fill(ctx, "", queueSanity, 1, true); err != nil {
		return Result{}, err
	}
	const pods, gpus = 10, GPUsPerNode/2 + 1
	gangs := e.o.Nodes / pods
	if err := e.stopScheduler(); err != nil {
		return Result{}, err
	}
	if err := parallel(gangs, gangs, func(int) error {
		_, err := e.createGang(ctx, queueReclaimDist, pods, gpus, "")
		return err
	}); err != nil {
		return Result{}, err
	}
	if err := e.watch.waitCreated(ctx, queueReclaimDist, gangs*pods, e.timeout()); err != nil {
		return Result{}, err
	}
	e.watch.resetLost()
	start, m := time.Now(), e.begin("reclaim-distributed")
	if err := e.startScheduler(ctx); err != nil {
		m.end()
		return Result{}, err
	}
	end, err := e.watch.waitBound(ctx, queueReclaimDist, gangs*pods, nil, e.timeout())
	u := m.end()
	if err != nil {
		return Result{}, fmt.Errorf("%w\n%s", err, e.schedTail())
	}
	owed := int64(gangs * pods * gpus)
	if err := e.checkLost(ctx, queueSanity, owed); err != nil {
		return Result{}, err
	}
	r := Result{Figure: end.Sub(start), Usage: u,
		Detail: fmt.Sprintf("%d gangs of %d×%d GPUs bound whole (%d pods); exactly %d one-GPU jobs evicted", gangs, pods, gpus, gangs*pods, owed)}
	return r, e.cleanup(ctx, leafQueues...)
}
