//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/publish"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// TestGPUAgent runs one gpu-agent per fake node, each on a go-nvml mock server, against the
// real control plane, and checks what the scheduler will rely on: labels and inventory come
// from each node's own agent, a reservation pod learns its GPU's UUID through the kubelet
// PodResources path, the metrics endpoint serves the expected series, idleness is signalled
// within a poll or two, and a lost GPU is reported.
func TestGPUAgent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin, err := gpuagents.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// GPU labels other than the count are left unset: only the agents can put them there.
	c := cluster.StartT(t, cluster.Config{
		NodePools: []cluster.NodePool{
			{Name: "h100", Count: 2, GPUsPerNode: 8, CPU: "224", Memory: "2Ti"},
			{Name: "h200", Count: 1, GPUsPerNode: 8, CPU: "224", Memory: "2Ti"},
		},
		KubeScheduler: true,
		SkipCRDs:      true,
	})
	nodes := []gpuagents.Node{
		{Name: "h100-0", System: "dgxh100"},
		{Name: "h100-1", System: "dgxh100"},
		{Name: "h200-0", System: "dgxh200"},
	}
	begin := time.Now()
	fleet, err := gpuagents.Start(ctx, c, gpuagents.Options{
		Nodes:           nodes,
		Binary:          bin,
		UsageInterval:   250 * time.Millisecond,
		RefreshInterval: 3 * time.Second,
		IdleAfter:       2 * time.Second,
		Log:             testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	t.Logf("%d agents ready in %v", len(nodes), time.Since(begin).Round(time.Millisecond))

	t.Run("LabelsAndInventoryFromEachAgent", func(t *testing.T) { testAgentPublishes(t, c, nodes) })
	t.Run("ReservationPodGetsGPUFromAssignmentPath", func(t *testing.T) { testReservationAssignment(t, c, fleet) })
	t.Run("MetricsAndIdleness", func(t *testing.T) { testMetricsAndIdleness(t, c, fleet.Agent("h100-1")) })
	t.Run("LostGPUIsReported", func(t *testing.T) { testLostGPU(t, c, fleet.Agent("h100-0")) })
	t.Run("DriverFailureIsReported", func(t *testing.T) { testDriverFailure(t, c, fleet.Agent("h200-0")) })
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last error: %v)", what, timeout, last)
	}
}

func nodeInventory(ctx context.Context, c *cluster.Cluster, name string) (*corev1.Node, *fairwayv1.GPUInventory, error) {
	var n corev1.Node
	if err := c.Client().Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return nil, nil, err
	}
	inv, err := publish.Parse(n.Annotations[fairwayv1.GPUInventoryAnnotation])
	return &n, inv, err
}

func testAgentPublishes(t *testing.T, c *cluster.Cluster, nodes []gpuagents.Node) {
	want := map[string]struct{ gpuType, product, memory string }{
		"dgxh100": {"H100", "NVIDIA-H100-80GB-HBM3", "81920"},
		"dgxh200": {"H200", "NVIDIA-H200-141GB-HBM3e", "144384"},
	}
	seen := map[string]string{}
	for _, an := range nodes {
		w := want[an.System]
		var inv *fairwayv1.GPUInventory
		eventually(t, 20*time.Second, "inventory and labels on "+an.Name, func(ctx context.Context) (bool, error) {
			n, i, err := nodeInventory(ctx, c, an.Name)
			if err != nil || i == nil {
				return false, err
			}
			inv = i
			for k, v := range map[string]string{
				fairwayv1.GPUTypeLabel:      w.gpuType,
				fairwayv1.GPUProductLabel:   w.product,
				fairwayv1.GPUMemoryLabel:    w.memory,
				fairwayv1.GPUCountLabel:     "8",
				fairwayv1.NVLinkDomainLabel: "node." + an.Name,
			} {
				if n.Labels[k] != v {
					return false, fmt.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
				}
			}
			return true, nil
		})
		if len(inv.GPUs) != 8 || inv.RefreshSeconds != 3 || inv.MPS {
			t.Errorf("%s inventory: %d GPUs, refresh %d, mps %v", an.Name, len(inv.GPUs), inv.RefreshSeconds, inv.MPS)
		}
		for i, g := range inv.GPUs {
			// The UUIDs are the ones this node's own mock GPUs report, distinct across nodes.
			if g.UUID != fakegpu.DeviceUUID(an.Name, i) || !g.Healthy || int(g.Index) != i {
				t.Errorf("%s GPU %d = %+v", an.Name, i, g)
			}
			if other, dup := seen[g.UUID]; dup {
				t.Errorf("UUID %s on %s and %s", g.UUID, other, an.Name)
			}
			seen[g.UUID] = an.Name
		}
	}
	// The agent re-confirms the inventory every refresh period, so staleness is visible.
	_, first, _ := nodeInventory(t.Context(), c, nodes[0].Name)
	eventually(t, 10*time.Second, "inventory re-confirmed", func(ctx context.Context) (bool, error) {
		_, inv, err := nodeInventory(ctx, c, nodes[0].Name)
		return err == nil && inv.ObservedAt.After(first.ObservedAt.Time), err
	})
	if _, inv, _ := nodeInventory(t.Context(), c, nodes[0].Name); publish.Stale(inv, time.Now()) {
		t.Errorf("a live agent's inventory is stale: observed %v", inv.ObservedAt)
	}
}

