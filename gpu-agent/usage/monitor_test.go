//go:build cgo

package usage_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

func pod(name, uid string, priority int32, gpuIndex int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "team-a",
			Name:        name,
			UID:         types.UID(uid),
			Labels:      map[string]string{fairwayv1alpha1.QueueLabel: "research"},
			Annotations: map[string]string{fairwayv1alpha1.GPUIndexAnnotation: strconv.Itoa(gpuIndex)},
		},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: ptr.To(priority)},
	}
}

// noProcessSamples hides per-process utilization, as on drivers that do not keep it.
type noProcessSamples struct{ gpu.Library }

func (l noProcessSamples) Device(i int) (gpu.Device, error) {
	d, err := l.Library.Device(i)
	if err != nil {
		return nil, err
	}
	return noSamplesDevice{d}, nil
}

type noSamplesDevice struct{ gpu.Device }

func (noSamplesDevice) ProcessUtilization(uint64) ([]gpu.ProcessSample, error) {
	return nil, &gpu.Error{Op: "nvmlDeviceGetProcessUtilization", Code: "ERROR_NOT_SUPPORTED", Kind: gpu.ErrNotSupported}
}

type fixture struct {
	node    *fakegpu.Node
	client  client.Client
	clock   *clocktesting.FakeClock
	monitor *usage.Monitor
	writer  *usage.ConditionWriter
}

func newFixture(t *testing.T, perProcess bool, pods ...*corev1.Pod) *fixture {
	t.Helper()
	n, err := fakegpu.New("dgxh100", "n1")
	if err != nil {
		t.Fatal(err)
	}
	lib := nvmllib.New(n)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	res, err := discovery.Discover(lib, discovery.Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if !perProcess {
		lib = noProcessSamples{lib}
	}
	objs := make([]client.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.Pod{}).Build()
	f := &fixture{node: n, client: c, clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))}
	f.writer = usage.NewConditionWriter(c, testr.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = f.writer.Start(ctx) }()
	f.monitor = usage.NewMonitor(usage.NewSampler(lib, n), usage.MonitorOptions{
		Interval: 250 * time.Millisecond,
		Tracker:  usage.TrackerConfig{ThresholdPercent: 5, IdleAfter: 30 * time.Second},
		Pods: func(ctx context.Context) ([]corev1.Pod, error) {
			var l corev1.PodList
			err := c.List(ctx, &l)
			return l.Items, err
		},
		PodGPUs: func(p *corev1.Pod) []int {
			i, err := strconv.Atoi(p.Annotations[fairwayv1alpha1.GPUIndexAnnotation])
			if err != nil {
				return nil
			}
			return []int{i}
		},
		Inventory:  func() *fairwayv1alpha1.GPUInventory { return &res.Inventory },
		Conditions: f.writer,
		Clock:      f.clock,
		Log:        testr.New(t),
	})
	return f
}

func (f *fixture) poll(t *testing.T, advance time.Duration) {
	t.Helper()
	f.clock.Step(advance)
	if err := f.monitor.Poll(context.Background()); err != nil {
		t.Fatalf("Poll: %v", err)
	}
}

// condition waits for the writer and returns the pod's GPUIdle status ("" when absent).
func (f *fixture) condition(t *testing.T, name string) corev1.ConditionStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.writer.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var p corev1.Pod
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	if c := fairwayv1alpha1.GPUIdleConditionOf(&p); c != nil {
		return c.Status
	}
	return ""
}

