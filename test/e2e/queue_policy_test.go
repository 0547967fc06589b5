//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestQueuePolicy runs the queue policies of examples/queues/queues.yaml on the heterogeneous
// cluster of nodes.yaml extended with a ninth node of a GPU model no queue lists (a B200 system),
// with a gpu-agent on every node (on go-nvml mocks of each node's own GPUs, so the agents label
// the nodes H100, A100, L4, T4 and B200 and serve GPU shares). It shows, with no node selector or
// affinity in any workload:
//   - the policy schema takes 20 GPU types per list (queue-wide and for each of the six kinds);
//   - research's training lands only on H100 and A100, although L4, T4 and B200 GPUs are idle;
//     one more pod waits, saying that the other types are closed by its queue's policy, and
//     lands on the B200 node as soon as an administrator lists B200;
//   - notebooks land only on L4 and T4;
//   - a notebook that names H100, or asks for 2 GPUs, is refused with the allowed values;
//   - a notebook that asks for no GPU gets the kind's default share (0.25 of an L4 or T4) and
//     runs on it.
func TestQueuePolicy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path, err := examples.Path("queues", "nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pools, err := cluster.LoadNodePools(path)
	if err != nil {
		t.Fatal(err)
	}
	// The ninth model: a B200 system nobody has listed yet.
	pools = append(pools, cluster.NodePool{Name: "b200", Count: 1, GPUType: "B200", GPUProduct: "NVIDIA-B200",
		GPUsPerNode: 8, GPUMemoryMiB: 184320, CPU: "224", Memory: "2Ti"})
	var objs []client.Object
	for _, obj := range exampleObjects(t, "queues", "queues.yaml") {
		objs = append(objs, obj)
	}
	// gpu-agents on every GPU node (stack's default), each on a mock of its node's GPUs.
	c := startExample(t, pools, objs, stack.Options{ProbeNamespace: "nlp"})
	wantType := map[string]string{"h100": "H100", "a100": "A100", "l4": "L4", "t4": "T4", "b200": "B200"}
	eventually(t, 30*time.Second, "every node labelled with its GPU type and publishing an inventory by its gpu-agent", func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := c.Client().List(ctx, &nodes); err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			pool, _, _ := strings.Cut(n.Name, "-")
			if got := n.Labels[fairwayv1.GPUTypeLabel]; got != wantType[pool] {
				return false, fmt.Errorf("node %s has GPU type %q, want %q", n.Name, got, wantType[pool])
			}
			if n.Annotations[fairwayv1.GPUInventoryAnnotation] == "" {
				return false, fmt.Errorf("node %s has no GPU inventory", n.Name)
			}
		}
		return len(nodes.Items) == 9, fmt.Errorf("%d nodes", len(nodes.Items))
	})

	t.Run("schema takes 20 GPU types per list", func(t *testing.T) {
		types := make([]string, 20)
		for i := range types {
			types[i] = fmt.Sprintf("GPU-%02d", i)
		}
		q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "twenty-types"}}
		q.Spec.Policy = &fairwayv1.QueuePolicy{PolicyRules: fairwayv1.PolicyRules{GPUTypes: types}}
		for _, k := range fairwayv1.WorkloadKinds {
			q.Spec.Policy.Workloads = append(q.Spec.Policy.Workloads, fairwayv1.WorkloadPolicy{Kind: k,
				PolicyRules: fairwayv1.PolicyRules{GPUTypes: types, MaxGPUsPerPod: ptr.To(resource.MustParse("8"))}})
		}
		if err := c.Client().Create(ctx, q, client.DryRunAll); err != nil {
			t.Errorf("a policy with 20 GPU types queue-wide and for each of %d kinds: %v", len(fairwayv1.WorkloadKinds), err)
		}
		bad := q.DeepCopy()
		bad.Spec.Policy.Workloads[0].DefaultGPU = &fairwayv1.DefaultGPU{GPUs: ptr.To[int32](1), Fraction: ptr.To("0.5")}
		err := c.Client().Create(ctx, bad, client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "set exactly one of gpus, fraction and memory") {
			t.Errorf("a defaultGPU with both gpus and fraction: %v, want Invalid saying to set exactly one", err)
		}
	})

	// Training: 20 workers in nlp and 12 in vision fill the 32 H100 and A100 GPUs; none goes to
	// the 24 idle L4, T4 and B200 GPUs.
	submitJob := func(ns, name string, workers int64) {
		job := exampleObject(t, ns, "queues", "training-job.yaml")
		job.SetName(name)
		for _, f := range [][]string{{"spec", "parallelism"}, {"spec", "completions"}} {
			if err := unstructuredSet(job, workers, f...); err != nil {
				t.Fatal(err)
			}
		}
		if err := unstructuredSet(job, "1h", "spec", "template", "metadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, c, job)
	}
	submitJob("nlp", "bert-finetune", 20)
	submitJob("vision", "bert-finetune", 12)
	eventually(t, 3*time.Minute, "32 training pods bound", func(ctx context.Context) (bool, error) {
		n, v := len(bound(podsIn(t, c, ctx, "nlp", nil))), len(bound(podsIn(t, c, ctx, "vision", nil)))
		return n == 20 && v == 12, fmt.Errorf("nlp %d, vision %d bound", n, v)
	})
	types := nodeGPUTypes(t, c)
	onlyOn := func(ns string, allowed ...string) map[string]float64 {
		t.Helper()
		perType := map[string]float64{}
		for _, p := range bound(podsIn(t, c, ctx, ns, nil)) {
			typ := types[p.Spec.NodeName]
			g := float64(gpusOf(&p))
			if f := p.Annotations[fairwayv1.GPUFractionAnnotation]; f != "" {
				q := resource.MustParse(f)
				g = q.AsApproximateFloat64()
			}
			perType[typ] += g
			if !slices.Contains(allowed, typ) {
				t.Errorf("%s pod %s on %s (%s); %s may only use %v", ns, p.Name, p.Spec.NodeName, typ, ns, allowed)
			}
		}
		return perType
	}
	t.Logf("training GPUs per type: nlp %v, vision %v", onlyOn("nlp", "H100", "A100"), onlyOn("vision", "H100", "A100"))

	// One more: no H100 or A100 is free, and the other types are closed to research.
	submitJob("vision", "one-more", 1)
	var waiting corev1.Pod
	eventually(t, 30*time.Second, "vision's extra pod waiting on the policy", func(ctx context.Context) (bool, error) {
		pods := pendingPods(podsIn(t, c, ctx, "vision", map[string]string{"batch.kubernetes.io/job-name": "one-more"}))
		if len(pods) != 1 {
			return false, fmt.Errorf("%d waiting", len(pods))
		}
		waiting = pods[0]
		r := reasonOf(&waiting)
		return strings.Contains(r, "GPU type closed by the queue's policy") && strings.Contains(r, "A100, H100"), fmt.Errorf("waits for %q", r)
	})
	t.Logf("vision pod waits: %s", reasonOf(&waiting))

	// An administrator lists the new model: the pod lands on it.
	var research fairwayv1.Queue
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "research"}, &research); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(research.DeepCopy())
	research.Spec.Policy.GPUTypes = append(research.Spec.Policy.GPUTypes, "B200")
	if err := c.Client().Patch(ctx, &research, patch); err != nil {
		t.Fatalf("listing B200 in research's policy: %v", err)
	}
	eventually(t, 30*time.Second, "vision's extra pod on the B200 node once listed", func(ctx context.Context) (bool, error) {
		pods := bound(podsIn(t, c, ctx, "vision", map[string]string{"batch.kubernetes.io/job-name": "one-more"}))
		if len(pods) != 1 {
			return false, fmt.Errorf("%d bound", len(pods))
		}
		return types[pods[0].Spec.NodeName] == "B200", fmt.Errorf("on %s", pods[0].Spec.NodeName)
	})

	// Notebooks: six whole-GPU ones of the JupyterHub example, as KubeSpawner makes them.
	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	notebook := func(user, profile string) *corev1.Pod {
		t.Helper()
		nb, err := examples.RenderNotebook(values, examples.NotebookOptions{Release: "jhub", Namespace: "notebooks",
			User: user, Profile: profile, NoHomeVolume: true})
		if err != nil {
			t.Fatal(err)
		}
		return nb
	}
	for i := range 6 {
		mustCreate(t, c, notebook(fmt.Sprintf("user%d", i), "gpu-whole"))
	}

	// Refused at admission, with the allowed values.
	h100 := notebook("pinned", "gpu-whole")
	h100.Spec.NodeSelector = map[string]string{fairwayv1.GPUTypeLabel: "H100"}
	two := notebook("greedy", "gpu-whole")
	for i := range two.Spec.Containers {
		if _, ok := two.Spec.Containers[i].Resources.Limits[fairwayv1.ResourceGPU]; ok {
			two.Spec.Containers[i].Resources.Limits[fairwayv1.ResourceGPU] = resource.MustParse("2")
		}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{h100, "queue product's policy for notebook pods allows GPU types L4, T4; the pod asks for H100"},
		{two, "queue product's policy for notebook pods allows at most 1 GPU per pod; the pod asks for 2 GPUs"},
	} {
		err := c.Client().Create(ctx, tc.pod)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("creating notebook %s: %v, want a refusal saying %q", tc.pod.Name, err, tc.want)
			continue
		}
		t.Logf("refused: %v", err)
	}

	// Asking for nothing: the quarter-GPU profile without its share annotation, a notebook that
	// asks for no GPU at all. The policy gives it 0.25 of a GPU.
	var defaulted []string
	for _, user := range []string{"nogpu0", "nogpu1"} {
		nb := notebook(user, "gpu-quarter")
		delete(nb.Annotations, fairwayv1.GPUFractionAnnotation)
		if slices.ContainsFunc(nb.Spec.Containers, func(c corev1.Container) bool {
			_, ok := c.Resources.Limits[fairwayv1.ResourceGPU]
			return ok
		}) {
			t.Fatalf("notebook %s asks for a whole GPU", nb.Name)
		}
		mustCreate(t, c, nb)
		defaulted = append(defaulted, nb.Name)
	}
	eventually(t, 3*time.Minute, "8 notebooks bound, the two that asked for nothing on a 0.25 share", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, "notebooks", nil)
		if b := len(bound(pods)); b != 8 {
			return false, fmt.Errorf("%d of %d bound", b, len(pods))
		}
		for _, p := range pods {
			if !slices.Contains(defaulted, p.Name) {
				continue
			}
			if f := p.Annotations[fairwayv1.GPUFractionAnnotation]; f != "0.25" {
				return false, fmt.Errorf("notebook %s has %s %q, want the policy's 0.25", p.Name, fairwayv1.GPUFractionAnnotation, f)
			}
			if p.Annotations[fairwayv1.GPUUUIDAnnotation] == "" {
				return false, fmt.Errorf("notebook %s has no GPU (%s) yet", p.Name, fairwayv1.GPUUUIDAnnotation)
			}
		}
		return true, nil
	})
	t.Logf("notebook GPUs per type: %v", onlyOn("notebooks", "L4", "T4"))
	eventually(t, 20*time.Second, "queue notebooks holds 6.5 GPUs", func(ctx context.Context) (bool, error) {
		q, err := queueStatus(ctx, c, "notebooks")
		if err != nil {
			return false, err
		}
		got := amount(q.Status.Allocated, "gpu")
		return got == 6.5, fmt.Errorf("allocated %v GPUs", got)
	})
}
