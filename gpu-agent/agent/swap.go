//go:build cgo

package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
	"github.com/fairway-sched/fairway/gpu-agent/metrics"
	"github.com/fairway-sched/fairway/gpu-agent/swap"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// poll is one usage poll handed to the swap loop.
type poll struct {
	snap *usage.Snapshot
	pods []corev1.Pod
}

// swapper runs the swap controller on the usage monitor's polls, in a loop of its own: a
// swap-out copies GiBs and must not hold up the poll that notices the next notebook waking.
type swapper struct {
	ctl     *swap.Controller
	metrics *metrics.Swap
	// report hands each pass's bytes on the host per pod to the agent's metrics state.
	report func(map[string]int64)
	polls  chan poll
	podGPU func(p *corev1.Pod) []int
}

// openCheckpoint is the checkpoint API for the agent's mode: the driver's, or on a fake node the
// fake driver's over its fake processes (fakegpu.Node.Checkpoints), so that the e2e tests swap
// as a real node does.
func (a *Agent) openCheckpoint() (checkpoint.API, error) {
	if a.lib.Fake != nil {
		return a.lib.Fake.Checkpoints(), nil
	}
	return checkpoint.Open()
}

// swapProcesses are the swap controller's readers of processes for the agent's mode: CPU time,
// pod memory room and the owning pod from /proc and the cgroup mount on a real node; on a fake
// node, from its fake processes (which no /proc has, nor any cgroup).
func (a *Agent) swapProcesses(o *swap.Options) {
	resolver := a.lib.Resolver
	o.Owner = func(pid int) (string, bool) { return resolver.PodUID(uint32(pid)) }
	if a.lib.Fake != nil {
		o.CPU = a.lib.Fake.ProcessCPU
		return
	}
	o.CPU = swap.ProcCPU(a.opts.ProcRoot)
	o.PodRoom = swap.CgroupRoom(a.opts.ProcRoot, a.opts.CgroupRoot)
}

// newSwapper wires the swap controller; nil, nil when --swap is off. The driver's API missing is
// no reason to stop the agent: lending goes on without swap, and the log says why.
func (a *Agent) newSwapper(writer swap.Writer, pods func(ctx context.Context) ([]corev1.Pod, error), podGPU func(p *corev1.Pod) []int) (*swapper, error) {
	if !a.opts.Swap {
		return nil, nil
	}
	api, err := a.openCheckpoint()
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotAvailable) {
			a.log.Error(err, "GPU memory swap is off: the driver's checkpoint API is missing (driver r550 or later)")
			return nil, nil
		}
		return nil, fmt.Errorf("opening the CUDA checkpoint API: %w", err)
	}
	o := swap.Options{
		API:    api,
		Writer: writer,
		HostRoom: func(ctx context.Context) (int64, error) {
			return a.hostRoom(ctx, pods)
		},
		Limit:       a.opts.SwapHostMemoryLimit,
		WakeCPU:     a.opts.SwapWakeCPU,
		LockTimeout: a.opts.SwapLockTimeout,
		Log:         a.log.WithName("swap"),
	}
	a.swapProcesses(&o)
	ctl := swap.New(o)
	report := func(m map[string]int64) {
		a.mu.Lock()
		a.swapped = m
		a.mu.Unlock()
	}
	return &swapper{ctl: ctl, metrics: metrics.NewSwap(a.opts.NodeName), report: report, polls: make(chan poll, 1), podGPU: podGPU}, nil
}

// hostRoom is the node's allocatable memory less what its pods hold (their memory requests):
// the host RAM nobody was promised.
func (a *Agent) hostRoom(ctx context.Context, pods func(ctx context.Context) ([]corev1.Pod, error)) (int64, error) {
	node, err := a.node(ctx)
	if err != nil {
		return 0, err
	}
	alloc, ok := node.Status.Allocatable[corev1.ResourceMemory]
	if !ok {
		return 0, fmt.Errorf("node %s has no allocatable memory", node.Name)
	}
	list, err := pods(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing the node's pods: %w", err)
	}
	room := alloc.Value()
	for i := range list {
		if q, ok := resourcehelper.PodRequests(&list[i], resourcehelper.PodResourcesOptions{})[corev1.ResourceMemory]; ok {
			room -= q.Value()
		}
	}
	return room, nil
}

// onPoll hands the latest poll to the loop, replacing one it has not taken yet.
func (s *swapper) onPoll(snap *usage.Snapshot, pods []corev1.Pod) {
	p := poll{snap: snap, pods: pods}
	select {
	case s.polls <- p:
		return
	default:
	}
	select {
	case <-s.polls:
	default:
	}
	select {
	case s.polls <- p:
	default:
	}
}

// runnable runs the controller on each poll until ctx ends.
func (s *swapper) runnable() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case p := <-s.polls:
				s.ctl.Observe(ctx, s.view(p))
				st := s.ctl.TakeStats()
				for _, d := range st.Out {
					s.metrics.Out.Observe(d.Seconds())
				}
				for _, d := range st.In {
					s.metrics.In.Observe(d.Seconds())
				}
				for stage, n := range st.Failed {
					s.metrics.Failures.WithLabelValues(stage).Add(float64(n))
				}
				s.report(st.Swapped)
			}
		}
	})
}

// view is the swap controller's view of a poll: interactive pods with their GPUs, processes and
// memory, and the loans still on each GPU.
func (s *swapper) view(p poll) swap.View {
	v := swap.View{At: p.snap.At, Loans: map[int]int{}}
	byUID := map[string]*corev1.Pod{}
	for i := range p.pods {
		pod := &p.pods[i]
		byUID[string(pod.UID)] = pod
		if pod.Annotations[fairwayv1alpha1.LoanAnnotation] == "true" {
			for _, g := range s.podGPU(pod) {
				v.Loans[g]++
			}
		}
	}
	at := map[string]int{}
	for _, u := range p.snap.Pods {
		pod := byUID[u.UID]
		if !u.Interactive || pod == nil {
			continue
		}
		i, ok := at[u.UID]
		if !ok {
			i = len(v.Pods)
			at[u.UID] = i
			v.Pods = append(v.Pods, swap.Pod{Pod: pod, Idle: u.Idle})
		}
		sp := &v.Pods[i]
		sp.GPUs = append(sp.GPUs, u.GPUIndex)
		for _, pid := range u.PIDs {
			sp.PIDs = append(sp.PIDs, int(pid))
		}
		sp.Bytes += int64(u.MemoryUsedBytes)
	}
	return v
}
