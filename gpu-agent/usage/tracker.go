package usage

import (
	"fmt"
	"time"
)

// TrackerConfig sets when a pod counts as idle.
type TrackerConfig struct {
	// ThresholdPercent: GPU utilization (the pod's processes' SM share, in percent) at or
	// below which the pod is not working.
	ThresholdPercent float64
	// IdleAfter is how long the pod must stay below the threshold, with no new GPU process and
	// no memory growth, before it is idle.
	IdleAfter time.Duration
	// MemoryGrowthBytes is how much the pod's GPU memory may grow above its reference (the
	// lowest it held since its last sign of work) without counting as work (allocator noise); 0
	// counts any growth.
	MemoryGrowthBytes uint64
}

// Activity is what one sample says about a pod's GPU work, summed over its GPUs.
type Activity struct {
	// SMPercent is the pod's utilization over the last sample period.
	SMPercent float64
	// PIDs are the pod's GPU processes.
	PIDs []uint32
	// MemoryBytes is the GPU memory the pod's processes hold.
	MemoryBytes uint64
	// Work, when set, is a sign of work NVML cannot show, with WorkMessage for people: the
	// CPU of a pod whose GPU memory is swapped out (package swap), whose CUDA calls block.
	Work, WorkMessage string
}

// Transition is a change of a pod's idleness, to be published.
type Transition struct {
	Idle bool
	// Reason is a CamelCase word for the condition: GPUIdle, or what woke the pod up
	// (GPUUtilization, GPUNewProcess, GPUMemoryGrowth).
	Reason string
	// Message says it for humans.
	Message string
	// At is the observation that caused the transition.
	At time.Time
	// IdleMemoryMiB is, on a transition to idle, the GPU memory that stays resident while the
	// pod's GPU is lent (fairway.dev/idle-gpu-memory-used); the Monitor fills it in, the
	// Tracker does not know it. Valid when IdleMemoryKnown.
	IdleMemoryMiB   uint64
	IdleMemoryKnown bool
}

type podIdleness struct {
	idle       bool
	lastActive time.Time
	// baseline is false until a first sample gave PIDs and memory to compare with.
	baseline bool
	pids     map[uint32]struct{}
	// memory is the reference growth is measured from: the memory at the last sign of work,
	// lowered whenever the pod frees some. Measuring from the previous sample instead would let
	// a pod creep up by just under the tolerance at every poll, unseen; while the GPU is lent,
	// every MiB the notebook takes is a MiB the loan was promised.
	memory uint64
}

// Tracker decides, per pod, idle or active from successive Activity samples. It is a pure
// state machine: time comes in with each sample (tests pass a fake clock's readings), and it
// does no I/O. It is not safe for concurrent use; Monitor owns it.
type Tracker struct {
	cfg  TrackerConfig
	pods map[string]*podIdleness
}

// NewTracker returns a tracker with no pods.
func NewTracker(cfg TrackerConfig) *Tracker {
	return &Tracker{cfg: cfg, pods: map[string]*podIdleness{}}
}

// Seed starts tracking a pod that was already idle since the given time, as its
// fairway.dev/GPUIdle condition says, so that an agent restart does not wake idle pods (and
// take their lent GPU back) for nothing. Pods not seeded start active at their first sample.
func (t *Tracker) Seed(uid string, idleSince time.Time) {
	t.pods[uid] = &podIdleness{idle: true, lastActive: idleSince}
}

// Tracked reports whether uid has state.
func (t *Tracker) Tracked(uid string) bool {
	_, ok := t.pods[uid]
	return ok
}

// Idle reports the pod's current state; false for an unknown pod.
func (t *Tracker) Idle(uid string) bool {
	p, ok := t.pods[uid]
	return ok && p.idle
}

// Forget drops a pod that left the node or stopped being tracked.
func (t *Tracker) Forget(uid string) { delete(t.pods, uid) }

// UIDs lists the tracked pods.
func (t *Tracker) UIDs() []string {
	out := make([]string, 0, len(t.pods))
	for uid := range t.pods {
		out = append(out, uid)
	}
	return out
}

// Observe feeds one sample of pod uid taken at now and returns the transition it causes, if
// any. A pod is active again at the first sign of work: utilization above the threshold, a GPU
// process that was not there in the previous sample, or memory growth (beyond the tolerance,
// from the lowest the pod held since its last sign of work); it becomes idle once
// IdleAfter has passed since the last sign of work.
func (t *Tracker) Observe(uid string, now time.Time, a Activity) (Transition, bool) {
	p, ok := t.pods[uid]
	if !ok {
		p = &podIdleness{lastActive: now}
		t.pods[uid] = p
	}
	reason, message := t.work(p, a)
	if reason != "" || !p.baseline {
		p.memory = a.MemoryBytes
	} else {
		p.memory = min(p.memory, a.MemoryBytes)
	}
	p.baseline = true
	p.pids = make(map[uint32]struct{}, len(a.PIDs))
	for _, pid := range a.PIDs {
		p.pids[pid] = struct{}{}
	}

	if reason != "" {
		p.lastActive = now
		if p.idle {
			p.idle = false
			return Transition{Idle: false, Reason: reason, Message: message, At: now}, true
		}
		return Transition{}, false
	}
	if !p.idle && now.Sub(p.lastActive) >= t.cfg.IdleAfter {
		p.idle = true
		return Transition{
			Idle:    true,
			Reason:  "GPUIdle",
			Message: fmt.Sprintf("GPU utilization at or below %g%% with no new process or memory growth for %s", t.cfg.ThresholdPercent, t.cfg.IdleAfter),
			At:      now,
		}, true
	}
	return Transition{}, false
}

// work returns why a sample counts as work, or "".
func (t *Tracker) work(p *podIdleness, a Activity) (reason, message string) {
	if a.Work != "" {
		return a.Work, a.WorkMessage
	}
	if a.SMPercent > t.cfg.ThresholdPercent {
		return "GPUUtilization", fmt.Sprintf("GPU utilization %.0f%% above %g%%", a.SMPercent, t.cfg.ThresholdPercent)
	}
	if !p.baseline {
		return "", ""
	}
	for _, pid := range a.PIDs {
		if _, seen := p.pids[pid]; !seen {
			return "GPUNewProcess", fmt.Sprintf("new GPU process %d", pid)
		}
	}
	if a.MemoryBytes > p.memory+t.cfg.MemoryGrowthBytes {
		return "GPUMemoryGrowth", fmt.Sprintf("GPU memory grew by %d MiB", (a.MemoryBytes-p.memory)>>20)
	}
	return "", ""
}
