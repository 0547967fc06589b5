package usage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// GPUUsage is one GPU in a Snapshot.
type GPUUsage struct {
	Index              int
	UUID               string
	Model              string
	Healthy            bool
	UtilizationPercent uint32
	UtilizationKnown   bool
	MemoryUsedBytes    uint64
	MemoryTotalBytes   uint64
	Processes          int
}

// PodUsage is one pod on one GPU in a Snapshot.
type PodUsage struct {
	UID, Namespace, Name, Queue string
	GPUIndex                    int
	GPUUUID                     string
	Model                       string
	MemoryUsedBytes             uint64
	// SMPercent is the pod's utilization of the GPU, valid when SMKnown.
	SMPercent float64
	SMKnown   bool
	Processes int
	// PIDs are the pod's processes on the GPU.
	PIDs []uint32
	// Interactive pods have their idleness tracked; Idle is meaningful only for them.
	Interactive bool
	Idle        bool
}

// Snapshot is the node's usage at one poll, what metrics are built from.
type Snapshot struct {
	At time.Time
	// Err is a library-wide failure at this poll; GPUs and Pods are empty then.
	Err  error
	GPUs []GPUUsage
	Pods []PodUsage
}

// ConditionSink receives idleness transitions. Set must not block: the monitor calls it from
// its poll loop.
type ConditionSink interface {
	Set(pod *corev1.Pod, t Transition)
}

// MonitorOptions wire a Monitor. Pods, PodGPUs, Inventory and Conditions are required.
type MonitorOptions struct {
	// Interval between polls; the idle signal reaches the API within about one interval.
	Interval time.Duration
	Tracker  TrackerConfig
	// Pods lists the non-terminated pods of this node (from the agent's cache).
	Pods func(ctx context.Context) ([]corev1.Pod, error)
	// PodGPUs returns the GPU indexes a pod was given (by the kubelet, or by fairway for a
	// fractional pod), whether or not it runs a process there yet.
	PodGPUs func(pod *corev1.Pod) []int
	// Inventory returns the latest discovered inventory (nil before the first), for UUIDs
	// and models.
	Inventory func() *fairwayv1alpha1.GPUInventory
	// Conditions receives idleness transitions: a ConditionWriter in the agent; fairway agent
	// watch, which runs the monitor without a cluster, takes them itself.
	Conditions ConditionSink
	// OnSample, if set, sees each sample after it was processed (error accounting,
	// rediscovery when a GPU fails).
	OnSample func(s *Sample)
	// Work, if set, is asked at each poll whether an interactive pod works in a way NVML cannot
	// show (Activity.Work): the swap controller's pods.
	Work func(uid string) (reason, message string)
	// OnPoll, if set, gets each snapshot (after idleness was updated) with the pods it was
	// built from; it must not block.
	OnPoll func(s *Snapshot, pods []corev1.Pod)
	// ResyncEvery re-asserts conditions that differ from the tracker's state (someone removed
	// or overwrote them); default 10s.
	ResyncEvery time.Duration
	Clock       clock.WithTicker
	Log         logr.Logger
}

// Monitor polls GPU usage, tracks interactive pods' idleness and keeps the latest Snapshot.
type Monitor struct {
	opts    MonitorOptions
	sampler *Sampler
	tracker *Tracker

	mu         sync.RWMutex
	latest     *Snapshot
	lastResync time.Time
}

// NewMonitor returns a monitor sampling with sampler.
func NewMonitor(sampler *Sampler, opts MonitorOptions) *Monitor {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ResyncEvery == 0 {
		opts.ResyncEvery = 10 * time.Second
	}
	return &Monitor{opts: opts, sampler: sampler, tracker: NewTracker(opts.Tracker)}
}

// Latest returns the last snapshot, nil before the first poll. Callers must not modify it.
func (m *Monitor) Latest() *Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.latest
}

