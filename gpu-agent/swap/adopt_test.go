package swap

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// restart replaces the controller with a new one over the same driver, writer and node, as an
// agent restart does: all it knew is gone.
func (h *harness) restart() {
	h.c = New(h.c.opts)
}

// published is pod as the API server has it after the writer's last write: with the swap state
// the agent published, or without one.
func (h *harness) published(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	if s := h.w.state(pod.UID); s != nil {
		pod.Annotations[fairwayv1alpha1.GPUSwapAnnotation] = fairwayv1alpha1.FormatGPUSwap(*s)
	} else {
		delete(pod.Annotations, fairwayv1alpha1.GPUSwapAnnotation)
	}
	return pod
}

func awake(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	return pod
}

// swapOutNotebook makes a notebook (PID 100, 6 MiB of a pattern on a 10 MiB GPU) idle and swapped out
// at the scheduler's request, with a loan (PID 200) holding 9 MiB of the GPU.
func swapOutNotebook(t *testing.T) (*harness, *corev1.Pod, []byte) {
	t.Helper()
	h := newHarness(t, 10*mib, 32<<30)
	owner := pattern(6*mib, 0x5a)
	if err := h.mock.Spawn(100, 0, owner); err != nil {
		t.Fatal(err)
	}
	h.cpu[100] = time.Second
	nb := notebook("nb1")
	h.observe(nb, true, []int{100}, int64(len(owner)), 0)
	h.observe(requested(nb), true, []int{100}, int64(len(owner)), 0)
	if s := h.w.state("nb1"); s == nil || s.State != fairwayv1alpha1.GPUSwappedOut || len(s.PIDs) != 1 || s.PIDs[0] != 100 {
		t.Fatalf("published %+v, want SwappedOut naming process 100", s)
	}
	if err := h.mock.Spawn(200, 0, make([]byte, 9*mib)); err != nil {
		t.Fatalf("the loan cannot have 90%% of the GPU: %v", err)
	}
	return h, requested(nb), owner
}

// checkRestored checks that the owner has every byte back, runs, and that the pod's swap is over.
func checkRestored(t *testing.T, h *harness, owner []byte, reason string) {
	t.Helper()
	if h.c.Swapped("nb1") {
		t.Fatal("still swapped")
	}
	if got, err := h.mock.Memory(100); err != nil || !bytes.Equal(got, owner) {
		t.Fatalf("the owner's memory differs after the swap-in (%v)", err)
	}
	if !h.mock.Touch(100) {
		t.Fatal("the owner is still locked")
	}
	if s := h.w.state("nb1"); s != nil {
		t.Fatalf("swap state %+v left after the restore", s)
	}
	if c := h.w.conds["nb1"]; c == nil || c.Swapped || c.Reason != reason {
		t.Fatalf("condition %+v, want False with reason %s", c, reason)
	}
}

// An agent that restarts while a notebook is swapped out takes it back from what it published
// and from the driver: the loan keeps the GPU (nothing is published again, so it is not lent a
// second time), and the notebook's first work after the restart brings every byte back.
func TestRestartKeepsSwapAndSwapsInOnActivity(t *testing.T) {
	h, nb, owner := swapOutNotebook(t)
	h.restart()
	before := h.w.state("nb1")
	h.observe(h.published(nb), true, nil, 0, 1)
	if !h.c.Swapped("nb1") {
		t.Fatal("the restarted agent lost the swapped-out notebook")
	}
	if s := h.w.state("nb1"); !s.Equal(*before) {
		t.Fatalf("the restarted agent published %+v over %+v", s, before)
	}
	if st := h.c.TakeStats(); st.Swapped["nb1"] != int64(len(owner)) {
		t.Errorf("swapped bytes after the restart %v, want %d", st.Swapped, len(owner))
	}
	// Quiet polls: the notebook stays swapped and its GPU stays lent.
	for range 3 {
		h.observe(h.published(nb), true, nil, 0, 1)
		if r, _ := h.c.Work("nb1"); r != "" {
			t.Fatalf("a quiet swapped notebook counts as working after the restart (%s)", r)
		}
	}
	h.work(100)
	h.observe(h.published(nb), true, nil, 0, 1)
	if r, msg := h.c.Work("nb1"); r != "GPUSwapIn" || !strings.Contains(msg, "process 100") {
		t.Fatalf("Work = %q %q, want GPUSwapIn naming the process", r, msg)
	}
	h.observe(awake(h.published(nb)), false, nil, 0, 1)
	if _, err := h.mock.Memory(100); err == nil {
		t.Fatal("restored while the loan is still on the GPU")
	}
	h.mock.Exit(200)
	h.observe(awake(h.published(nb)), false, nil, 0, 0)
	checkRestored(t, h, owner, "Restored")
	if st := h.c.TakeStats(); len(st.In) != 1 {
		t.Errorf("swap-ins after the restart %v, want 1", st.In)
	}
}