func testReservationAssignment(t *testing.T, c *cluster.Cluster, fleet *gpuagents.Fleet) {
	// A reservation pod as the scheduler's runtime makes it, in fairway's namespace (the only one
	// whose pods the agent takes for reservations), and the same pod in another namespace.
	reservation := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns,
				Name:      "gpu-reservation-e2e",
				Labels:    map[string]string{fairwayv1.ReservationLabel: "true", fairwayv1.GPUGroupLabel: "group-e2e"},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:      "reserve",
				Image:     "fairway/reservation",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}},
			}}},
		}
	}
	if err := c.Client().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fairwayv1.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	forged := reservation("default")
	if err := c.Client().Create(t.Context(), forged); err != nil {
		t.Fatal(err)
	}
	pod := reservation(fairwayv1.DefaultNamespace)
	if err := c.Client().Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	eventually(t, 30*time.Second, "fairway.dev/gpu-uuid on the reservation pod", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKeyFromObject(pod), &got)
		return err == nil && got.Annotations[fairwayv1.GPUUUIDAnnotation] != "", err
	})
	node := got.Spec.NodeName
	assigned := fleet.Assigned(node, got.UID)
	uuid := got.Annotations[fairwayv1.GPUUUIDAnnotation]
	if len(assigned) != 1 || assigned[0] != uuid {
		t.Fatalf("pod on %s annotated %s; the kubelet stand-in assigned %v", node, uuid, assigned)
	}
	_, inv, err := nodeInventory(t.Context(), c, node)
	if err != nil {
		t.Fatal(err)
	}
	idx := got.Annotations[fairwayv1.GPUIndexAnnotation]
	if i, err := strconv.Atoi(idx); err != nil || inv.GPUs[i].UUID != uuid {
		t.Errorf("gpu-index %q does not name %s in %s's inventory", idx, uuid, node)
	}
	t.Logf("reservation pod on %s got GPU %s (index %s)", node, uuid, idx)
	// By now the agents have passed over the forged one too: nothing was written on it.
	if err := c.Client().Get(t.Context(), client.ObjectKeyFromObject(forged), forged); err != nil {
		t.Fatal(err)
	}
	if v, ok := forged.Annotations[fairwayv1.GPUUUIDAnnotation]; ok {
		t.Errorf("a pod labelled as a reservation outside fairway's namespace got GPU %s from the agent", v)
	}
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value returns the value of the series of family name whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

