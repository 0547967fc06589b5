package swap

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

const mib = 1 << 20

// fakeWriter keeps the last state and condition written per pod, and every event.
type fakeWriter struct {
	mu     sync.Mutex
	states map[types.UID]*fairwayv1alpha1.GPUSwap
	conds  map[types.UID]*Condition
	events []string
}

func newFakeWriter() *fakeWriter {
	return &fakeWriter{states: map[types.UID]*fairwayv1alpha1.GPUSwap{}, conds: map[types.UID]*Condition{}}
}

func (w *fakeWriter) Write(pod *corev1.Pod, state *fairwayv1alpha1.GPUSwap, cond *Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[pod.UID] = state
	if cond != nil {
		w.conds[pod.UID] = cond
	}
}

func (w *fakeWriter) Event(_ *corev1.Pod, warning bool, reason, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kind := "Normal"
	if warning {
		kind = "Warning"
	}
	w.events = append(w.events, kind+" "+reason+": "+message)
}

func (w *fakeWriter) state(uid types.UID) *fairwayv1alpha1.GPUSwap {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.states[uid]
}

func (w *fakeWriter) lastEvent() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 {
		return ""
	}
	return w.events[len(w.events)-1]
}

// harness is one node: a mock driver with one GPU, the controller, the CPU times of processes
// (what a test drives to show work) and the host memory room.
type harness struct {
	t     *testing.T
	mock  *checkpoint.Mock
	w     *fakeWriter
	c     *Controller
	clock *clocktesting.FakeClock
	cpu   map[int]time.Duration
	room  int64
	mu    sync.Mutex
}

func newHarness(t *testing.T, gpuBytes int64, limit int64) *harness {
	h := &harness{t: t, mock: checkpoint.NewMock(), w: newFakeWriter(), clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)),
		cpu: map[int]time.Duration{}, room: 64 << 30}
	h.mock.AddGPU(0, gpuBytes)
	h.c = New(Options{
		API: h.mock, Writer: h.w, Limit: limit, Clock: h.clock, Log: logr.Discard(),
		HostRoom: func(context.Context) (int64, error) { h.mu.Lock(); defer h.mu.Unlock(); return h.room, nil },
		CPU: func(pid int) (time.Duration, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if t, ok := h.cpu[pid]; ok {
				return t, nil
			}
			return 0, errors.New("no such process")
		},
	})
	return h
}

// work is the owner's kernel process running a cell: CPU time, then its first CUDA call, which
// blocks while it is swapped out.
func (h *harness) work(pid int) {
	h.mu.Lock()
	h.cpu[pid] += 150 * time.Millisecond
	h.mu.Unlock()
	h.mock.Touch(pid)
}

var idleAt = time.Date(2026, 3, 1, 7, 0, 0, 250000000, time.UTC)

func notebook(uid string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "jhub", Name: "nb-" + uid, UID: types.UID(uid),
		Annotations: map[string]string{fairwayv1alpha1.GPUIdleObservedAnnotation: fairwayv1alpha1.FormatGPUIdleObserved(idleAt)}}}
	p.Status.Conditions = []corev1.PodCondition{{Type: fairwayv1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(idleAt.Truncate(time.Second))}}
	return p
}

func requested(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Annotations[fairwayv1alpha1.GPUSwapRequestAnnotation] = fairwayv1alpha1.FormatGPUSwapRequest(idleAt)
	return p
}

func (h *harness) observe(pod *corev1.Pod, idle bool, pids []int, bytes int64, loans int) {
	h.clock.Step(500 * time.Millisecond)
	h.c.Observe(context.Background(), View{At: h.clock.Now(), Loans: map[int]int{0: loans},
		Pods: []Pod{{Pod: pod, GPUs: []int{0}, PIDs: pids, Bytes: bytes, Idle: idle}}})
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131+i>>8) ^ seed
	}
	return b
}

