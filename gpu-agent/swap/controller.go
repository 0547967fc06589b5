package swap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// Pod is one interactive pod at a poll of the usage monitor.
type Pod struct {
	Pod *corev1.Pod
	// GPUs are the GPU indexes the pod holds; PIDs its GPU processes there, which hold Bytes.
	GPUs  []int
	PIDs  []int
	Bytes int64
	// Idle is the agent's idleness of the pod (the tracker's, which the condition follows).
	Idle bool
}

// View is the node at one poll.
type View struct {
	At   time.Time
	Pods []Pod
	// Loans counts, per GPU index, the pods on loan (fairway.dev/loan) still on the node.
	Loans map[int]int
}

// Writer publishes a pod's swap state: GPUSwapAnnotation (nil removes it), the
// GPUSwapCondition (nil leaves it), and an event. It must not block: the controller calls it
// from its loop; the agent's writer retries in the background.
type Writer interface {
	Write(pod *corev1.Pod, state *fairwayv1alpha1.GPUSwap, cond *Condition)
	Event(pod *corev1.Pod, warning bool, reason, message string)
}

// Condition is the GPUSwapCondition to write.
type Condition struct {
	Swapped bool
	Reason  string
	Message string
	At      time.Time
}

// Options wire a Controller. API, Writer, HostRoom and CPU are required.
type Options struct {
	API    checkpoint.API
	Writer Writer
	// HostRoom is how much host RAM the node has for swapped memory now, before Limit: its
	// allocatable memory minus what its pods hold (their memory requests).
	HostRoom func(ctx context.Context) (int64, error)
	// Limit is the most bytes swapped out on the node at once (the chart's per-node cap); 0
	// allows none.
	Limit int64
	// PodRoom, if set, is how much more host memory the pod may use before its own limit (the
	// driver keeps the checkpoint in the process's memory, charged to the pod's cgroup: a pod
	// without the room would be OOM-killed); ok false when it has no limit.
	PodRoom func(pod *corev1.Pod, pids []int) (room int64, ok bool)
	// CPU is a process's CPU time so far (user and system, all threads): the sign of work of a
	// swapped process, whose CUDA calls block and whose GPU shows nothing.
	CPU func(pid int) (time.Duration, error)
	// WakeCPU is how much CPU a swapped pod's processes may use between two polls without
	// counting as work (an idle kernel's heartbeat); default 20ms.
	WakeCPU time.Duration
	// LockTimeout bounds cuCheckpointProcessLock (a process mid-kernel past it is not swapped);
	// default 5s.
	LockTimeout time.Duration
	// Owner, if set, is the pod a process runs in (its cgroup), ok false for none: a restarted
	// agent takes back only the swapped processes that still belong to their pod, since the PID
	// of one that exited may have gone to another process.
	Owner func(pid int) (uid string, ok bool)
	Clock clock.PassiveClock
	Log   logr.Logger
}

type phase int

const (
	swappedOut phase = iota
	// waking: the owner works; its loans are being returned, then the memory restored.
	waking
	// failed: the restore failed; the pod is held awake and its GPU never lent.
	failed
)

// swapRecord is one swapped pod.
type swapRecord struct {
	pod   *corev1.Pod
	gpus  []int
	pids  []int
	bytes int64
	phase phase
	// restored are the PIDs whose memory is back (still locked until all are).
	restored map[int]bool
	out      time.Duration
	cpu      map[int]time.Duration
	wokeAt   time.Time
	wake     string
	reason   string
}

// Controller swaps idle pods out when asked and in when they work. Observe runs it; Work and
// Stats may be called from other goroutines.
type Controller struct {
	opts Options

	mu sync.Mutex
	// records are the swapped pods by UID.
	records map[string]*swapRecord
	// known are the pods this controller has looked at since it started (by UID): a pod's
	// first sight is when what an earlier agent left of its swap is taken back (adopt).
	known map[string]bool
	// assessed is, per pod UID, the idle period (GPUIdleObserved) whose eligibility was
	// published.
	assessed map[string]string
	// refused is, per pod UID, the idle period for which a requested swap failed: not retried.
	refused map[string]string
	stats   Stats
}

// Stats are the controller's counters and latest values, for metrics.
type Stats struct {
	// Swapped is the bytes on the host now, per pod UID.
	Swapped map[string]int64
	// Out and In are the durations of every swap-out and swap-in since the last Stats call
	// (the agent's metrics feed histograms with them).
	Out, In []time.Duration
	// Failed counts swaps refused or failed since the last Stats call, by stage (check, lock,
	// checkpoint, restore).
	Failed map[string]int
}

