//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// swapRounds is how many swap-out -> loan -> work -> swap-in rounds TestIdleLendingSwap plays.
const swapRounds = 3

// swapAgentArgs turn swap on in the e2e agents: the fake node's driver (fakegpu.Node.Checkpoints)
// moves its processes' memory, and the kwok nodes' 2Ti of allocatable memory take it.
var swapAgentArgs = []string{"--swap", "--swap-host-memory-limit=256Gi"}

// swapOwnerMiB is what the notebook of a swap round holds on its GPU (an 80 GB H100 in the fake
// node): a borrower asking 0.9 of the GPU does not fit the rest, so it is lent only with swap.
const swapOwnerMiB = 30000

// TestIdleLendingSwap plays idle GPU lending with swap end to end (issue 40) on the local
// cluster: the real scheduler, and a gpu-agent started with --swap on a go-nvml mock whose
// checkpoint API is the fake node's (fakegpu.Node.Checkpoints), driven through its control
// endpoint.
//
// A notebook (half a GPU, in a queue that lends) holds 30000 MiB of GPU X of the only node; the
// node's other 7 GPUs are held whole. Each round a training pod asks for 0.9 of a GPU: without
// swap no GPU has the room, so
//
//  1. the idle notebook is published Eligible, the scheduler asks for its swap, the agent
//     checkpoints its process (the fake GPU shows neither it nor its memory), publishes
//     SwappedOut, and the scheduler lends the whole GPU: the training pod's process takes 0.9 of
//     it, more than the notebook ever left free;
//  2. the notebook's process uses CPU (its next cell, blocked at its first CUDA call); the agent
//     wakes the notebook, the scheduler returns the loan, and once the loan's process is gone the
//     agent restores the notebook's memory and unlocks it.
//
// Then the swap metrics of the agent and of the scheduler count every round.
func TestIdleLendingSwap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(1)}})
	ensureSchedFixtures(t, c)
	agent, sched := startLendingStage(t, c, bin, swapAgentArgs...)

	nb := startSwapNotebook(t, c, agent, schedPod("research", "notebook", "research").Fraction("0.5").
		Priority(fairwayv1.PriorityClassInteractive).Annotate(fairwayv1.WorkloadKindAnnotation, "notebook").Obj())
	hold := schedPod("busy", "hold", "busy").GPUs(7).Priority(fairwayv1.PriorityClassTraining).Obj()
	mustCreate(t, c, hold)
	eventually(t, 30*time.Second, "the other 7 GPUs held", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(hold), hold)
		return err == nil && hold.Spec.NodeName != "", err
	})

	var took []time.Duration
	for round := range swapRounds {
		train := schedPod("training", fmt.Sprintf("train-%02d", round), "training").Fraction("0.9").
			Priority(fairwayv1.PriorityClassTraining).Annotate(fairwayv1.BorrowIdleGPUAnnotation, "true").Obj()
		train = nb.swapOutForLoan(t, train)
		if round == 0 {
			checkSwapShows(t, nb, sched.MetricsURL)
		}
		took = append(took, nb.swapInOnWork(t, train))
	}
	t.Logf("idle-lending-swap: rounds=%d activity-to-restore %v", len(took), took)

	fams, err := scrape(ctx, agent.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"fairway_gpu_swap_out_seconds", "fairway_gpu_swap_in_seconds"} {
		if n := histogramCount(fams, h); n != swapRounds {
			t.Errorf("%s counts %d, want %d", h, n, swapRounds)
		}
	}
	if _, ok := value(fams, "fairway_gpu_pod_swapped_bytes", map[string]string{"pod": "notebook"}); ok {
		t.Error("fairway_gpu_pod_swapped_bytes still shows the restored notebook")
	}
	fams, err = scrape(ctx, sched.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(fams, "fairway_swap_requests_total", nil); v != swapRounds {
		t.Errorf("fairway_swap_requests_total = %v, want one request per round, %d", v, swapRounds)
	}
	if v, _ := value(fams, "fairway_evictions_total", map[string]string{"reason": "LoanReturn", "queue": "training"}); v != swapRounds {
		t.Errorf("fairway_evictions_total{reason=LoanReturn,queue=training} = %v, want %d", v, swapRounds)
	}
}

