package sim

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

// Config is one simulated cluster and workload.
type Config struct {
	// Name labels the run in reports.
	Name   string
	Nodes  []*corev1.Node
	Queues []*v1alpha1.Queue
	Pods   []Pod
	// Interval is the simulated time between cycles (default 10s).
	Interval time.Duration
	// MaxTime stops the replay (default: when every pod has finished, or 30 days).
	MaxTime time.Duration
	// Seed orders pods that arrive at the same time.
	Seed    int64
	Options engine.Options
	// UsageHalfLife turns on fair share over time, as the scheduler's
	// --fair-share-usage-half-life: the queues' usage history is kept on simulated time.
	UsageHalfLife time.Duration
}

// Sample is the state after one cycle.
type Sample struct {
	Time time.Duration
	// GPU, CPU and memory allocated and their capacity (milli-GPU, milli-CPU, bytes).
	GPU, GPUCap, CPU, CPUCap, Mem, MemCap int64
	// FragmentedGPU is the free milli-GPU on GPUs that are partly used: what only a share fits.
	FragmentedGPU int64
	Running       int
	Pending       int
	// PendingByReason counts waiting pods by the engine's reason code.
	PendingByReason map[string]int
	// QueueGPU and QueueFairGPU are per queue the milli-GPU allocated and the fair share.
	QueueGPU, QueueFairGPU map[string]int64
	Bindings, Evictions    int
}

// PodOutcome is what happened to one trace pod (its last incarnation).
type PodOutcome struct {
	Name, Queue string
	Arrival     time.Duration
	// Start is when it was last bound; Wait the total time it spent pending.
	Start, Wait time.Duration
	Started     bool
	Finished    bool
	Evictions   int
}

// Report is a finished replay.
type Report struct {
	Name    string
	Samples []Sample
	Pods    []PodOutcome
	Elapsed time.Duration
	Cycles  int
	// Parents are the queues that are another queue's parent: their GPUs are their children's
	// sum, and the plots draw them apart from the leaves.
	Parents map[string]bool
}

type simPod struct {
	spec    Pod
	out     *PodOutcome
	obj     *corev1.Pod
	gen     int
	pending time.Duration // when it last became pending
	end     time.Duration // when it finishes (bound pods with a duration)
	leaving time.Duration // when an evicted pod is gone
	state   int
}

const (
	podWaiting = iota
	podPending
	podRunning
	podLeaving
	podDone
)