// New returns a controller.
func New(opts Options) *Controller {
	if opts.WakeCPU == 0 {
		opts.WakeCPU = 20 * time.Millisecond
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{opts: opts, records: map[string]*swapRecord{}, known: map[string]bool{}, assessed: map[string]string{},
		refused: map[string]string{}, stats: Stats{Failed: map[string]int{}}}
}

// Work reports whether a pod counts as working because of its swap, and why: its memory is
// swapped and it showed a sign of work (it stays awake until restored), or its restore failed
// (it stays awake for good, so that its GPU is never lent). The usage monitor asks it at each
// poll for every interactive pod.
func (c *Controller) Work(uid string) (reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.records[uid]
	switch {
	case r == nil:
		return "", ""
	case r.phase == waking:
		return "GPUSwapIn", r.wake
	case r.phase == failed:
		return "GPUSwapRestoreFailed", r.reason
	}
	return "", ""
}

// Swapped reports whether the pod's memory is on the host (or failed to come back).
func (c *Controller) Swapped(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[uid] != nil
}

// TakeStats returns the stats and clears the durations.
func (c *Controller) TakeStats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Swapped: map[string]int64{}, Out: c.stats.Out, In: c.stats.In, Failed: maps(c.stats.Failed)}
	for uid, r := range c.records {
		s.Swapped[uid] = r.bytes
	}
	c.stats.Out, c.stats.In, c.stats.Failed = nil, nil, map[string]int{}
	return s
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Observe acts on one poll: it takes back the swaps an earlier agent left (at a pod's first
// sight), publishes the eligibility of pods that went idle, swaps out the ones the scheduler
// asked for, watches swapped ones for work, and restores those that work once their loans are
// gone. Swapping takes as long as the copy (seconds for tens of GiB), so the agent calls it from
// a loop of its own, not the usage poll.
func (c *Controller) Observe(ctx context.Context, v View) {
	seen := map[string]bool{}
	for i := range v.Pods {
		p := &v.Pods[i]
		uid := string(p.Pod.UID)
		seen[uid] = true
		c.mu.Lock()
		r, known := c.records[uid], c.known[uid]
		c.mu.Unlock()
		if !known {
			var retry bool
			if r, retry = c.adopt(v, p); retry {
				continue // a driver operation is under way: the pod is left alone until it ends
			}
			c.mu.Lock()
			c.known[uid] = true
			c.mu.Unlock()
		}
		switch {
		case r != nil:
			c.observeSwapped(v, p, r)
		case p.Idle:
			c.observeIdle(ctx, p)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.records {
		if !seen[uid] {
			// The pod left: its processes went with it, and the driver freed their checkpoint.
			delete(c.records, uid)
		}
	}
	for uid := range c.assessed {
		if !seen[uid] {
			delete(c.assessed, uid)
			delete(c.refused, uid)
		}
	}
	for uid := range c.known {
		if !seen[uid] {
			delete(c.known, uid)
		}
	}
}

// observeIdle publishes an idle pod's eligibility once per idle period, and swaps it out when
// the scheduler asked for this period.
func (c *Controller) observeIdle(ctx context.Context, p *Pod) {
	uid := string(p.Pod.UID)
	period := fairwayv1alpha1.FormatGPUIdleObserved(fairwayv1alpha1.GPUIdleObserved(p.Pod))
	if fairwayv1alpha1.GPUIdleConditionOf(p.Pod) == nil {
		return // the condition is not written yet: the period is not known
	}
	c.mu.Lock()
	assessed, refused := c.assessed[uid] == period, c.refused[uid] == period
	c.mu.Unlock()
	if refused {
		return
	}
	if fairwayv1alpha1.GPUSwapRequested(p.Pod) {
		c.swapOut(ctx, p, period)
		return
	}
	if assessed {
		return
	}
	why := c.ineligible(ctx, p)
	state := fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwapEligible, Bytes: p.Bytes, PIDs: slices.Clone(p.PIDs)}
	if why != "" {
		state = fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwapIneligible, Reason: why}
	}
	c.opts.Writer.Write(p.Pod, &state, nil)
	c.mu.Lock()
	c.assessed[uid] = period
	c.mu.Unlock()
	if why != "" {
		c.opts.Writer.Event(p.Pod, false, "GPUSwapIneligible", "Its GPU is lent only the memory it leaves free: "+why)
	}
}

// ineligible says why the pod's GPU memory may not be swapped now, or "".
func (c *Controller) ineligible(ctx context.Context, p *Pod) string {
	if len(p.PIDs) == 0 || p.Bytes <= 0 {
		return "it has no GPU process holding memory"
	}
	for _, v := range p.Pod.Spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == fairwayv1alpha1.MPSDriverName {
			return "its processes are MPS clients, which the CUDA driver cannot checkpoint"
		}
	}
	for _, pid := range p.PIDs {
		s, err := c.opts.API.State(pid)
		if err != nil {
			return fmt.Sprintf("the CUDA driver cannot tell the checkpoint state of its process %d: %v", pid, err)
		}
		if s != checkpoint.Running {
			return fmt.Sprintf("its process %d is %s, not running", pid, s)
		}
	}
	return c.noRoom(ctx, p)
}

