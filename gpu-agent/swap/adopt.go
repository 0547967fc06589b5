package swap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// found is what the driver says, at a pod's first sight, of the processes an earlier agent may
// have swapped.
type found struct {
	// checkpointed are on the host; locked hold their memory on the GPU but block (locked before
	// a checkpoint, or restored before their unlock). Both are the swap's to finish.
	checkpointed, locked []int
	// running were never swapped or are back.
	running []int
	// lost are processes whose CUDA state the driver lost (Failed) or cannot tell; why says so.
	lost []int
	why  []string
	// busy: an operation on one of them is still under way (Checkpointing, Restoring).
	busy bool
}

func (f *found) ours() []int { return append(slices.Clone(f.checkpointed), f.locked...) }

// alive are the processes still there, in any state.
func (f *found) alive() []int { return append(append(f.ours(), f.lost...), f.running...) }

// adopt takes back, at this controller's first sight of a pod, what an earlier agent (before a
// restart) left of its swap. fairway.dev/gpu-swap says what the earlier agent published and names
// the processes (a checkpointed process holds nothing on its GPU, so NVML no longer lists it);
// the driver says where each one is now. So the earlier agent's writes that never landed are
// made up for: a swap-out whose SwappedOut was lost is undone, a swap-in whose removal was lost
// is published. It returns the pod's record when some of its memory is (or may be) on the host,
// and retry when the driver is still busy with one of its processes (the pod is left alone until
// the next poll).
func (c *Controller) adopt(v View, p *Pod) (r *swapRecord, retry bool) {
	prev, ok, err := fairwayv1alpha1.GPUSwapOf(p.Pod.Annotations)
	if err != nil {
		c.opts.Log.Error(err, "Reading the swap state an earlier agent wrote", "pod", klog.KObj(p.Pod))
	}
	if !ok || err != nil || prev.State == fairwayv1alpha1.GPUSwapIneligible {
		return nil, false
	}
	f := c.inspect(string(p.Pod.UID), append(slices.Clone(prev.PIDs), p.PIDs...))
	if f.busy {
		return nil, true
	}
	log := c.opts.Log.WithValues("pod", klog.KObj(p.Pod))
	ours := f.ours()
	switch {
	case prev.State == fairwayv1alpha1.GPUSwapRestoreFailed && len(f.alive()) > 0:
		// The earlier agent's verdict stands: the GPU stays with the pod until its processes go.
		r = c.record(p, prev, f.alive(), f.locked)
		r.phase, r.reason = failed, prev.Reason
		log.Info("Took back a pod whose GPU memory could not be restored", "pids", r.pids)
		return r, false
	case len(f.lost) > 0 && (len(ours) > 0 || prev.State == fairwayv1alpha1.GPUSwappedOut):
		c.record(p, prev, append(ours, f.lost...), f.locked)
		c.fail(p.Pod, nil, "after the gpu-agent restarted: "+strings.Join(f.why, "; "))
		return c.records[string(p.Pod.UID)], false
	case len(ours) > 0:
		r = c.record(p, prev, ours, f.locked)
		if prev.State != fairwayv1alpha1.GPUSwappedOut || !p.Idle || len(f.locked) > 0 {
			// A swap-out whose result was never published, a swap-in cut short, or a pod that
			// works: bring the memory back as soon as its loans are gone.
			r.phase, r.wokeAt = waking, v.At
			r.wake = fmt.Sprintf("the gpu-agent restarted during its swap (processes %v still swapped, published %s)", ours, prev.State)
		}
		log.Info("Took back a swapped-out pod after a restart", "pids", ours, "bytes", r.bytes, "waking", r.phase == waking)
		return r, false
	case prev.State == fairwayv1alpha1.GPUSwappedOut || prev.State == fairwayv1alpha1.GPUSwapRestoreFailed:
		// Nothing is on the host: the restore finished (or the processes went) before the earlier
		// agent could say so.
		reason, msg := "Restored", fmt.Sprintf("%s of GPU memory back on the GPU (found so after the gpu-agent restarted)", size(prev.Bytes))
		if len(f.running) == 0 {
			reason, msg = "ProcessesExited", fmt.Sprintf("its swapped-out processes %v have exited: the %s they had on the host went with them", prev.PIDs, size(prev.Bytes))
		}
		log.Info("Swap state left by an earlier agent is over", "reason", reason)
		c.opts.Writer.Write(p.Pod, nil, &Condition{Swapped: false, Reason: reason, Message: msg, At: c.opts.Clock.Now()})
	}
	return nil, false
}

// inspect asks the driver for the state of each of pids (duplicates once) that is still a
// process of the pod uid.
func (c *Controller) inspect(uid string, pids []int) found {
	var f found
	slices.Sort(pids)
	for _, pid := range slices.Compact(pids) {
		if c.opts.Owner != nil {
			if owner, ok := c.opts.Owner(pid); !ok || owner != uid {
				continue // exited, and its PID may be another pod's process now
			}
		}
		st, err := c.opts.API.State(pid)
		switch {
		case errors.Is(err, checkpoint.ErrNoProcess):
		case err != nil:
			f.lost = append(f.lost, pid)
			f.why = append(f.why, fmt.Sprintf("the CUDA driver cannot tell the checkpoint state of process %d: %v", pid, err))
		case st == checkpoint.Running:
			f.running = append(f.running, pid)
		case st == checkpoint.Locked:
			f.locked = append(f.locked, pid)
		case st == checkpoint.Checkpointed:
			f.checkpointed = append(f.checkpointed, pid)
		case st == checkpoint.Failed:
			f.lost = append(f.lost, pid)
			f.why = append(f.why, fmt.Sprintf("process %d's CUDA state was lost (%s)", pid, st))
		default:
			f.busy = true
		}
	}
	return f
}

// record makes and keeps the record of an adopted pod: pids are the processes the swap covers,
// locked those already holding their memory on the GPU (only their unlock is left).
func (c *Controller) record(p *Pod, prev fairwayv1alpha1.GPUSwap, pids, locked []int) *swapRecord {
	bytes := prev.Bytes
	if bytes == 0 {
		bytes = p.Bytes
	}
	r := &swapRecord{pod: p.Pod, gpus: slices.Clone(p.GPUs), pids: pids, bytes: bytes, out: time.Duration(prev.SwapInMillis) * time.Millisecond,
		cpu: map[int]time.Duration{}, restored: map[int]bool{}}
	for _, pid := range locked {
		r.restored[pid] = true
	}
	c.mu.Lock()
	c.records[string(p.Pod.UID)] = r
	c.mu.Unlock()
	return r
}