// Five times: the owner holds 60% of the GPU with a pattern and idles, the scheduler asks, its
// memory goes to the host, a loan takes 90% of the GPU, the owner works, the loan leaves, and
// the owner's memory is back, every byte of it.
func TestSwapCyclesKeepEveryByte(t *testing.T) {
	const gpu = 10 * mib
	h := newHarness(t, gpu, 32<<30)
	owner := pattern(6*mib, 0xa5)
	if err := h.mock.Spawn(100, 0, owner); err != nil {
		t.Fatal(err)
	}
	h.cpu[100] = time.Second
	nb := notebook("nb1")
	for cycle := range 5 {
		h.observe(nb, true, []int{100}, int64(len(owner)), 0)
		if s := h.w.state("nb1"); s == nil || s.State != fairwayv1alpha1.GPUSwapEligible || s.Bytes != int64(len(owner)) {
			t.Fatalf("cycle %d: idle notebook published %+v, want Eligible with %d bytes", cycle, s, len(owner))
		}
		h.observe(requested(nb), true, []int{100}, int64(len(owner)), 0)
		s := h.w.state("nb1")
		if s == nil || s.State != fairwayv1alpha1.GPUSwappedOut || s.Bytes != int64(len(owner)) || s.SwapInMillis < 1 {
			t.Fatalf("cycle %d: after the request %+v, want SwappedOut", cycle, s)
		}
		if used := h.mock.DeviceUsed(0); used != 0 {
			t.Fatalf("cycle %d: %d bytes still on the GPU", cycle, used)
		}
		if !h.c.Swapped("nb1") {
			t.Fatalf("cycle %d: not swapped", cycle)
		}
		// The loan: 90% of the GPU, and working.
		if err := h.mock.Spawn(200, 0, make([]byte, 9*mib)); err != nil {
			t.Fatalf("cycle %d: the loan cannot have 90%% of the GPU: %v", cycle, err)
		}
		h.observe(requested(nb), true, nil, 0, 1)
		if r, _ := h.c.Work("nb1"); r != "" {
			t.Fatalf("cycle %d: a quiet swapped notebook counts as working (%s)", cycle, r)
		}
		// The owner runs a cell.
		h.work(100)
		h.observe(requested(nb), true, nil, 0, 1)
		if r, msg := h.c.Work("nb1"); r != "GPUSwapIn" || !strings.Contains(msg, "process 100") {
			t.Fatalf("cycle %d: Work = %q %q, want GPUSwapIn naming the process", cycle, r, msg)
		}
		// The monitor writes GPUIdle False; the scheduler evicts the loan, which takes a poll.
		awake := nb.DeepCopy()
		awake.Status.Conditions[0].Status = corev1.ConditionFalse
		h.observe(awake, false, nil, 0, 1)
		if _, err := h.mock.Memory(100); err == nil {
			t.Fatalf("cycle %d: restored while the loan is still on the GPU", cycle)
		}
		// The loan's pod is gone but its process still exits: the restore waits for the room.
		h.observe(awake, false, nil, 0, 0)
		if !h.c.Swapped("nb1") {
			t.Fatalf("cycle %d: restored into memory the loan still holds", cycle)
		}
		h.mock.Exit(200)
		h.observe(awake, false, nil, 0, 0)
		if h.c.Swapped("nb1") {
			t.Fatalf("cycle %d: not restored once the loan left", cycle)
		}
		got, err := h.mock.Memory(100)
		if err != nil || !bytes.Equal(got, owner) {
			t.Fatalf("cycle %d: the owner's memory differs after the swap (%v)", cycle, err)
		}
		if !h.mock.Touch(100) {
			t.Fatalf("cycle %d: the owner is still locked", cycle)
		}
		if s := h.w.state("nb1"); s != nil {
			t.Fatalf("cycle %d: swap state %+v left after the restore", cycle, s)
		}
		if c := h.w.conds["nb1"]; c == nil || c.Swapped || c.Reason != "Restored" {
			t.Fatalf("cycle %d: condition %+v, want Restored", cycle, c)
		}
		if r, _ := h.c.Work("nb1"); r != "" {
			t.Fatalf("cycle %d: restored notebook still held awake (%s)", cycle, r)
		}
		// The next idle period.
		idleAt = idleAt.Add(time.Hour)
		nb = notebook("nb1")
	}
	st := h.c.TakeStats()
	if len(st.Out) != 5 || len(st.In) != 5 {
		t.Errorf("stats: %d swap-outs and %d swap-ins, want 5 of each", len(st.Out), len(st.In))
	}
}