func TestMonitorIdleLendingScenario(t *testing.T) {
	notebook := pod("notebook", "uid-nb", 100, 0)
	training := pod("training", "uid-tr", 50, 0)
	// The kubelet's own condition must survive our patches.
	notebook.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	f := newFixture(t, true, notebook, training)
	gpu0 := f.node.Device(0)

	gpu0.SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 1024}}})
	f.poll(t, 0)
	if got := f.condition(t, "notebook"); got != "" {
		t.Fatalf("condition after first poll = %q, want none", got)
	}
	f.poll(t, 30*time.Second)
	if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("condition after 30s idle = %q, want True", got)
	}

	// The scheduler lends the GPU: the training pod works hard on it. The notebook stays idle.
	gpu0.SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 1024},
		{PID: 200, PodUID: "uid-tr", UsedMiB: 40000, SMPercent: 90},
	}})
	for range 8 {
		f.poll(t, 250*time.Millisecond)
	}
	if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("a borrower's work woke the notebook: condition %q", got)
	}
	snap := f.monitor.Latest()
	var nb, tr *usage.PodUsage
	for i := range snap.Pods {
		switch snap.Pods[i].Name {
		case "notebook":
			nb = &snap.Pods[i]
		case "training":
			tr = &snap.Pods[i]
		}
	}
	if nb == nil || tr == nil {
		t.Fatalf("snapshot pods = %+v", snap.Pods)
	}
	if !nb.Idle || !nb.Interactive || nb.SMPercent != 0 || nb.MemoryUsedBytes != 1024<<20 || nb.Queue != "research" || nb.GPUUUID != fakegpu.DeviceUUID("n1", 0) {
		t.Errorf("notebook usage = %+v", *nb)
	}
	if tr.Interactive || tr.Idle || tr.SMPercent != 90 || tr.Processes != 1 {
		t.Errorf("training usage = %+v", *tr)
	}

	// The user runs a cell: the notebook is active at the next poll.
	gpu0.SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 1024, SMPercent: 40},
		{PID: 200, PodUID: "uid-tr", UsedMiB: 40000, SMPercent: 50},
	}})
	f.poll(t, 250*time.Millisecond)
	if got := f.condition(t, "notebook"); got != corev1.ConditionFalse {
		t.Fatalf("condition after notebook work = %q, want False", got)
	}
	var p corev1.Pod
	_ = f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "notebook"}, &p)
	if len(p.Status.Conditions) != 2 {
		t.Errorf("conditions = %+v, want Ready and GPUIdle", p.Status.Conditions)
	}
	var trPod corev1.Pod
	_ = f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "training"}, &trPod)
	if fairwayv1alpha1.GPUIdleConditionOf(&trPod) != nil {
		t.Error("preemptible training pod got an idle condition")
	}
}

func TestMonitorWakesOnNewProcessAndMemory(t *testing.T) {
	for name, next := range map[string]fakegpu.State{
		"new process":   {Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 1024}, {PID: 101, PodUID: "uid-nb"}}},
		"memory growth": {Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 3000}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, true, pod("notebook", "uid-nb", 100, 2))
			f.node.Device(2).SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 1024}}})
			f.poll(t, 0)
			f.poll(t, 31*time.Second)
			if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
				t.Fatalf("condition = %q, want True", got)
			}
			f.node.Device(2).SetState(next)
			f.poll(t, 250*time.Millisecond)
			if got := f.condition(t, "notebook"); got != corev1.ConditionFalse {
				t.Fatalf("condition = %q, want False", got)
			}
		})
	}
}