// noRoom says why the host cannot take the pod's GPU memory, or "".
func (c *Controller) noRoom(ctx context.Context, p *Pod) string {
	c.mu.Lock()
	var swapped int64
	for _, r := range c.records {
		swapped += r.bytes
	}
	c.mu.Unlock()
	if swapped+p.Bytes > c.opts.Limit {
		return fmt.Sprintf("%s of GPU memory would pass the node's swap limit, %s (%s swapped already)",
			size(p.Bytes), size(c.opts.Limit), size(swapped))
	}
	room, err := c.opts.HostRoom(ctx)
	if err != nil {
		return fmt.Sprintf("the node's free host memory is unknown: %v", err)
	}
	if room-swapped < p.Bytes {
		return fmt.Sprintf("the node's host memory has %s left beyond what its pods hold, less than its %s of GPU memory",
			size(max(room-swapped, 0)), size(p.Bytes))
	}
	if c.opts.PodRoom != nil {
		if room, ok := c.opts.PodRoom(p.Pod, p.PIDs); ok && room < p.Bytes {
			return fmt.Sprintf("its memory limit leaves %s, less than its %s of GPU memory (the driver keeps the copy in the pod's own memory)",
				size(room), size(p.Bytes))
		}
	}
	return ""
}

// swapOut locks every GPU process of the pod, then checkpoints each. Any failure undoes what was
// done, publishes the pod Ineligible with the reason (its GPU is then lent its free memory only)
// and is not retried in this idle period.
func (c *Controller) swapOut(ctx context.Context, p *Pod, period string) {
	uid := string(p.Pod.UID)
	log := c.opts.Log.WithValues("pod", klog.KObj(p.Pod))
	refuse := func(stage, why string) {
		c.mu.Lock()
		c.refused[uid], c.assessed[uid] = period, period
		c.stats.Failed[stage]++
		c.mu.Unlock()
		log.Info("GPU memory not swapped out", "stage", stage, "reason", why)
		c.opts.Writer.Write(p.Pod, &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwapIneligible, Reason: why}, nil)
		c.opts.Writer.Event(p.Pod, true, "GPUSwapRefused", "Its GPU memory stays on the GPU, and its GPU is lent only the memory it leaves free: "+why)
	}
	if why := c.ineligible(ctx, p); why != "" {
		refuse("check", why)
		return
	}
	start := c.opts.Clock.Now()
	api := c.opts.API
	var locked []int
	for _, pid := range p.PIDs {
		if err := api.Lock(pid, c.opts.LockTimeout); err != nil {
			c.unlock(log, locked)
			why := fmt.Sprintf("locking its process %d: %v", pid, err)
			if errors.Is(err, checkpoint.ErrTimeout) {
				why = fmt.Sprintf("its process %d did not stop its GPU work within %s (a kernel still running)", pid, c.opts.LockTimeout)
			}
			refuse("lock", why)
			return
		}
		locked = append(locked, pid)
	}
	var done []int
	for _, pid := range p.PIDs {
		if err := api.Checkpoint(pid); err != nil {
			why := fmt.Sprintf("checkpointing its process %d: %v", pid, err)
			if errors.Is(err, checkpoint.ErrNotSupported) {
				why = fmt.Sprintf("the CUDA driver cannot checkpoint its process %d (an MPS client, memory shared over IPC, or UVM): %v", pid, err)
			}
			bad := c.restore(done)
			c.unlock(log, locked[len(done):]) // those restored are unlocked already
			if len(bad) > 0 {
				// What was checkpointed cannot come back: the pod is in trouble, not just refused.
				c.fail(p.Pod, p, fmt.Sprintf("%s; then restoring the processes already checkpointed failed: %s", why, strings.Join(bad, "; ")))
				return
			}
			refuse("checkpoint", why)
			return
		}
		done = append(done, pid)
	}
	took := c.opts.Clock.Since(start)
	r := &swapRecord{pod: p.Pod, gpus: slices.Clone(p.GPUs), pids: slices.Clone(p.PIDs), bytes: p.Bytes, out: took,
		cpu: map[int]time.Duration{}, restored: map[int]bool{}}
	for _, pid := range r.pids {
		if t, err := c.opts.CPU(pid); err == nil {
			r.cpu[pid] = t
		}
	}
	c.mu.Lock()
	c.records[uid] = r
	c.assessed[uid] = period
	c.stats.Out = append(c.stats.Out, took)
	c.mu.Unlock()
	// Swap-in copies the same bytes the other way, over the same link: the swap-out's time is
	// the estimate the scheduler takes from the loans' grace period.
	in := max(took.Milliseconds(), 1)
	log.Info("GPU memory swapped out", "bytes", p.Bytes, "took", took.String(), "pids", p.PIDs)
	c.opts.Writer.Write(p.Pod, &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwappedOut, Bytes: p.Bytes, SwapInMillis: in, PIDs: slices.Clone(p.PIDs)},
		&Condition{Swapped: true, Reason: "SwappedOut", At: c.opts.Clock.Now(),
			Message: fmt.Sprintf("%s of GPU memory moved to host RAM in %s while the GPU is lent; it comes back at the pod's next GPU work", size(p.Bytes), took.Round(time.Millisecond))})
	c.opts.Writer.Event(p.Pod, false, "GPUSwappedOut", fmt.Sprintf("%s of GPU memory moved to host RAM in %s", size(p.Bytes), took.Round(time.Millisecond)))
}