// Each state a restart can find a swap in, from what the earlier agent published and what the
// driver says now.
func TestRestartFindsEveryState(t *testing.T) {
	for name, tc := range map[string]struct {
		// before changes the node and returns the pod as the restarted agent first sees it.
		before func(h *harness, nb *corev1.Pod) *corev1.Pod
		idle   bool
		// loans on the GPU at that poll.
		loans int
		// check runs after the first poll of the restarted agent.
		check func(t *testing.T, h *harness, owner []byte)
	}{
		// The notebook woke, and the agent restarted before the restore: the restore follows.
		"waking": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.work(100)
			h.observe(h.published(nb), true, nil, 0, 1)
			return awake(h.published(nb))
		}, false, 1, func(t *testing.T, h *harness, owner []byte) {
			if r, _ := h.c.Work("nb1"); r != "GPUSwapIn" {
				t.Fatalf("Work = %q, want the notebook kept awake until restored", r)
			}
			h.mock.Exit(200)
			h.observe(awake(h.published(notebook("nb1"))), false, nil, 0, 0)
			checkRestored(t, h, owner, "Restored")
		}},
		// The swap-out finished but its SwappedOut never landed: the swap is undone, since the
		// scheduler never lent the GPU for it.
		"SwappedOut never published": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			p := h.published(nb)
			p.Annotations[fairwayv1alpha1.GPUSwapAnnotation] = fairwayv1alpha1.FormatGPUSwap(fairwayv1alpha1.GPUSwap{
				State: fairwayv1alpha1.GPUSwapEligible, Bytes: 6 * mib, PIDs: []int{100}})
			return p
		}, true, 1, func(t *testing.T, h *harness, owner []byte) {
			if r, msg := h.c.Work("nb1"); r != "GPUSwapIn" || !strings.Contains(msg, "restarted") {
				t.Fatalf("Work = %q %q, want the swap undone", r, msg)
			}
			h.mock.Exit(200)
			h.observe(awake(h.published(notebook("nb1"))), false, nil, 0, 0)
			checkRestored(t, h, owner, "Restored")
		}},
		// The restore finished but the removal of SwappedOut never landed: it is published now.
		"restored, not published": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.mock.Exit(200)
			if err := h.mock.Restore(100); err != nil {
				h.t.Fatal(err)
			}
			if err := h.mock.Unlock(100); err != nil {
				h.t.Fatal(err)
			}
			return awake(h.published(nb))
		}, false, 0, func(t *testing.T, h *harness, owner []byte) {
			checkRestored(t, h, owner, "Restored")
		}},
		// The restore had locked the memory back on the GPU when the agent went: the unlock is
		// what is left.
		"restored, still locked": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.mock.Exit(200)
			if err := h.mock.Restore(100); err != nil {
				h.t.Fatal(err)
			}
			return awake(h.published(nb))
		}, false, 0, func(t *testing.T, h *harness, owner []byte) {
			h.observe(awake(h.published(notebook("nb1"))), false, nil, 0, 0)
			checkRestored(t, h, owner, "Restored")
		}},
		// The driver lost the process's CUDA state (a restore failed before the agent could say
		// so): the pod is held awake for good, with the reason.
		"failed restore not published": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.mock.Exit(200)
			h.mock.FailNext(100, checkpoint.OpRestore, checkpoint.InjectedError(checkpoint.OpRestore, 100, 999, "CUDA_ERROR_UNKNOWN"))
			_ = h.mock.Restore(100)
			return awake(h.published(nb))
		}, false, 0, func(t *testing.T, h *harness, _ []byte) {
			s := h.w.state("nb1")
			if s == nil || s.State != fairwayv1alpha1.GPUSwapRestoreFailed || !strings.Contains(s.Reason, "restarted") {
				t.Fatalf("state %+v, want RestoreFailed", s)
			}
			if r, _ := h.c.Work("nb1"); r != "GPUSwapRestoreFailed" {
				t.Fatalf("Work = %q: the pod may go idle and its GPU be lent", r)
			}
		}},
		// The notebook's kernel went while the agent was away: nothing of it is on the host.
		"processes exited": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.mock.Exit(100)
			return h.published(nb)
		}, true, 1, func(t *testing.T, h *harness, _ []byte) {
			// Over: the notebook, idle without GPU processes, cannot be swapped now.
			if s := h.w.state("nb1"); h.c.Swapped("nb1") || s == nil || s.State != fairwayv1alpha1.GPUSwapIneligible {
				t.Fatalf("swapped %v, state %+v; want the swap over", h.c.Swapped("nb1"), s)
			}
			if c := h.w.conds["nb1"]; c == nil || c.Swapped || c.Reason != "ProcessesExited" {
				t.Fatalf("condition %+v", c)
			}
		}},
		// The PID is another pod's process now: not this pod's to restore.
		"PID reused": {func(h *harness, nb *corev1.Pod) *corev1.Pod {
			h.c.opts.Owner = func(int) (string, bool) { return "someone-else", true }
			return h.published(nb)
		}, true, 1, func(t *testing.T, h *harness, _ []byte) {
			if h.c.Swapped("nb1") {
				t.Fatal("took another pod's process as the notebook's")
			}
			if c := h.w.conds["nb1"]; c == nil || c.Reason != "ProcessesExited" {
				t.Fatalf("condition %+v", c)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h, nb, owner := swapOutNotebook(t)
			pod := tc.before(h, nb)
			h.restart()
			h.observe(pod, tc.idle, nil, 0, tc.loans)
			tc.check(t, h, owner)
		})
	}
}

