//go:build cgo

package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/swap"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// lastWrite keeps the swap state last written per pod.
type lastWrite struct {
	mu     sync.Mutex
	states map[types.UID]*fairwayv1alpha1.GPUSwap
}

func (w *lastWrite) Write(pod *corev1.Pod, s *fairwayv1alpha1.GPUSwap, _ *swap.Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[pod.UID] = s
}

func (w *lastWrite) Event(*corev1.Pod, bool, string, string) {}

func (w *lastWrite) state(uid types.UID) *fairwayv1alpha1.GPUSwap {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.states[uid]
}

// On a fake node the agent swaps with the fake driver (fakegpu.Node.Checkpoints) and reads the
// fake processes' CPU time: the notebook's memory leaves the fake GPU at the scheduler's request
// and comes back at its next cell, as on a real node, so the e2e tests drive the whole path.
func TestSwapOnAFakeNode(t *testing.T) {
	opts := DefaultOptions()
	opts.NodeName, opts.NVML, opts.Swap, opts.SwapHostMemoryLimit = "kwok-0", "mock:dgxh100", true, 256<<30
	lib, err := OpenLibrary(&opts)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: opts, lib: lib, log: logr.Discard()}
	a.node = func(context.Context) (*corev1.Node, error) {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Ti")}}}, nil
	}
	idleAt := time.Now().Add(-time.Minute)
	nb := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "notebook", UID: "nb",
		Annotations: map[string]string{fairwayv1alpha1.WorkloadKindAnnotation: string(fairwayv1alpha1.KindNotebook),
			fairwayv1alpha1.GPUIdleObservedAnnotation: fairwayv1alpha1.FormatGPUIdleObserved(idleAt),
			fairwayv1alpha1.GPUSwapRequestAnnotation:  fairwayv1alpha1.FormatGPUSwapRequest(idleAt)}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: fairwayv1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(idleAt.Truncate(time.Second))}}}}
	pods := []corev1.Pod{nb}
	w := &lastWrite{states: map[types.UID]*fairwayv1alpha1.GPUSwap{}}
	s, err := a.newSwapper(w, func(context.Context) ([]corev1.Pod, error) { return pods, nil }, func(*corev1.Pod) []int { return []int{3} })
	if err != nil || s == nil {
		t.Fatalf("newSwapper = %v, %v", s, err)
	}
	gpu := lib.Fake.Device(3)
	owner := func(cpuMillis uint64) {
		gpu.SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 4242, PodUID: "nb", UsedMiB: 30000, CPUMillis: cpuMillis}}})
	}
	owner(1000)
	observe := func(pids []uint32, bytes uint64) {
		snap := &usage.Snapshot{At: time.Now(), Pods: []usage.PodUsage{{UID: "nb", GPUIndex: 3, PIDs: pids, MemoryUsedBytes: bytes,
			Interactive: true, Idle: true}}}
		s.ctl.Observe(t.Context(), s.view(poll{snap: snap, pods: pods}))
	}
	observe([]uint32{4242}, 30000<<20)
	if st := w.state("nb"); st == nil || st.State != fairwayv1alpha1.GPUSwappedOut || st.Bytes != 30000<<20 {
		t.Fatalf("published %+v, want SwappedOut with 30000 MiB", st)
	}
	if m, _ := gpu.GetMemoryInfo(); m.Used != 0 {
		t.Fatalf("the fake GPU still has %d bytes in use", m.Used)
	}
	observe(nil, 0) // the CPU baseline of the swapped process
	owner(1300)     // the next cell
	observe(nil, 0)
	if s.ctl.Swapped("nb") {
		t.Fatal("not swapped in at the notebook's CPU work")
	}
	if m, _ := gpu.GetMemoryInfo(); m.Used != 30000<<20 {
		t.Fatalf("the fake GPU has %d bytes in use after the swap-in, want the notebook's 30000 MiB", m.Used)
	}
}
