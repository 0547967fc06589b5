//go:build cgo

package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	// GPU is the index of the GPU whose owner is watched.
	GPU int
	// Interval and ThresholdPercent are the agent's --usage-interval and --idle-threshold.
	Interval         time.Duration
	ThresholdPercent float64
	// Ready, if set, is called once the owner's processes are known, before the first poll:
	// the real-GPU check starts the loan only then, so that the loan is never taken for the
	// owner.
	Ready func(owner []uint32)
	// Trace, if set, receives a line for every NVML utilization answer the monitor gets (the
	// device's and each process's samples), and before the first poll the samples NVML still
	// buffers from before the watch, which the agent ignores: what to read when the check
	// fails on a GPU.
	Trace io.Writer
	Log   logr.Logger
}

// Woken is what Watch saw when the owner did GPU work.
type Woken struct {
	// Owner are the owner's processes, the GPU's processes when the watch began.
	Owner []uint32
	// Reason and Message are the tracker's (GPUUtilization, GPUNewProcess, GPUMemoryGrowth).
	Reason, Message string
	// Observed is the start of the poll that saw the work, the time the agent would put in the
	// GPUIdle condition's message; Detected is when that poll had decided.
	Observed, Detected time.Time
}

// The two pods Watch makes up: the owner, an idle notebook, and everything else on the GPU, a
// loan.
const (
	watchOwnerUID = "watch-owner"
	watchLoanUID  = "watch-loan"
)

// Watch is `fairway agent watch`, the agent's idleness decision without a cluster, for the
// real-GPU lending check (test/gpu/run.sh): the processes on GPU opts.GPU when it starts are an
// idle notebook's (the owner); any process that comes later is a loan's. It runs the agent's own
// Monitor (sampling, per-pod attribution of utilization, memory and processes, the Tracker) on
// those two made-up pods, and returns at the first poll at which the owner is active again, as
// the agent would then set fairway.dev/GPUIdle False. A loan's work must not end it. It fails
// when the GPU has no process to watch (NVML lists none: the check then cannot attribute
// anything), or when ctx ends first.
func Watch(ctx context.Context, lib *Library, opts WatchOptions) (*Woken, error) {
	dev, err := lib.Device(opts.GPU)
	if err != nil {
		return nil, fmt.Errorf("GPU %d: %w", opts.GPU, err)
	}
	procs, err := dev.Processes()
	if err != nil {
		return nil, fmt.Errorf("listing the processes of GPU %d: %w", opts.GPU, err)
	}
	owner := map[uint32]bool{}
	var pids []uint32
	for _, p := range procs {
		owner[p.PID] = true
		pids = append(pids, p.PID)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("NVML lists no process on GPU %d to watch as the owner "+
			"(is one running? NVML reports host PIDs, and some containers see none)", opts.GPU)
	}
	slices.Sort(pids)
	resolver := usage.PodResolverFunc(func(pid uint32) (string, bool) {
		if owner[pid] {
			return watchOwnerUID, true
		}
		return watchLoanUID, true
	})

	now := time.Now()
	pods := []corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{
			Name: "owner", UID: watchOwnerUID,
			Annotations: map[string]string{fairwayv1alpha1.WorkloadKindAnnotation: string(fairwayv1alpha1.KindNotebook)},
		},
		// Idle already, as the condition would say: the monitor seeds its tracker from it, so
		// the first poll compares with nothing and only utilization can wake the owner there.
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: fairwayv1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
		}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{
			Name: "loan", UID: watchLoanUID,
			Labels:      map[string]string{fairwayv1alpha1.PreemptibilityLabel: "preemptible"},
			Annotations: map[string]string{fairwayv1alpha1.LoanAnnotation: "true"},
		},
	}}
	sink := &wakeSink{woken: make(chan Woken, 1), owner: pids}
	var sampled gpu.Library = lib
	if opts.Trace != nil {
		history, err := dev.ProcessUtilization(0)
		fmt.Fprintf(opts.Trace, "trace: before the watch NVML buffers %s\n", formatSamples(history, err))
		sampled = traceLibrary{Library: lib, w: opts.Trace}
	}
	monitor := usage.NewMonitor(usage.NewSampler(sampled, resolver), usage.MonitorOptions{
		Interval: opts.Interval,
		Tracker: usage.TrackerConfig{
			ThresholdPercent:  opts.ThresholdPercent,
			IdleAfter:         time.Hour, // the owner never goes idle again during a watch
			MemoryGrowthBytes: 1 << 20,   // as the agent
		},
		Pods:       func(context.Context) ([]corev1.Pod, error) { return pods, nil },
		PodGPUs:    func(*corev1.Pod) []int { return []int{opts.GPU} },
		Inventory:  func() *fairwayv1alpha1.GPUInventory { return nil },
		Conditions: sink,
		Log:        opts.Log,
	})
	if opts.Ready != nil {
		opts.Ready(pids)
	}
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		if err := monitor.Poll(ctx); err != nil {
			return nil, err
		}
		if s := monitor.Latest(); s != nil && s.Err != nil {
			return nil, fmt.Errorf("sampling GPU usage: %w", s.Err)
		}
		select {
		case w := <-sink.woken:
			return &w, nil
		default:
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(errors.New("the owner did no GPU work the agent could see"), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// wakeSink takes the monitor's transitions in place of the ConditionWriter.
type wakeSink struct {
	once  sync.Once
	woken chan Woken
	owner []uint32
}

func (s *wakeSink) Set(pod *corev1.Pod, t usage.Transition) {
	if pod.UID != types.UID(watchOwnerUID) || t.Idle {
		return
	}
	s.once.Do(func() {
		s.woken <- Woken{Owner: s.owner, Reason: t.Reason, Message: t.Message, Observed: t.At, Detected: time.Now()}
	})
}

// traceLibrary writes every utilization answer of its devices to w (WatchOptions.Trace).
type traceLibrary struct {
	gpu.Library
	w io.Writer
}

func (l traceLibrary) Device(i int) (gpu.Device, error) {
	d, err := l.Library.Device(i)
	if err != nil {
		return nil, err
	}
	return traceDevice{Device: d, w: l.w}, nil
}

type traceDevice struct {
	gpu.Device
	w io.Writer
}

func (d traceDevice) Utilization() (uint32, error) {
	u, err := d.Device.Utilization()
	fmt.Fprintf(d.w, "trace: %d GPU %d utilization %d%% err=%v\n", time.Now().UnixMicro(), d.Index(), u, err)
	return u, err
}

func (d traceDevice) ProcessUtilization(since uint64) ([]gpu.ProcessSample, error) {
	s, err := d.Device.ProcessUtilization(since)
	fmt.Fprintf(d.w, "trace: %d GPU %d process samples since %d: %s\n", time.Now().UnixMicro(), d.Index(), since, formatSamples(s, err))
	return s, err
}

func formatSamples(s []gpu.ProcessSample, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	if len(s) == 0 {
		return "none"
	}
	var b []byte
	for i, p := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "pid=%d sm=%d%% at=%d", p.PID, p.SMPercent, p.Timestamp)
	}
	return string(b)
}