// Start polls until ctx ends. It implements manager.Runnable.
func (m *Monitor) Start(ctx context.Context) error {
	t := m.opts.Clock.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		if err := m.Poll(ctx); err != nil {
			m.opts.Log.Error(err, "Polling GPU usage")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// NeedLeaderElection is false: the monitor watches its own node.
func (m *Monitor) NeedLeaderElection() bool { return false }

type podGPU struct {
	uid string
	gpu int
}

// Poll takes one sample, updates idleness and the snapshot.
func (m *Monitor) Poll(ctx context.Context) error {
	now := m.opts.Clock.Now()
	sample := m.sampler.Sample(now)
	if m.opts.OnSample != nil {
		defer m.opts.OnSample(&sample)
	}
	pods, err := m.opts.Pods(ctx)
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	inv := m.opts.Inventory()
	snap := &Snapshot{At: now, Err: sample.Err}
	if sample.Err != nil {
		m.store(snap)
		return nil // library down: keep idleness as it was rather than guess
	}

	byUID := make(map[string]*corev1.Pod, len(pods))
	for i := range pods {
		byUID[string(pods[i].UID)] = &pods[i]
	}
	usage := map[podGPU]*PodUsage{}
	entry := func(uid string, g int) *PodUsage {
		k := podGPU{uid, g}
		if u, ok := usage[k]; ok {
			return u
		}
		u := &PodUsage{UID: uid, GPUIndex: g, SMKnown: true}
		usage[k] = u
		return u
	}
	pids := map[string][]uint32{}
	gpuByIndex := map[int]*GPUSample{}
	for i := range sample.GPUs {
		g := &sample.GPUs[i]
		gpuByIndex[g.Index] = g
		gu := GPUUsage{
			Index:              g.Index,
			Healthy:            g.Err == nil,
			UtilizationPercent: g.UtilizationPercent,
			UtilizationKnown:   g.UtilizationKnown,
			MemoryUsedBytes:    g.MemoryUsedBytes,
			MemoryTotalBytes:   g.MemoryTotalBytes,
			Processes:          len(g.Processes),
		}
		gu.UUID, gu.Model = identity(inv, g.Index)
		snap.GPUs = append(snap.GPUs, gu)
		for _, p := range g.Processes {
			if _, known := byUID[p.PodUID]; !known {
				continue
			}
			pids[p.PodUID] = append(pids[p.PodUID], p.PID)
			u := entry(p.PodUID, g.Index)
			u.MemoryUsedBytes += p.UsedBytes
			u.SMPercent += float64(p.SMPercent)
			u.Processes++
			u.PIDs = append(u.PIDs, p.PID)
		}
	}
	for uid, pod := range byUID {
		for _, g := range m.opts.PodGPUs(pod) {
			entry(uid, g)
		}
	}
	// Without per-process samples, a GPU's utilization is the pod's only when no other pod
	// uses that GPU; otherwise it is unknown rather than wrongly attributed (a lent GPU's
	// borrower must not keep the lender awake).
	podsOn := map[int]int{}
	for k := range usage {
		podsOn[k.gpu]++
	}
	for k, u := range usage {
		g := gpuByIndex[k.gpu]
		if g == nil || g.ProcessSMKnown {
			continue
		}
		u.SMPercent = 0
		u.SMKnown = g.UtilizationKnown && podsOn[k.gpu] == 1
		if u.SMKnown {
			u.SMPercent = float64(g.UtilizationPercent)
		}
	}

	m.track(byUID, usage, pids, idleMemory(byUID, usage, gpuByIndex), now)
	for _, u := range usage {
		pod := byUID[u.UID]
		_, queue, _ := fairwayv1alpha1.QueueOf(pod.Labels)
		u.Namespace, u.Name, u.Queue = pod.Namespace, pod.Name, queue
		u.GPUUUID, u.Model = identity(inv, u.GPUIndex)
		u.Interactive = fairwayv1alpha1.IsInteractive(pod)
		u.Idle = u.Interactive && m.tracker.Idle(u.UID)
		snap.Pods = append(snap.Pods, *u)
	}
	slices.SortFunc(snap.Pods, func(a, b PodUsage) int {
		if a.Namespace != b.Namespace {
			return cmp.Compare(a.Namespace, b.Namespace)
		}
		if a.Name != b.Name {
			return cmp.Compare(a.Name, b.Name)
		}
		return a.GPUIndex - b.GPUIndex
	})
	m.store(snap)
	if m.opts.OnPoll != nil {
		m.opts.OnPoll(snap, pods)
	}
	return nil
}

// idleMemory returns, for each interactive pod, the GPU memory in MiB (rounded up) that would
// stay resident if its GPU were lent now: the GPU's used memory less what pods on loan
// (fairway.dev/loan) and other preemptible pods' processes hold there (a loan still on the GPU,
// or on its way out, is not the owner's; a pod on loan counts as one even if it looks
// interactive, e.g. a preemptible pod annotated as a notebook). The
// GPU's used memory, not the pod's own processes, is what a loan cannot have: it also counts
// other pods sharing the GPU, processes outside pods, and the driver's own use. For a pod on
// several GPUs it is the most on any one of them.
func idleMemory(byUID map[string]*corev1.Pod, usage map[podGPU]*PodUsage, gpus map[int]*GPUSample) map[string]uint64 {
	preemptible := map[int]uint64{}
	for _, g := range gpus {
		for _, p := range g.Processes {
			if pod, ok := byUID[p.PodUID]; ok && (pod.Annotations[fairwayv1alpha1.LoanAnnotation] == "true" || !fairwayv1alpha1.IsInteractive(pod)) {
				preemptible[g.Index] += p.UsedBytes
			}
		}
	}
	out := map[string]uint64{}
	for k := range usage {
		g := gpus[k.gpu]
		if g == nil || g.Err != nil || !fairwayv1alpha1.IsInteractive(byUID[k.uid]) {
			continue
		}
		used := g.MemoryUsedBytes - min(g.MemoryUsedBytes, preemptible[k.gpu])
		out[k.uid] = max(out[k.uid], (used+1<<20-1)>>20)
	}
	return out
}

// track feeds the tracker with every interactive pod that holds a GPU. idleMiB is what
// idleMemory returned for this sample: it goes with every transition to idle.
func (m *Monitor) track(byUID map[string]*corev1.Pod, usage map[podGPU]*PodUsage, pids map[string][]uint32, idleMiB map[string]uint64, now time.Time) {
	activity := map[string]*Activity{}
	for k, u := range usage {
		if !fairwayv1alpha1.IsInteractive(byUID[k.uid]) {
			continue
		}
		a := activity[k.uid]
		if a == nil {
			a = &Activity{}
			activity[k.uid] = a
		}
		a.SMPercent = max(a.SMPercent, u.SMPercent)
		a.MemoryBytes += u.MemoryUsedBytes
	}
	for uid, a := range activity {
		a.PIDs = pids[uid]
		if m.opts.Work != nil {
			a.Work, a.WorkMessage = m.opts.Work(uid)
		}
	}
	for _, uid := range m.tracker.UIDs() {
		if _, ok := activity[uid]; !ok {
			m.tracker.Forget(uid)
		}
	}
	resync := now.Sub(m.lastResync) >= m.opts.ResyncEvery
	if resync {
		m.lastResync = now
	}
	for uid, a := range activity {
		pod := byUID[uid]
		cond := fairwayv1alpha1.GPUIdleConditionOf(pod)
		if !m.tracker.Tracked(uid) && cond != nil && cond.Status == corev1.ConditionTrue {
			m.tracker.Seed(uid, cond.LastTransitionTime.Time)
		}
		if t, changed := m.tracker.Observe(uid, now, *a); changed {
			if t.Idle {
				t.IdleMemoryMiB, t.IdleMemoryKnown = idleMiB[uid]
			}
			m.opts.Log.V(1).Info("GPU idleness changed", "pod", klog.KObj(pod), "idle", t.Idle, "reason", t.Reason,
				"idleMemoryMiB", t.IdleMemoryMiB)
			m.opts.Conditions.Set(pod, t)
			continue
		}
		if resync {
			m.resync(pod, cond, idleMiB, now)
		}
	}
}

// resync re-asserts the tracker's state on a pod whose condition disagrees with it, or that is
// idle without its fairway.dev/idle-gpu-memory-used annotation. An idle
// pod's memory has not grown since it went idle (growth would have woken it), so the current
// reading stands for the one at the transition.
func (m *Monitor) resync(pod *corev1.Pod, cond *corev1.PodCondition, idleMiB map[string]uint64, now time.Time) {
	idle := m.tracker.Idle(string(pod.UID))
	condIdle := cond != nil && cond.Status == corev1.ConditionTrue
	// An idle pod without the memory annotation (removed, or idle since before the agent wrote
	// it) cannot be lent: write both again.
	_, annotated := pod.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]
	if idle == condIdle && (!idle || annotated) {
		return
	}
	t := Transition{Idle: idle, Reason: "GPUActive", Message: "GPU work seen since the condition was last written", At: now}
	if idle {
		t.Reason, t.Message = "GPUIdle", "GPU idle; condition re-asserted"
		t.IdleMemoryMiB, t.IdleMemoryKnown = idleMiB[string(pod.UID)]
	}
	m.opts.Conditions.Set(pod, t)
}

func (m *Monitor) store(s *Snapshot) {
	m.mu.Lock()
	m.latest = s
	m.mu.Unlock()
}

func identity(inv *fairwayv1alpha1.GPUInventory, index int) (uuid, model string) {
	if inv == nil {
		return "", ""
	}
	for _, g := range inv.GPUs {
		if int(g.Index) == index {
			return g.UUID, g.Product
		}
	}
	return "", ""
}