func testMetricsAndIdleness(t *testing.T, c *cluster.Cluster, agent *gpuagents.Agent) {
	fams, err := scrape(t.Context(), agent.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fams["fairway_gpu_info"].GetMetric()); n != 8 {
		t.Errorf("fairway_gpu_info has %d series, want 8", n)
	}
	node := map[string]string{"node": agent.Node}
	for name, want := range map[string]float64{"fairway_gpu_nvml_up": 1, "fairway_gpu_mps_enabled": 0} {
		if v, ok := value(fams, name, node); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	gpu3 := map[string]string{"node": agent.Node, "gpu_index": "3", "gpu_uuid": fakegpu.DeviceUUID(agent.Node, 3), "model": "NVIDIA H100 80GB HBM3"}
	if v, ok := value(fams, "fairway_gpu_memory_total_bytes", gpu3); !ok || v != 81920*(1<<20) {
		t.Errorf("fairway_gpu_memory_total_bytes%v = %v, %v", gpu3, v, ok)
	}

	// An interactive pod (a notebook) with a fractional share of GPU 3.
	nb := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "default",
			Name:        "notebook-e2e",
			Labels:      map[string]string{fairwayv1.QueueLabel: "research", fairwayv1.PreemptibilityLabel: "non-preemptible"},
			Annotations: map[string]string{fairwayv1.GPUIndexAnnotation: "3"},
		},
		Spec: corev1.PodSpec{
			NodeName:   agent.Node,
			Containers: []corev1.Container{{Name: "notebook", Image: "jupyter/minimal"}},
		},
	}
	if err := c.Client().Create(t.Context(), nb); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.SetGPU(t.Context(), 3, fakegpu.DeviceUpdate{Processes: &[]fakegpu.Process{
		{PID: 4242, PodUID: string(nb.UID), UsedMiB: 2048},
	}}); err != nil {
		t.Fatal(err)
	}
	podSeries := map[string]string{"node": agent.Node, "gpu_index": "3", "namespace": "default", "pod": "notebook-e2e", "queue": "research"}
	eventually(t, 10*time.Second, "per-pod metrics of the notebook", func(ctx context.Context) (bool, error) {
		fams, err := scrape(ctx, agent.MetricsURL)
		if err != nil {
			return false, err
		}
		mem, ok := value(fams, "fairway_gpu_pod_memory_used_bytes", podSeries)
		_, idleSeries := value(fams, "fairway_gpu_pod_idle", podSeries)
		return ok && mem == 2048*(1<<20) && idleSeries, nil
	})

	condition := func(ctx context.Context) (corev1.ConditionStatus, error) {
		var p corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), &p); err != nil {
			return "", err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == fairwayv1.GPUIdleCondition {
				return cond.Status, nil
			}
		}
		return "", nil
	}
	// Idle after --idle-after (2s) without work...
	eventually(t, 15*time.Second, "GPUIdle=True on the idle notebook", func(ctx context.Context) (bool, error) {
		s, err := condition(ctx)
		return s == corev1.ConditionTrue, err
	})
	// The memory that stays resident if the GPU is lent is on the pod before the condition, and
	// so is the observation to the microsecond, the same second as the condition's
	// lastTransitionTime.
	var idle corev1.Pod
	if err := c.Client().Get(t.Context(), client.ObjectKeyFromObject(nb), &idle); err != nil {
		t.Fatal(err)
	}
	if got := idle.Annotations[fairwayv1.IdleGPUMemoryAnnotation]; got != "2048" {
		t.Errorf("idle notebook %s = %q, want 2048", fairwayv1.IdleGPUMemoryAnnotation, got)
	}
	if cond := fairwayv1.GPUIdleConditionOf(&idle); cond == nil {
		t.Error("the idle notebook lost its GPUIdle condition")
	} else if raw := idle.Annotations[fairwayv1.GPUIdleObservedAnnotation]; raw == "" {
		t.Errorf("the idle notebook has no %s", fairwayv1.GPUIdleObservedAnnotation)
	} else if observed, err := time.Parse(fairwayv1.GPUIdleObservedFormat, raw); err != nil ||
		!observed.Truncate(time.Second).Equal(cond.LastTransitionTime.Time) || !fairwayv1.GPUIdleObserved(&idle).Equal(observed) {
		t.Errorf("%s %q (%v) is not the observation of the condition's transition at %s", fairwayv1.GPUIdleObservedAnnotation, raw, err, cond.LastTransitionTime)
	}
	// ...and active again at the first sign of work, within a poll or two.
	start := time.Now()
	if _, err := agent.SetGPU(t.Context(), 3, fakegpu.DeviceUpdate{Processes: &[]fakegpu.Process{
		{PID: 4242, PodUID: string(nb.UID), UsedMiB: 2048, SMPercent: 60},
	}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "GPUIdle=False once the notebook works", func(ctx context.Context) (bool, error) {
		s, err := condition(ctx)
		return s == corev1.ConditionFalse, err
	})
	t.Logf("idle -> active visible in the API %v after the work started", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the active signal took %v, want within ~2s", took)
	}
}