// A restarted agent keeps a RestoreFailed verdict while the pod's processes live, and lifts it
// once they exit (the user restarted the kernel): then the GPU may be lent again.
func TestRestartKeepsRestoreFailedUntilTheProcessesGo(t *testing.T) {
	h, nb, _ := swapOutNotebook(t)
	h.mock.Exit(200)
	h.mock.FailNext(100, checkpoint.OpRestore, checkpoint.InjectedError(checkpoint.OpRestore, 100, 999, "CUDA_ERROR_UNKNOWN"))
	h.work(100)
	h.observe(h.published(nb), true, nil, 0, 0)
	if s := h.w.state("nb1"); s == nil || s.State != fairwayv1alpha1.GPUSwapRestoreFailed {
		t.Fatalf("state %+v, want RestoreFailed", s)
	}
	failedState := h.w.state("nb1")
	h.restart()
	for range 2 {
		h.observe(awake(h.published(nb)), false, nil, 0, 0)
		if r, _ := h.c.Work("nb1"); r != "GPUSwapRestoreFailed" {
			t.Fatalf("Work = %q after the restart, want the pod held awake", r)
		}
	}
	if s := h.w.state("nb1"); !s.Equal(*failedState) {
		t.Errorf("state rewritten as %+v", s)
	}
	h.mock.Exit(100)
	h.observe(awake(h.published(nb)), false, nil, 0, 0)
	if h.c.Swapped("nb1") || h.w.state("nb1") != nil {
		t.Fatal("the verdict outlived the processes")
	}
	if c := h.w.conds["nb1"]; c == nil || c.Swapped || c.Reason != "ProcessesExited" {
		t.Fatalf("condition %+v", c)
	}
}

// A swapped-out notebook whose kernel is killed leaves nothing on the host: its swap ends.
func TestSwappedProcessesExit(t *testing.T) {
	h, nb, _ := swapOutNotebook(t)
	h.mock.Exit(100)
	h.mu.Lock()
	delete(h.cpu, 100)
	h.mu.Unlock()
	h.observe(nb, true, nil, 0, 1)
	if h.c.Swapped("nb1") || h.w.state("nb1") != nil {
		t.Fatal("a swap outlived its processes")
	}
	if ev := h.w.lastEvent(); !strings.Contains(ev, "GPUSwapCleared") {
		t.Errorf("event %q", ev)
	}
}

// busyAPI reports some processes mid-operation (Checkpointing, Restoring), as the driver does
// while a call of an agent that just went is still finishing.
type busyAPI struct {
	checkpoint.API
	busy map[int]bool
}

func (b *busyAPI) State(pid int) (checkpoint.State, error) {
	if b.busy[pid] {
		return checkpoint.Restoring, nil
	}
	return b.API.State(pid)
}

// A process the driver is still restoring is left alone until the operation ends: nothing is
// published for the pod, and it is taken back at the next poll.
func TestRestartWaitsForTheDriver(t *testing.T) {
	h, nb, _ := swapOutNotebook(t)
	api := &busyAPI{API: h.mock, busy: map[int]bool{100: true}}
	h.c.opts.API = api
	h.restart()
	writes := h.w.state("nb1")
	h.observe(h.published(nb), true, nil, 0, 1)
	if h.c.Swapped("nb1") || !h.w.state("nb1").Equal(*writes) {
		t.Fatal("acted on a pod whose process the driver is busy with")
	}
	api.busy[100] = false
	h.observe(h.published(nb), true, nil, 0, 1)
	if !h.c.Swapped("nb1") {
		t.Fatal("not taken back once the driver was done")
	}
}