// A request for an earlier idle period does nothing: the notebook woke and went idle again.
func TestStaleRequestDoesNotSwap(t *testing.T) {
	h := newHarness(t, 10*mib, 32<<30)
	_ = h.mock.Spawn(100, 0, pattern(mib, 1))
	h.cpu[100] = 0
	nb := notebook("nb1")
	nb.Annotations[fairwayv1alpha1.GPUSwapRequestAnnotation] = fairwayv1alpha1.FormatGPUSwapRequest(idleAt.Add(-time.Hour))
	h.observe(nb, true, []int{100}, mib, 0)
	if h.c.Swapped("nb1") || h.mock.DeviceUsed(0) != mib {
		t.Fatal("a stale request swapped the notebook out")
	}
}

// Every way a swap-out is refused leaves the notebook's processes running with their memory on
// the GPU, publishes Ineligible with the reason and an event, and is not retried in the same idle
// period (the GPU is lent its free memory only, as without swap).
func TestSwapOutRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(h *harness, pod *corev1.Pod)
		want  string
	}{
		"lock timeout": {func(h *harness, _ *corev1.Pod) { h.mock.Busy(100, true) }, "did not stop its GPU work within"},
		"not checkpointable": {func(h *harness, _ *corev1.Pod) { h.mock.NotCheckpointable(101, "IPC") },
			"cannot checkpoint its process 101"},
		"MPS client": {func(_ *harness, pod *corev1.Pod) {
			pod.Spec.Volumes = []corev1.Volume{{Name: "mps", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: fairwayv1alpha1.MPSDriverName}}}}
		}, "MPS clients"},
		"host memory": {func(h *harness, _ *corev1.Pod) { h.room = 3 * mib }, "host memory has 3 MiB left"},
		"node limit":  {func(h *harness, _ *corev1.Pod) { h.c.opts.Limit = 2 * mib }, "swap limit"},
		"pod memory limit": {func(h *harness, _ *corev1.Pod) {
			h.c.opts.PodRoom = func(*corev1.Pod, []int) (int64, bool) { return mib, true }
		}, "its memory limit leaves 1 MiB"},
		"lock fails": {func(h *harness, _ *corev1.Pod) {
			h.mock.FailNext(101, checkpoint.OpLock, checkpoint.InjectedError(checkpoint.OpLock, 101, 999, "CUDA_ERROR_UNKNOWN"))
		}, "locking its process 101"},
		"state unknown": {func(h *harness, _ *corev1.Pod) {
			h.mock.FailNext(100, checkpoint.OpState, checkpoint.InjectedError(checkpoint.OpState, 100, 500, "CUDA_ERROR_NOT_FOUND"))
		}, "cannot tell the checkpoint state of its process 100"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 10*mib, 32<<30)
			a, b := pattern(2*mib, 1), pattern(2*mib, 2)
			_ = h.mock.Spawn(100, 0, a)
			_ = h.mock.Spawn(101, 0, b)
			h.cpu[100], h.cpu[101] = 0, 0
			pod := requested(notebook("nb1"))
			tc.setup(h, pod)
			h.observe(pod, true, []int{100, 101}, 4*mib, 0)
			s := h.w.state("nb1")
			if s == nil || s.State != fairwayv1alpha1.GPUSwapIneligible || !strings.Contains(s.Reason, tc.want) {
				t.Fatalf("state %+v, want Ineligible with %q", s, tc.want)
			}
			if ev := h.w.lastEvent(); !strings.Contains(ev, tc.want) {
				t.Errorf("event %q does not say %q", ev, tc.want)
			}
			for pid, want := range map[int][]byte{100: a, 101: b} {
				if st, _ := h.mock.State(pid); st != checkpoint.Running {
					t.Errorf("process %d left %s", pid, st)
				}
				if got, err := h.mock.Memory(pid); err != nil || !bytes.Equal(got, want) {
					t.Errorf("process %d's memory changed (%v)", pid, err)
				}
			}
			if h.c.Swapped("nb1") {
				t.Error("recorded as swapped")
			}
			// Not retried in this idle period, even once the cause is gone.
			h.mock.Busy(100, false)
			h.room, h.c.opts.Limit, h.c.opts.PodRoom = 64<<30, 32<<30, nil
			h.observe(pod, true, []int{100, 101}, 4*mib, 0)
			if h.c.Swapped("nb1") {
				t.Error("a refused swap was retried in the same idle period")
			}
		})
	}
}