func testLostGPU(t *testing.T, c *cluster.Cluster, agent *gpuagents.Agent) {
	if _, err := agent.SetGPU(t.Context(), 7, fakegpu.DeviceUpdate{Failure: ptr.To("ERROR_GPU_IS_LOST")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the lost GPU in labels and inventory", func(ctx context.Context) (bool, error) {
		n, inv, err := nodeInventory(ctx, c, agent.Node)
		if err != nil || inv == nil {
			return false, err
		}
		return n.Labels[fairwayv1.GPUCountLabel] == "7" && !inv.GPUs[7].Healthy && inv.GPUs[7].UUID == fakegpu.DeviceUUID(agent.Node, 7), nil
	})
	fams, err := scrape(t.Context(), agent.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := value(fams, "fairway_gpu_healthy", map[string]string{"gpu_index": "7"}); !ok || v != 0 {
		t.Errorf("fairway_gpu_healthy{gpu_index=7} = %v, %v; want 0", v, ok)
	}
	if v, ok := value(fams, "fairway_gpu_nvml_errors_total", map[string]string{"code": "ERROR_GPU_IS_LOST"}); !ok || v == 0 {
		t.Errorf("fairway_gpu_nvml_errors_total{code=ERROR_GPU_IS_LOST} = %v, %v", v, ok)
	}
	// After a reset the GPU is back.
	if _, err := agent.SetGPU(t.Context(), 7, fakegpu.DeviceUpdate{Failure: ptr.To("")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the GPU back after reset", func(ctx context.Context) (bool, error) {
		n, _, err := nodeInventory(ctx, c, agent.Node)
		return err == nil && n.Labels[fairwayv1.GPUCountLabel] == "8", err
	})
}

func testDriverFailure(t *testing.T, c *cluster.Cluster, agent *gpuagents.Agent) {
	if err := agent.FailLibrary(t.Context(), "ERROR_DRIVER_NOT_LOADED"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "every GPU unhealthy while the driver is gone", func(ctx context.Context) (bool, error) {
		n, inv, err := nodeInventory(ctx, c, agent.Node)
		if err != nil || inv == nil {
			return false, err
		}
		for _, g := range inv.GPUs {
			if g.Healthy {
				return false, nil
			}
		}
		return n.Labels[fairwayv1.GPUCountLabel] == "0", nil
	})
	fams, err := scrape(t.Context(), agent.MetricsURL)
	if err != nil {
		t.Fatalf("the agent must keep serving metrics without a driver: %v", err)
	}
	if v, ok := value(fams, "fairway_gpu_nvml_up", nil); !ok || v != 0 {
		t.Errorf("fairway_gpu_nvml_up = %v, %v; want 0", v, ok)
	}
	if v, ok := value(fams, "fairway_gpu_nvml_errors_total", map[string]string{"code": "ERROR_DRIVER_NOT_LOADED"}); !ok || v == 0 {
		t.Errorf("fairway_gpu_nvml_errors_total{code=ERROR_DRIVER_NOT_LOADED} = %v, %v", v, ok)
	}
	if resp, err := http.Get(agent.ReadyURL); err != nil || resp.StatusCode == http.StatusOK {
		t.Errorf("/readyz while NVML is down: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	if err := agent.FailLibrary(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the GPUs back with the driver", func(ctx context.Context) (bool, error) {
		n, _, err := nodeInventory(ctx, c, agent.Node)
		return err == nil && n.Labels[fairwayv1.GPUCountLabel] == "8", err
	})
}