// unlock unlocks pids, logging what fails (a process that cannot be unlocked stays blocked:
// nothing more the agent can do than say so).
func (c *Controller) unlock(log logr.Logger, pids []int) {
	for _, pid := range pids {
		if err := c.opts.API.Unlock(pid); err != nil {
			log.Error(err, "Unlocking a process after a refused swap", "pid", pid)
		}
	}
}

// restore restores and unlocks pids; it returns what failed.
func (c *Controller) restore(pids []int) []string {
	var bad []string
	for _, pid := range pids {
		if err := c.opts.API.Restore(pid); err != nil {
			bad = append(bad, fmt.Sprintf("process %d: %v", pid, err))
			continue
		}
		if err := c.opts.API.Unlock(pid); err != nil {
			bad = append(bad, fmt.Sprintf("process %d: %v", pid, err))
		}
	}
	return bad
}

// observeSwapped watches a swapped pod for work, and restores a waking one once its loans are
// gone.
func (c *Controller) observeSwapped(v View, p *Pod, r *swapRecord) {
	c.mu.Lock()
	r.pod = p.Pod
	ph := r.phase
	c.mu.Unlock()
	switch ph {
	case failed:
		c.clearIfExited(r)
		return
	case swappedOut:
		why, silent := c.woke(r)
		switch {
		case silent:
			c.clearIfExited(r)
			return
		case why == "":
			return
		}
		c.mu.Lock()
		r.phase, r.wokeAt, r.wake = waking, v.At, why
		c.mu.Unlock()
		c.opts.Log.Info("Swapped-out pod works: returning its GPU", "pod", klog.KObj(p.Pod), "sign", why)
	}
	// waking: the loans go first (the scheduler evicts them once GPUIdle is False, which Work
	// makes the monitor write); the restore needs their memory.
	for _, g := range r.gpus {
		if v.Loans[g] > 0 {
			return
		}
	}
	c.swapIn(v, r)
}

// woke says what sign of work a swapped pod showed since the last poll, or "". silent is true
// when no process of the pod could be read: they may all have exited (clearIfExited).
func (c *Controller) woke(r *swapRecord) (why string, silent bool) {
	silent = true
	for _, pid := range r.pids {
		t, err := c.opts.CPU(pid)
		if err != nil {
			continue // gone, or going with its pod
		}
		silent = false
		prev, ok := r.cpu[pid]
		r.cpu[pid] = t
		if ok && t-prev > c.opts.WakeCPU {
			return fmt.Sprintf("its swapped-out process %d used %s of CPU since the last poll (more than %s)", pid, (t - prev).Round(time.Millisecond), c.opts.WakeCPU), false
		}
	}
	return "", silent
}