// Run replays the config: pods arrive at their time, each cycle runs the engine at the interval,
// bindings are confirmed, bound pods finish after their duration and are deleted, evicted pods
// terminate after their grace period and come back pending (their controller recreates them;
// a gang's evicted pods re-queue together), and a sample is taken after every cycle. progress,
// when set, is called about every simulated hour.
func Run(cfg Config, progress func(now time.Duration, s Sample)) (*Report, error) {
	start := time.Now()
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.MaxTime <= 0 {
		cfg.MaxTime = 30 * 24 * time.Hour
	}
	snap, capacity, err := loadCluster(cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Name: cfg.Name, Pods: make([]PodOutcome, len(cfg.Pods)), Parents: map[string]bool{}}
	for _, q := range cfg.Queues {
		if q.Spec.Parent != "" {
			rep.Parents[q.Spec.Parent] = true
		}
	}
	pods, order, err := arrivals(cfg, rep)
	if err != nil {
		return nil, err
	}
	byKey := map[types.NamespacedName]*simPod{}
	eng := engine.New(cfg.Options)
	hist := usage.New(cfg.UsageHalfLife)
	b := binder{snap: snap}
	next := 0
	done, quiet := 0, 0
	lastProgress := time.Duration(-1)
	for now := time.Duration(0); now <= cfg.MaxTime; now += cfg.Interval {
		wall := simEpoch.Add(now)
		// Arrivals.
		for ; next < len(order) && order[next].spec.Arrival <= now; next++ {
			p := order[next]
			if err := p.create(snap, wall, now, byKey); err != nil {
				return nil, err
			}
		}
		// Completions and terminations.
		for _, p := range pods {
			switch {
			case p.state == podRunning && p.spec.Duration > 0 && p.end <= now:
				snap.DeletePod(keyOf(p.obj))
				delete(byKey, keyOf(p.obj))
				p.state, p.out.Finished = podDone, true
				done++
			case p.state == podLeaving && p.leaving <= now:
				snap.DeletePod(keyOf(p.obj))
				delete(byKey, keyOf(p.obj))
				p.gen++
				if err := p.create(snap, wall, now, byKey); err != nil {
					return nil, err
				}
			}
		}
		hist.Advance(wall)
		hist.Apply(snap)
		res := eng.Schedule(snap, wall)
		hist.Record(snap, res.Capacity)
		if err := apply(snap, &b, byKey, res, wall, now); err != nil {
			return nil, err
		}
		s := sample(snap, res, now, capacity[0], capacity[1], capacity[2])
		rep.Samples = append(rep.Samples, s)
		rep.Cycles++
		if progress != nil && now/time.Hour != lastProgress {
			lastProgress = now / time.Hour
			progress(now, s)
		}
		if len(res.Bindings)+len(res.Evictions)+len(res.Nominations) > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if next == len(order) && settled(pods, quiet) {
			break
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// loadCluster is the snapshot of cfg's nodes and queues, and the cluster's GPU (milli), CPU
// (milli) and memory (bytes) capacity.
func loadCluster(cfg Config) (*snapshot.Snapshot, [3]int64, error) {
	snap := snapshot.New()
	var capacity [3]int64
	for _, n := range cfg.Nodes {
		if err := snap.UpsertNode(n); err != nil {
			return nil, capacity, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if q, ok := n.Status.Allocatable[v1alpha1.ResourceGPU]; ok {
			capacity[0] += q.Value() * 1000
		}
		capacity[1] += n.Status.Allocatable.Cpu().MilliValue()
		capacity[2] += n.Status.Allocatable.Memory().Value()
	}
	for _, q := range cfg.Queues {
		q = q.DeepCopy()
		if !slices.Contains(q.Spec.Namespaces, q.Name) {
			q.Spec.Namespaces = append(q.Spec.Namespaces, q.Name)
		}
		if err := snap.UpsertQueue(q); err != nil {
			return nil, capacity, fmt.Errorf("queue %s: %w", q.Name, err)
		}
	}
	return snap, capacity, nil
}

// arrivals is cfg's pods, each with its outcome in rep, and the order they arrive in: by time,
// then a seeded shuffle of pods arriving together (gangs stay whole).
func arrivals(cfg Config, rep *Report) (pods, order []*simPod, err error) {
	pods = make([]*simPod, len(cfg.Pods))
	seen := map[string]bool{}
	for i := range cfg.Pods {
		p := cfg.Pods[i]
		if seen[p.Queue+"/"+p.Name] {
			return nil, nil, fmt.Errorf("trace: pod %s of queue %s appears twice", p.Name, p.Queue)
		}
		seen[p.Queue+"/"+p.Name] = true
		rep.Pods[i] = PodOutcome{Name: p.Name, Queue: p.Queue, Arrival: p.Arrival}
		pods[i] = &simPod{spec: p, out: &rep.Pods[i]}
	}
	rng := rand.New(rand.NewSource(cfg.Seed))
	rank := make(map[string]int)
	for _, p := range pods {
		k := p.spec.Queue + "/" + gangOf(&p.spec)
		if _, ok := rank[k]; !ok {
			rank[k] = rng.Int()
		}
	}
	order = slices.Clone(pods)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.spec.Arrival != b.spec.Arrival {
			return a.spec.Arrival < b.spec.Arrival
		}
		return rank[a.spec.Queue+"/"+gangOf(&a.spec)] < rank[b.spec.Queue+"/"+gangOf(&b.spec)]
	})
	return pods, order, nil
}

// apply plays a cycle's result: bindings are confirmed and their pods run for their duration;
// evicted pods start terminating with their grace period.
func apply(snap *snapshot.Snapshot, b *binder, byKey map[types.NamespacedName]*simPod, res engine.Result, wall time.Time, now time.Duration) error {
	for _, bd := range res.Bindings {
		p := byKey[bd.Pod]
		if p == nil {
			return fmt.Errorf("binding of unknown pod %s", bd.Pod)
		}
		if _, err := b.bind(p.obj, bd, wall); err != nil {
			return err
		}
		p.state = podRunning
		p.out.Started, p.out.Start = true, now
		p.out.Wait += now - p.pending
		p.end = now + p.spec.Duration
	}
	for _, ev := range res.Evictions {
		p := byKey[ev.Pod]
		if p == nil {
			return fmt.Errorf("eviction of unknown pod %s", ev.Pod)
		}
		obj := p.obj.DeepCopy()
		ts := metav1.NewTime(wall)
		obj.DeletionTimestamp = &ts
		p.obj = obj
		if err := snap.UpsertPod(obj); err != nil {
			return fmt.Errorf("evicting %s: %w", ev.Pod, err)
		}
		p.state = podLeaving
		p.leaving = now + max(ev.GracePeriod, time.Nanosecond)
		p.out.Evictions++
	}
	return nil
}

// settled reports, once every pod has arrived, whether the replay is over: nothing waits and
// nothing running will ever finish, or what waits can never run (nothing will finish, and the
// engine has decided nothing for quiet cycles).
func settled(pods []*simPod, quiet int) bool {
	waiting, finite := 0, 0
	for _, p := range pods {
		switch {
		case p.state == podPending || p.state == podLeaving:
			waiting++
		case p.state == podRunning && p.spec.Duration > 0:
			finite++
		}
	}
	return finite == 0 && (waiting == 0 || quiet > 100)
}

func gangOf(p *Pod) string {
	if p.Gang != "" {
		return p.Gang
	}
	return p.Name
}

// create makes the pod (again, after an eviction) pending.
func (p *simPod) create(snap *snapshot.Snapshot, wall time.Time, now time.Duration, byKey map[types.NamespacedName]*simPod) error {
	spec := p.spec
	if p.gen > 0 {
		spec.Name = fmt.Sprintf("%s-r%d", spec.Name, p.gen)
	}
	obj := spec.Object(wall)
	// Its controller makes it again after an eviction.
	obj.Annotations[v1alpha1.RecreatableAnnotation] = "true"
	ctrl := true
	obj.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: gangOf(&p.spec), UID: types.UID(p.spec.Queue + "/" + gangOf(&p.spec)), Controller: &ctrl}}
	running := p.gen == 0 && spec.Node != ""
	if running {
		// Found running (fairway sim export): bound from the start, as the API server has it.
		obj.Spec.NodeName = spec.Node
		obj.Status.Phase = corev1.PodRunning
		st := metav1.NewTime(wall)
		obj.Status.StartTime = &st
		if len(spec.GPUIndexes) > 0 {
			idx := make([]string, len(spec.GPUIndexes))
			for i, g := range spec.GPUIndexes {
				idx[i] = strconv.Itoa(g)
			}
			obj.Annotations[v1alpha1.GPUIndexAnnotation] = strings.Join(idx, ",")
		}
	}
	if err := snap.UpsertPod(obj); err != nil {
		return fmt.Errorf("pod %s: %w", spec.Name, err)
	}
	p.obj = obj
	p.state = podPending
	p.pending = now
	if running {
		p.state = podRunning
		p.out.Started, p.out.Start = true, now
		p.end = now + spec.Duration
	}
	byKey[keyOf(obj)] = p
	return nil
}