// lendingQueue is a queue whose idle interactive pods lend their GPUs.
// startLendingStage sets up the idle-lending tests' stage on the cluster's one GPU node: a
// gpu-agent (extra flags agentArgs) whose 100 ms usage poll and 1 s --idle-after keep rounds
// short, the scheduler with a 1 s loan-return grace, and the queues training (no quota), busy
// (7 GPUs) and research (1 GPU, lends its idle GPUs), each serving its namespace.
func startLendingStage(t *testing.T, c *cluster.Cluster, bin string, agentArgs ...string) (*gpuagents.Agent, *schedProc) {
	t.Helper()
	nodes, err := gpuagents.GPUNodes(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Nodes: nodes, Binary: bin, UsageInterval: 100 * time.Millisecond,
		IdleAfter: time.Second, RefreshInterval: 30 * time.Second, Args: agentArgs, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	sched := startSched(t, c, bin, "fairway-scheduler", true, "--loan-return-grace-period=1s")
	for _, ns := range []string{"research", "training", "busy"} {
		newNamespace(t, c, ns)
	}
	schedQueue(t, c, "training", "", "training")
	schedQueue(t, c, "busy", "7", "busy")
	mustCreate(t, c, lendingQueue("research", "1", "research"))
	return fleet.Agent(nodes[0].Name), sched
}

func lendingQueue(name, gpuQuota string, namespaces ...string) *fairwayv1.Queue {
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fairwayv1.QueueSpec{
		Namespaces: namespaces, IdleLending: &fairwayv1.IdleLending{Lend: ptr.To(true)}}}
	v := resource.MustParse(gpuQuota)
	q.Spec.Resources.GPU = &fairwayv1.ResourceQuota{Quota: &v}
	return q
}

// swapNotebook is a notebook on a fake GPU whose process (PID 4242) holds swapOwnerMiB, and the
// loan's process on the same GPU while there is one.
type swapNotebook struct {
	c     *cluster.Cluster
	agent *gpuagents.Agent
	pod   *corev1.Pod
	uuid  string
	gpu   int
	cpu   uint64
	loan  *fakegpu.Process
}

// startSwapNotebook creates the notebook pod, waits for its GPU and puts its process there.
func startSwapNotebook(t *testing.T, c *cluster.Cluster, agent *gpuagents.Agent, pod *corev1.Pod) *swapNotebook {
	t.Helper()
	mustCreate(t, c, pod)
	eventually(t, 40*time.Second, "notebook "+pod.Name+" bound with its GPU", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return err == nil && pod.Spec.NodeName != "" && pod.Annotations[fairwayv1.GPUUUIDAnnotation] != "", err
	})
	nb := &swapNotebook{c: c, agent: agent, pod: pod, uuid: pod.Annotations[fairwayv1.GPUUUIDAnnotation], gpu: -1, cpu: 1000}
	for i := range 8 {
		if fakegpu.DeviceUUID(agent.Node, i) == nb.uuid {
			nb.gpu = i
		}
	}
	if nb.gpu < 0 || pod.Spec.NodeName != agent.Node {
		t.Fatalf("notebook %s got GPU %s of %s, not one of %s's", pod.Name, nb.uuid, pod.Spec.NodeName, agent.Node)
	}
	nb.setGPU(t)
	return nb
}

// setGPU writes the fake GPU's processes: the notebook's, with its CPU time so far, and the
// loan's.
func (nb *swapNotebook) setGPU(t *testing.T) {
	t.Helper()
	procs := []fakegpu.Process{{PID: 4242, PodUID: string(nb.pod.UID), UsedMiB: swapOwnerMiB, CPUMillis: nb.cpu}}
	if nb.loan != nil {
		procs = append(procs, *nb.loan)
	}
	if _, err := nb.agent.SetGPU(t.Context(), nb.gpu, fakegpu.DeviceUpdate{Processes: &procs}); err != nil {
		t.Fatal(err)
	}
}

// swap reads the notebook's fairway.dev/gpu-swap and its GPUMemorySwapped condition.
func (nb *swapNotebook) swap(ctx context.Context) (fairwayv1.GPUSwap, *corev1.PodCondition, error) {
	if err := nb.c.Client().Get(ctx, client.ObjectKeyFromObject(nb.pod), nb.pod); err != nil {
		return fairwayv1.GPUSwap{}, nil, err
	}
	s, _, err := fairwayv1.GPUSwapOf(nb.pod.Annotations)
	for i := range nb.pod.Status.Conditions {
		if c := &nb.pod.Status.Conditions[i]; c.Type == fairwayv1.GPUSwapCondition {
			return s, c, err
		}
	}
	return s, nil, err
}

// checkpointState is what the fake driver says of the notebook's process ("" while running).
func (nb *swapNotebook) checkpointState(ctx context.Context) (string, error) {
	gpus, err := nb.agent.GPUs(ctx)
	if err != nil {
		return "", err
	}
	for _, g := range gpus {
		if g.Index == nb.gpu {
			return g.Checkpoint[4242], nil
		}
	}
	return "", fmt.Errorf("no GPU %d on %s", nb.gpu, nb.agent.Node)
}