func TestMonitorWithoutProcessSamples(t *testing.T) {
	// Alone on its GPU, the device utilization is the notebook's.
	f := newFixture(t, false, pod("notebook", "uid-nb", 100, 1))
	util := uint32(70)
	f.node.Device(1).SetState(fakegpu.State{UtilizationPercent: &util, Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb"}}})
	f.poll(t, 0)
	f.poll(t, 31*time.Second)
	if got := f.condition(t, "notebook"); got != "" {
		t.Fatalf("busy notebook got condition %q", got)
	}
	// Shared with a borrower, the device utilization is nobody's in particular: not the
	// notebook's work.
	f2 := newFixture(t, false, pod("notebook", "uid-nb", 100, 1), pod("training", "uid-tr", 50, 1))
	f2.node.Device(1).SetState(fakegpu.State{UtilizationPercent: &util, Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb"}, {PID: 200, PodUID: "uid-tr"}}})
	f2.poll(t, 0)
	f2.poll(t, 31*time.Second)
	if got := f2.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("condition = %q, want True", got)
	}
	for _, p := range f2.monitor.Latest().Pods {
		if p.SMKnown {
			t.Errorf("pod %s SM known on a shared GPU without process samples", p.Name)
		}
	}
}

func TestMonitorSurvivesLostGPUAndDriverError(t *testing.T) {
	f := newFixture(t, true, pod("notebook", "uid-nb", 100, 0))
	f.node.Device(4).Fail(nvml.ERROR_UNKNOWN)
	f.poll(t, 0)
	snap := f.monitor.Latest()
	if snap.Err != nil || len(snap.GPUs) != 8 || snap.GPUs[4].Healthy || !snap.GPUs[3].Healthy {
		t.Fatalf("snapshot with one failing GPU: err=%v gpus=%+v", snap.Err, snap.GPUs)
	}
	f.node.FailLibrary(nvml.ERROR_DRIVER_NOT_LOADED)
	f.poll(t, time.Second)
	if snap := f.monitor.Latest(); snap.Err == nil {
		t.Fatal("library failure not in snapshot")
	}
}

func TestMonitorReassertsRemovedCondition(t *testing.T) {
	f := newFixture(t, true, pod("notebook", "uid-nb", 100, 0))
	f.poll(t, 0)
	f.poll(t, 31*time.Second)
	if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("condition = %q, want True", got)
	}
	// Someone (a status writer that replaces the list) drops our condition.
	var p corev1.Pod
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "notebook"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = nil
	if err := f.client.Status().Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	f.poll(t, 11*time.Second)
	if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("removed condition not re-asserted: %q", got)
	}
}

// get returns the pod as the API has it, once the writer is done.
func (f *fixture) get(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	f.condition(t, name)
	var p corev1.Pod
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestMonitorIdleMemoryAnnotationAndObservedTime(t *testing.T) {
	f := newFixture(t, true, pod("notebook", "uid-nb", 100, 3), pod("training", "uid-tr", 50, 3))
	gpu3 := f.node.Device(3)
	// A borrower still on the GPU when the notebook goes idle (say, lent by another idle
	// notebook), and a process outside any pod that really holds memory.
	outside := fakegpu.Process{PID: 300, UsedMiB: 500}
	gpu3.SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 1024},
		{PID: 200, PodUID: "uid-tr", UsedMiB: 40000, SMPercent: 90},
		outside,
	}})
	f.poll(t, 0)
	f.poll(t, 30*time.Second+250*time.Millisecond)
	wentIdle := f.clock.Now()
	p := f.get(t, "notebook")
	cond := fairwayv1alpha1.GPUIdleConditionOf(p)
	if cond == nil || cond.Status != corev1.ConditionTrue {
		t.Fatalf("condition = %+v, want True", cond)
	}
	// The loan's 40000 MiB is not the notebook's: 1024 + 500 stay resident.
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "1524" {
		t.Errorf("%s = %q, want 1524", fairwayv1alpha1.IdleGPUMemoryAnnotation, got)
	}
	if got := fairwayv1alpha1.GPUIdleObserved(p); !got.Equal(wentIdle) {
		t.Errorf("observed %s (%s %q), want %s", got, fairwayv1alpha1.GPUIdleObservedAnnotation, p.Annotations[fairwayv1alpha1.GPUIdleObservedAnnotation], wentIdle)
	}

	// The loan grows and starts a second process: not the notebook's work.
	gpu3.SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 1024},
		{PID: 200, PodUID: "uid-tr", UsedMiB: 60000, SMPercent: 90},
		{PID: 201, PodUID: "uid-tr", UsedMiB: 8000, SMPercent: 5},
		outside,
	}})
	for range 4 {
		f.poll(t, 250*time.Millisecond)
	}
	if got := f.condition(t, "notebook"); got != corev1.ConditionTrue {
		t.Fatalf("the loan's memory woke the notebook: condition %q", got)
	}

	// The notebook allocates: awake at the next poll, observed to the microsecond.
	gpu3.SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 3000},
		{PID: 200, PodUID: "uid-tr", UsedMiB: 60000, SMPercent: 90},
		outside,
	}})
	f.poll(t, 123457*time.Microsecond)
	woke := f.clock.Now()
	p = f.get(t, "notebook")
	cond = fairwayv1alpha1.GPUIdleConditionOf(p)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "GPUMemoryGrowth" {
		t.Fatalf("condition = %+v, want False for GPUMemoryGrowth", cond)
	}
	if got := fairwayv1alpha1.GPUIdleObserved(p); !got.Equal(woke) {
		t.Errorf("observed %s (%s %q), want %s", got, fairwayv1alpha1.GPUIdleObservedAnnotation, p.Annotations[fairwayv1alpha1.GPUIdleObservedAnnotation], woke)
	}
	if !cond.LastTransitionTime.Time.Equal(woke.Truncate(time.Second)) {
		t.Errorf("lastTransitionTime %s, want %s", cond.LastTransitionTime, woke.Truncate(time.Second))
	}
	// The annotation is the memory when the pod last went idle; waking does not touch it.
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "1524" {
		t.Errorf("after wake-up %s = %q, want 1524", fairwayv1alpha1.IdleGPUMemoryAnnotation, got)
	}

	// The loan has gone; the notebook goes idle again holding more.
	gpu3.SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 3000}, outside}})
	f.poll(t, 30*time.Second)
	p = f.get(t, "notebook")
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "3500" {
		t.Errorf("second idle %s = %q, want 3500", fairwayv1alpha1.IdleGPUMemoryAnnotation, got)
	}
	var tr corev1.Pod
	_ = f.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "training"}, &tr)
	if _, ok := tr.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; ok {
		t.Error("the preemptible pod got an idle memory annotation")
	}
}

