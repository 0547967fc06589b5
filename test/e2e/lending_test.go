//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/test/cluster"
)

// lendingRounds is how many idle -> lent -> active -> returned rounds TestIdleLending plays.
const lendingRounds = 20

// TestIdleLending plays idle GPU lending end to end (issue 9) on the local cluster: the real
// scheduler, and a gpu-agent on a go-nvml mock whose GPU utilization the test drives through the
// fake node's control endpoint.
//
// A notebook (interactive, half a GPU, in a queue that lends) shares GPU X of the only node;
// the node's other 7 GPUs are held whole, so a training pod asking for 0.6 GPU (preemptible,
// opted in with fairway.dev/borrow-idle-gpu) has no room but a loan. Each round:
//
//  1. the notebook does no GPU work; after the agent's --idle-after it is GPUIdle=True, and the
//     waiting training pod is bound on loan on GPU X (fairway.dev/loan, the notebook's GPU);
//  2. the test drives the notebook's utilization up; the agent reports GPUIdle=False, and the
//     scheduler evicts the training pod (LoanReturn) first thing in its next cycle;
//  3. the training pod leaves; the GPU is the notebook's alone again.
//
// Activity-to-return is measured from the moment the test drives utilization up to the moment
// the training pod has its deletionTimestamp (the eviction is issued); the loan's grace period
// (--loan-return-grace-period) comes after that, as does kwok's removal of the pod. The median
// must be under 2 s.
func TestIdleLending(t *testing.T) {
	ctx := t.Context()
	bin := buildFairway(t)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(evictionAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartT(t, cluster.Config{
		NodePools:      []cluster.NodePool{cluster.H100Pool(1)},
		APIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	ensureSchedFixtures(t, c)
	agent, sched := startLendingStage(t, c, bin)
	node := agent.Node

	// The notebook. The gpu-agent writes fairway.dev/idle-gpu-memory-used (what its process
	// keeps on the GPU while idle) when it goes idle; without it the GPU is never lent.
	nb := schedPod("research", "notebook", "research").Fraction("0.5").Priority(fairwayv1.PriorityClassInteractive).
		Annotate(fairwayv1.WorkloadKindAnnotation, "notebook").Obj()
	mustCreate(t, c, nb)
	eventually(t, 40*time.Second, "the notebook bound with its GPU", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), nb)
		return err == nil && nb.Spec.NodeName != "" && nb.Annotations[fairwayv1.GPUUUIDAnnotation] != "", err
	})
	uuid := nb.Annotations[fairwayv1.GPUUUIDAnnotation]
	gpu := -1
	for i := range 8 {
		if fakegpu.DeviceUUID(node, i) == uuid {
			gpu = i
		}
	}
	if gpu < 0 {
		t.Fatalf("the notebook's GPU %s is not one of %s's", uuid, node)
	}
	// Its process holds 2 GiB from the start; the test moves its utilization only.
	work := func(sm uint32) {
		t.Helper()
		if _, err := agent.SetGPU(ctx, gpu, fakegpu.DeviceUpdate{Processes: &[]fakegpu.Process{
			{PID: 4242, PodUID: string(nb.UID), UsedMiB: 2048, SMPercent: sm},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	work(0)
	hold := schedPod("busy", "hold", "busy").GPUs(7).Priority(fairwayv1.PriorityClassTraining).Obj()
	mustCreate(t, c, hold)
	eventually(t, 30*time.Second, "the other 7 GPUs held", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(hold), hold)
		return err == nil && hold.Spec.NodeName != "", err
	})

	var took []time.Duration
	for round := range lendingRounds {
		name := fmt.Sprintf("train-%02d", round)
		if round == lendingRounds-1 {
			// The last borrower is covered by a budget that allows no disruption: the loan goes
			// back all the same (a budget cannot keep a lent GPU from its owner), and says so.
			mustCreate(t, c, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "training-pdb", Namespace: "training"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{fairwayv1.QueueLabel: "training"}}},
			})
		}
		train := schedPod("training", name, "training").Fraction("0.6").Priority(fairwayv1.PriorityClassTraining).
			Annotate(fairwayv1.BorrowIdleGPUAnnotation, "true").Obj()
		mustCreate(t, c, train)
		// 1. The notebook idles: the training pod runs on loan on its GPU.
		eventually(t, 30*time.Second, name+" bound on loan", func(ctx context.Context) (bool, error) {
			err := c.Client().Get(ctx, client.ObjectKeyFromObject(train), train)
			return err == nil && train.Spec.NodeName != "", err
		})
		if train.Annotations[fairwayv1.LoanAnnotation] != "true" || train.Spec.NodeName != node || train.Annotations[fairwayv1.GPUUUIDAnnotation] != uuid {
			t.Fatalf("%s bound on %s GPU %s, loan %q; want a loan on the notebook's %s GPU %s", name, train.Spec.NodeName,
				train.Annotations[fairwayv1.GPUUUIDAnnotation], train.Annotations[fairwayv1.LoanAnnotation], node, uuid)
		}
		if round == 0 {
			checkLoanShows(t, c, sched)
			var p corev1.Pod
			if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), &p); err != nil {
				t.Fatal(err)
			}
			if got := p.Annotations[fairwayv1.IdleGPUMemoryAnnotation]; got != "2048" {
				t.Errorf("the agent's %s on the idle notebook = %q, want 2048 (its process's MiB)", fairwayv1.IdleGPUMemoryAnnotation, got)
			}
		}
		// 2. The notebook works: the loan goes back. Watch the pod from its bound version.
		w, err := c.Clientset().CoreV1().Pods("training").Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: train.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		work(80)
		evicted := waitDeletion(t, w, 10*time.Second)
		w.Stop()
		took = append(took, evicted.Sub(start))
		// 3. The training pod leaves; the notebook keeps its GPU and nothing else is lent it.
		eventually(t, 20*time.Second, name+" gone", func(ctx context.Context) (bool, error) {
			var p corev1.Pod
			err := c.Client().Get(ctx, client.ObjectKeyFromObject(train), &p)
			return client.IgnoreNotFound(err) == nil && err != nil, nil
		})
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), nb); err != nil || nb.Spec.NodeName != node || nb.DeletionTimestamp != nil {
			t.Fatalf("the notebook after round %d: %v on %q", round, err, nb.Spec.NodeName)
		}
		work(0) // idle again for the next round
	}
	// Every loan went back through the Eviction API, with the loan's grace; the last one, which
	// its budget refused, was then deleted, with an event saying why.
	evictions := readEvictions(t, auditLog, "training")
	evicted := map[string]bool{}
	for _, e := range evictions {
		if e.dryRun || e.grace == nil || *e.grace != 1 {
			t.Errorf("eviction of %s: dry run %v, gracePeriodSeconds %v; want a real eviction with the loan's 1 s", e.pod, e.dryRun, ptr.Deref(e.grace, -1))
		}
		evicted[e.pod] = true
	}
	if len(evicted) != lendingRounds {
		t.Errorf("the audit log shows evictions of %d training pods, want all %d loans returned through the Eviction API", len(evicted), lendingRounds)
	}
	last := fmt.Sprintf("train-%02d", lendingRounds-1)
	for _, e := range evictions {
		if e.pod == last && e.code != 429 {
			t.Errorf("the eviction of %s under a budget allowing none got %d, want 429", last, e.code)
		}
	}
	if got := eventsFor(t, c, ctx, "training", evictor.ReasonLoanReturnedPastBudget); len(got) != 1 {
		t.Errorf("%s events %q, want one on %s", evictor.ReasonLoanReturnedPastBudget, got, last)
	}
	t.Logf("loan returns through the Eviction API: %d pods, the last refused by its budget (429) and deleted", len(evicted))

	sorted := slices.Clone(took)
	slices.Sort(sorted)
	p50, p95 := percentile(sorted, 0.5), percentile(sorted, 0.95)
	t.Logf("activity-to-return per round: %v", took)
	t.Logf("idle-lending: rounds=%d p50=%.2f s p95=%.2f s", len(took), p50.Seconds(), p95.Seconds())
	if p50 >= 2*time.Second {
		t.Errorf("activity-to-return median %v, want under 2s (all: %v)", p50, took)
	}
	fams, err := scrape(ctx, sched.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if n := histogramCount(fams, "fairway_loan_return_seconds"); n != lendingRounds {
		t.Errorf("fairway_loan_return_seconds counts %d returns, want %d", n, lendingRounds)
	}
	if v, _ := value(fams, "fairway_evictions_total", map[string]string{"reason": "LoanReturn", "queue": "training"}); v != lendingRounds {
		t.Errorf("fairway_evictions_total{reason=LoanReturn,queue=training} = %v, want %d", v, lendingRounds)
	}
}