// swapOutForLoan creates train, a borrower that fits the notebook's GPU only with the notebook's
// memory on the host, and returns it once bound on loan there, its process holding 0.9 of the
// GPU: the idle notebook was published Eligible, swapped out at the scheduler's request, and
// only then lent.
func (nb *swapNotebook) swapOutForLoan(t *testing.T, train *corev1.Pod) *corev1.Pod {
	t.Helper()
	eventually(t, 30*time.Second, "the idle notebook published Eligible with its memory", func(ctx context.Context) (bool, error) {
		s, _, err := nb.swap(ctx)
		return err == nil && s.State == fairwayv1.GPUSwapEligible && s.Bytes == swapOwnerMiB<<20, fmt.Errorf("swap %+v: %w", s, err)
	})
	mustCreate(t, nb.c, train)
	eventually(t, 30*time.Second, "the notebook swapped out", func(ctx context.Context) (bool, error) {
		s, cond, err := nb.swap(ctx)
		return err == nil && s.State == fairwayv1.GPUSwappedOut && s.Bytes == swapOwnerMiB<<20 && slices.Equal(s.PIDs, []int{4242}) &&
			cond != nil && cond.Status == corev1.ConditionTrue && cond.Reason == "SwappedOut", fmt.Errorf("swap %+v, condition %v: %w", s, cond, err)
	})
	if st, err := nb.checkpointState(t.Context()); err != nil || st != "checkpointed" {
		t.Fatalf("the fake driver has the notebook's process %q (%v), want checkpointed", st, err)
	}
	eventually(t, 30*time.Second, train.Name+" bound on loan", func(ctx context.Context) (bool, error) {
		err := nb.c.Client().Get(ctx, client.ObjectKeyFromObject(train), train)
		return err == nil && train.Spec.NodeName != "", err
	})
	if train.Annotations[fairwayv1.LoanAnnotation] != "true" || train.Annotations[fairwayv1.GPUUUIDAnnotation] != nb.uuid {
		t.Fatalf("%s bound on GPU %s, loan %q; want a loan on the notebook's GPU %s", train.Name,
			train.Annotations[fairwayv1.GPUUUIDAnnotation], train.Annotations[fairwayv1.LoanAnnotation], nb.uuid)
	}
	// The loan's process takes 0.9 of the GPU, more than the notebook ever left free.
	nb.loan = &fakegpu.Process{PID: 5151, PodUID: string(train.UID), UsedMiB: 73728, SMPercent: 90}
	nb.setGPU(t)
	return train
}

// swapInOnWork runs the notebook's next cell and returns the time from its first CPU use to its
// memory back on the GPU: the loan is returned, its process exits, the notebook is restored.
func (nb *swapNotebook) swapInOnWork(t *testing.T, train *corev1.Pod) time.Duration {
	t.Helper()
	ctx := t.Context()
	w, err := nb.c.Clientset().CoreV1().Pods(train.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", train.Name).String(), ResourceVersion: train.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	before := len(eventsFor(t, nb.c, ctx, nb.pod.Namespace, "GPUSwappedIn"))
	start := time.Now()
	nb.cpu += 500 // a cell: CPU, then a CUDA call that blocks on the lock
	nb.setGPU(t)
	waitDeletion(t, w, 10*time.Second)
	w.Stop()
	eventually(t, 20*time.Second, train.Name+" gone", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := nb.c.Client().Get(ctx, client.ObjectKeyFromObject(train), &p)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	nb.loan = nil // the loan's process exits with its pod
	nb.setGPU(t)
	eventually(t, 20*time.Second, "the notebook's memory restored", func(ctx context.Context) (bool, error) {
		s, cond, err := nb.swap(ctx)
		return err == nil && s.State != fairwayv1.GPUSwappedOut && cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == "Restored",
			fmt.Errorf("swap %+v, condition %v: %w", s, cond, err)
	})
	took := time.Since(start)
	if st, err := nb.checkpointState(ctx); err != nil || st != "" {
		t.Fatalf("the fake driver has the restored notebook's process %q (%v), want running", st, err)
	}
	eventually(t, 10*time.Second, "a GPUSwappedIn event", func(ctx context.Context) (bool, error) {
		return len(eventsFor(t, nb.c, ctx, nb.pod.Namespace, "GPUSwappedIn")) > before, nil
	})
	return took
}

// checkSwapShows checks, while the notebook is swapped out and its GPU lent, that the agent
// reports its bytes on the host and the scheduler the GPU it lends beyond its free memory.
func checkSwapShows(t *testing.T, nb *swapNotebook, schedMetrics string) {
	t.Helper()
	want := float64(swapOwnerMiB << 20)
	eventually(t, 10*time.Second, "fairway_gpu_pod_swapped_bytes of the notebook", func(ctx context.Context) (bool, error) {
		fams, err := scrape(ctx, nb.agent.MetricsURL)
		if err != nil {
			return false, err
		}
		v, ok := value(fams, "fairway_gpu_pod_swapped_bytes", map[string]string{"namespace": nb.pod.Namespace, "pod": nb.pod.Name})
		return ok && v == want, fmt.Errorf("%v (found %v)", v, ok)
	})
	eventually(t, 10*time.Second, "the scheduler's fairway_gpu_swapped_bytes of the GPU", func(ctx context.Context) (bool, error) {
		fams, err := scrape(ctx, schedMetrics)
		if err != nil {
			return false, err
		}
		v, ok := value(fams, "fairway_gpu_swapped_bytes", map[string]string{"node": nb.agent.Node, "gpu_uuid": nb.uuid})
		return ok && v == want, fmt.Errorf("%v (found %v)", v, ok)
	})
}