func sample(snap *snapshot.Snapshot, res engine.Result, now time.Duration, gpuCap, cpuCap, memCap int64) Sample {
	s := Sample{Time: now, GPUCap: gpuCap, CPUCap: cpuCap, MemCap: memCap, PendingByReason: map[string]int{},
		QueueGPU: map[string]int64{}, QueueFairGPU: map[string]int64{}, Bindings: len(res.Bindings), Evictions: len(res.Evictions)}
	for _, n := range snap.Nodes() {
		if n == nil {
			continue
		}
		s.GPU += n.UsedMilliGPU
		s.CPU += n.Used.MilliCPU
		s.Mem += n.Used.Memory
		s.Running += len(n.Tasks)
		for i := range n.Slots {
			g := &n.Slots[i]
			if g.Owners == 0 && g.UsedMilli > 0 && g.UsedMilli < snapshot.MilliPerGPU {
				s.FragmentedGPU += snapshot.MilliPerGPU - g.UsedMilli
			}
		}
	}
	for _, u := range res.Unschedulable {
		s.PendingByReason[string(u.Code)] += u.PendingPods
		s.Pending += u.PendingPods
	}
	for _, q := range res.Queues {
		s.QueueGPU[q.Name] = q.Allocated["gpu"]
		s.QueueFairGPU[q.Name] = q.FairShare["gpu"]
	}
	return s
}