// A failed restore leaves the pod awake for good (so its GPU is never lent), with the
// RestoreFailed state, a condition and a warning event; a restore short of memory is retried.
func TestRestoreFailureHoldsTheGPU(t *testing.T) {
	h := newHarness(t, 10*mib, 32<<30)
	_ = h.mock.Spawn(100, 0, pattern(6*mib, 3))
	h.cpu[100] = 0
	nb := notebook("nb1")
	h.observe(requested(nb), true, []int{100}, 6*mib, 0)
	if !h.c.Swapped("nb1") {
		t.Fatal("not swapped")
	}
	h.mock.FailNext(100, checkpoint.OpRestore, checkpoint.InjectedError(checkpoint.OpRestore, 100, 999, "CUDA_ERROR_UNKNOWN"))
	h.work(100)
	h.observe(requested(nb), true, nil, 0, 0)
	s := h.w.state("nb1")
	if s == nil || s.State != fairwayv1alpha1.GPUSwapRestoreFailed || !strings.Contains(s.Reason, "CUDA_ERROR_UNKNOWN") {
		t.Fatalf("state %+v, want RestoreFailed", s)
	}
	if c := h.w.conds["nb1"]; c == nil || !c.Swapped || c.Reason != "RestoreFailed" || !strings.Contains(c.Message, "Restart the notebook's kernel") {
		t.Fatalf("condition %+v", c)
	}
	if ev := h.w.lastEvent(); !strings.HasPrefix(ev, "Warning GPUSwapRestoreFailed") {
		t.Errorf("event %q", ev)
	}
	for range 3 {
		h.observe(nb, false, nil, 0, 0)
		if r, _ := h.c.Work("nb1"); r != "GPUSwapRestoreFailed" {
			t.Fatalf("Work = %q: a pod whose restore failed may go idle and be lent", r)
		}
	}
	if st := h.c.TakeStats(); st.Failed["restore"] != 1 || st.Swapped["nb1"] != 6*mib {
		t.Errorf("stats %+v", st)
	}
	// The pod leaves: its record goes.
	h.c.Observe(context.Background(), View{At: h.clock.Now()})
	if h.c.Swapped("nb1") {
		t.Error("record of a pod that left kept")
	}
}

// A checkpoint refused for the second process restores the first, which had been checkpointed;
// if that restore fails too, the pod is in trouble, not merely ineligible.
func TestPartialCheckpointRollback(t *testing.T) {
	h := newHarness(t, 10*mib, 32<<30)
	a := pattern(2*mib, 4)
	_ = h.mock.Spawn(100, 0, a)
	_ = h.mock.Spawn(101, 0, pattern(2*mib, 5))
	h.cpu[100], h.cpu[101] = 0, 0
	h.mock.NotCheckpointable(101, "UVM")
	h.mock.FailNext(100, checkpoint.OpRestore, checkpoint.InjectedError(checkpoint.OpRestore, 100, 999, "CUDA_ERROR_UNKNOWN"))
	h.observe(requested(notebook("nb1")), true, []int{100, 101}, 4*mib, 0)
	s := h.w.state("nb1")
	if s == nil || s.State != fairwayv1alpha1.GPUSwapRestoreFailed || !strings.Contains(s.Reason, "cannot checkpoint its process 101") {
		t.Fatalf("state %+v, want RestoreFailed naming both failures", s)
	}
	if st, _ := h.mock.State(101); st != checkpoint.Running {
		t.Errorf("process 101 left %s, want running", st)
	}
	if r, _ := h.c.Work("nb1"); r != "GPUSwapRestoreFailed" {
		t.Errorf("Work = %q", r)
	}
}