func TestMonitorReannotatesIdlePod(t *testing.T) {
	f := newFixture(t, true, pod("notebook", "uid-nb", 100, 0))
	f.node.Device(0).SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 100, PodUID: "uid-nb", UsedMiB: 2048}}})
	f.poll(t, 0)
	f.poll(t, 31*time.Second)
	p := f.get(t, "notebook")
	if p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation] != "2048" {
		t.Fatalf("annotations = %v", p.Annotations)
	}
	// Someone removes the annotation (or the pod went idle under an agent that did not write
	// it): the next resync writes it again, the condition staying True.
	delete(p.Annotations, fairwayv1alpha1.IdleGPUMemoryAnnotation)
	if err := f.client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.poll(t, 11*time.Second)
	p = f.get(t, "notebook")
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "2048" {
		t.Errorf("annotation not re-written: %q", got)
	}
	if c := fairwayv1alpha1.GPUIdleConditionOf(p); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("condition = %+v, want True", c)
	}
}

// A pod on loan is a borrower even when it looks interactive (a preemptible pod annotated as a
// notebook): its memory is not what the owner keeps resident.
func TestMonitorIdleMemoryLeavesOutLoansThatLookInteractive(t *testing.T) {
	loan := pod("loaned-notebook", "uid-loan", 50, 3)
	loan.Annotations[fairwayv1alpha1.WorkloadKindAnnotation] = "notebook"
	loan.Annotations[fairwayv1alpha1.LoanAnnotation] = "true"
	f := newFixture(t, true, pod("notebook", "uid-nb", 100, 3), loan)
	f.node.Device(3).SetState(fakegpu.State{Processes: []fakegpu.Process{
		{PID: 100, PodUID: "uid-nb", UsedMiB: 1024},
		{PID: 200, PodUID: "uid-loan", UsedMiB: 30000},
	}})
	f.poll(t, 0)
	f.poll(t, 30*time.Second+250*time.Millisecond)
	p := f.get(t, "notebook")
	if cond := fairwayv1alpha1.GPUIdleConditionOf(p); cond == nil || cond.Status != corev1.ConditionTrue {
		t.Fatalf("condition = %+v, want True", cond)
	}
	if got := p.Annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation]; got != "1024" {
		t.Errorf("%s = %q, want 1024 (the loan's 30000 MiB are not the notebook's)", fairwayv1alpha1.IdleGPUMemoryAnnotation, got)
	}
}