// clearIfExited ends the record of a swapped pod whose swapped processes have all exited (its
// kernel was restarted, or killed): the driver freed their copy with them, nothing of the pod
// is on the host any more, and its GPU is lent again as any idle pod's, its free memory only.
func (c *Controller) clearIfExited(r *swapRecord) {
	uid := string(r.pod.UID)
	for _, pid := range r.pids {
		if c.alive(uid, pid) {
			return
		}
	}
	c.mu.Lock()
	delete(c.records, uid)
	c.mu.Unlock()
	msg := fmt.Sprintf("its swapped-out processes %v have exited: the %s they had on the host went with them", r.pids, size(r.bytes))
	c.opts.Log.Info("Swapped-out processes exited", "pod", klog.KObj(r.pod), "pids", r.pids)
	c.opts.Writer.Write(r.pod, nil, &Condition{Swapped: false, Reason: "ProcessesExited", Message: msg, At: c.opts.Clock.Now()})
	c.opts.Writer.Event(r.pod, false, "GPUSwapCleared", msg)
}

// alive reports whether pid is still a process of the pod uid that the driver knows.
func (c *Controller) alive(uid string, pid int) bool {
	if c.opts.Owner != nil {
		if owner, ok := c.opts.Owner(pid); !ok || owner != uid {
			return false
		}
	}
	_, err := c.opts.API.State(pid)
	return !errors.Is(err, checkpoint.ErrNoProcess)
}

// swapIn restores every process, then unlocks them all, so that the pod's processes resume
// together. A restore short of GPU memory is retried at the next poll (a loan may still be
// exiting after its pod is gone); any other failure is final.
func (c *Controller) swapIn(v View, r *swapRecord) {
	log := c.opts.Log.WithValues("pod", klog.KObj(r.pod))
	for _, pid := range r.pids {
		if r.restored[pid] {
			continue
		}
		if err := c.opts.API.Restore(pid); err != nil {
			if errors.Is(err, checkpoint.ErrOutOfMemory) {
				log.V(1).Info("Restore waits for GPU memory", "pid", pid)
				return
			}
			c.fail(r.pod, nil, fmt.Sprintf("restoring its process %d: %v", pid, err))
			return
		}
		r.restored[pid] = true
	}
	for _, pid := range r.pids {
		if err := c.opts.API.Unlock(pid); err != nil {
			c.fail(r.pod, nil, fmt.Sprintf("unlocking its process %d after the restore: %v", pid, err))
			return
		}
	}
	took := c.opts.Clock.Now().Sub(r.wokeAt)
	c.mu.Lock()
	delete(c.records, string(r.pod.UID))
	c.stats.In = append(c.stats.In, took)
	c.mu.Unlock()
	log.Info("GPU memory swapped in", "bytes", r.bytes, "sinceWork", took.String())
	c.opts.Writer.Write(r.pod, nil, &Condition{Swapped: false, Reason: "Restored", At: c.opts.Clock.Now(),
		Message: fmt.Sprintf("%s of GPU memory back on the GPU, %s after the pod's first sign of work", size(r.bytes), took.Round(time.Millisecond))})
	c.opts.Writer.Event(r.pod, false, "GPUSwappedIn", fmt.Sprintf("%s of GPU memory back on the GPU, %s after the pod's first sign of work (%s)", size(r.bytes), took.Round(time.Millisecond), r.wake))
}

// fail records a pod whose memory could not come back. It stays awake for good (Work), so its
// GPU is never lent again, and says so on the pod (annotation, condition, warning event): its
// user must restart the notebook's kernel.
func (c *Controller) fail(pod *corev1.Pod, p *Pod, why string) {
	uid := string(pod.UID)
	c.mu.Lock()
	r := c.records[uid]
	if r == nil {
		r = &swapRecord{pod: pod, pids: slices.Clone(p.PIDs), gpus: slices.Clone(p.GPUs), bytes: p.Bytes}
		c.records[uid] = r
	}
	r.phase, r.reason = failed, why
	c.stats.Failed["restore"]++
	c.mu.Unlock()
	c.opts.Log.Error(errors.New(why), "GPU memory could not be restored", "pod", klog.KObj(pod))
	msg := "Its GPU memory could not be brought back from host RAM: " + why + ". Restart the notebook's kernel; its GPU is not lent meanwhile."
	c.opts.Writer.Write(pod, &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwapRestoreFailed, Bytes: r.bytes, Reason: why, PIDs: slices.Clone(r.pids)},
		&Condition{Swapped: true, Reason: "RestoreFailed", Message: msg, At: c.opts.Clock.Now()})
	c.opts.Writer.Event(pod, true, "GPUSwapRestoreFailed", msg)
}

// size formats n in GiB or MiB for messages.
func size(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