// checkLoanShows checks, during a loan, that the borrower's queue reports it as loaned (and
// allocated, and borrowed) in its status and metrics, and that the pod got an OnLoan event.
func checkLoanShows(t *testing.T, c *cluster.Cluster, sched *schedProc) {
	t.Helper()
	eventually(t, 10*time.Second, "queue training's status showing the loan", func(ctx context.Context) (bool, error) {
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, client.ObjectKey{Name: "training"}, &q); err != nil {
			return false, err
		}
		l, a, b := q.Status.Loaned["gpu"], q.Status.Allocated["gpu"], q.Status.Borrowed["gpu"]
		return l.String() == "600m" && a.String() == "600m" && b.String() == "600m", fmt.Errorf("loaned %s allocated %s borrowed %s", l.String(), a.String(), b.String())
	})
	eventually(t, 10*time.Second, "fairway_loans{queue=training} 1", func(ctx context.Context) (bool, error) {
		fams, err := scrape(ctx, sched.MetricsURL)
		if err != nil {
			return false, err
		}
		v, ok := value(fams, "fairway_loans", map[string]string{"queue": "training"})
		return ok && v == 1, nil
	})
	eventually(t, 10*time.Second, "an OnLoan event", func(ctx context.Context) (bool, error) {
		return len(eventsFor(t, c, ctx, "training", "OnLoan")) > 0, nil
	})
}

// waitDeletion returns when the watched pod got its deletionTimestamp (or was deleted). The loan
// goes back through the Eviction API, which overwrites the DisruptionTarget condition with its
// own reason (EvictionByEvictionAPI) in the request that sets deletionTimestamp; what the pod
// must have seen is fairway's reason first, before the signal (as TestEvictions checks for
// reclaim).
func waitDeletion(t *testing.T, w watch.Interface, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	first := ""
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && first == "" {
					first = c.Reason + ": " + c.Message
				}
			}
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				at := time.Now()
				if !strings.HasPrefix(first, "FairwayLoanReturn: ") || !strings.Contains(first, "does GPU work") {
					t.Errorf("pod %s first saw DisruptionTarget %q, want a LoanReturn because the notebook works, before the signal", p.Name, first)
				}
				return at
			}
		case <-deadline:
			t.Fatalf("the loan was not returned within %v of the notebook's activity", timeout)
		}
	}
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// histogramCount is the observation count of an unlabelled histogram family.
func histogramCount(fams map[string]*dto.MetricFamily, name string) uint64 {
	for _, m := range fams[name].GetMetric() {
		return m.GetHistogram().GetSampleCount()
	}
	return 0
}
