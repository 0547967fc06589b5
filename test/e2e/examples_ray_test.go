//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleRay applies examples/ray with the real KubeRay operator (no --batch-scheduler).
// RayCluster: its five pods are one gang (head + 2 CPU + 2 GPU workers) that needs 2 GPUs; on a
// cluster with one GPU nothing starts, not even the head and CPU workers that would fit, and the
// PodGroup says why; when a node with two more GPUs joins, the gang starts whole and each GPU
// worker has its GPU. RayJob: KubeRay makes its cluster, fairway starts it as a gang of two on
// the GPU left, KubeRay sees it ready and creates the submitter Job, whose pod (a CPU-only Job
// pod) the queue's default spec.admit leaves to kube-scheduler.
func TestExampleRay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "ml-team"
	small := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 1,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	c := startExample(t, []cluster.NodePool{small}, []client.Object{exampleQueue("ml-team", ns, "")}, stack.Options{})
	if _, err := c.StartKubeRay(ctx, cluster.KubeRayOptions{}); err != nil {
		t.Fatalf("starting KubeRay: %v", err)
	}

	rc := exampleObject(t, ns, "ray", "raycluster.yaml")
	mustCreate(t, c, rc)
	sel := map[string]string{kuberay.ClusterLabel: rc.GetName()}
	group := adapters.GroupName("ray", rc.GetName())
	pods := waitPods(t, c, ns, sel, 5, 60*time.Second)
	for i := range pods {
		p := &pods[i]
		want := expectPod{queue: ns, framework: kuberay.Name, kind: string(adapters.KindRay), podGroup: group, subGroup: p.Labels[kuberay.GroupLabel],
			minMember: 5, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)}
		checkPod(t, p, want)
		if wantGPUs := map[string]int64{"gpu": 1}[p.Labels[kuberay.GroupLabel]]; gpusOf(p) != wantGPUs {
			t.Errorf("pod %s (group %s) asks for %d GPUs, want %d", p.Name, p.Labels[kuberay.GroupLabel], gpusOf(p), wantGPUs)
		}
	}

	// One GPU for a gang that needs two: the gang waits whole, with its reason.
	var pg fairwayv1.PodGroup
	eventually(t, 30*time.Second, "the gang's PodGroup unschedulable", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, &pg); err != nil {
			return false, err
		}
		why := conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable)
		return pg.Spec.MinMember == 5 && conditionStatus(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable) == metav1.ConditionTrue &&
			!strings.HasPrefix(why, "WaitingForPods"), fmt.Errorf("condition %q", why)
	})
	t.Logf("gang %s waits: %s", group, conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable))
	if b := bound(podsIn(t, c, ctx, ns, sel)); len(b) != 0 {
		t.Fatalf("%d of the gang's pods bound with too few GPUs: %s", len(b), describePods(b))
	}

	// Two more GPUs arrive: the gang starts whole.
	begin := time.Now()
	more := cluster.NodePool{Name: "h100-more", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 2,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	if _, err := c.AddNodes(ctx, more); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the RayCluster's 5 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, sel))) == 5, nil
	})
	t.Logf("gang bound %v after the node joined", time.Since(begin).Round(time.Millisecond))
	gpus := map[string]int64{}
	for _, p := range podsIn(t, c, ctx, ns, sel) {
		gpus[p.Spec.NodeName] += gpusOf(&p)
	}
	if gpus["h100-0"] > 1 || gpus["h100-more-0"] > 2 || gpus["h100-0"]+gpus["h100-more-0"] != 2 {
		t.Errorf("GPUs per node: %v", gpus)
	}
	eventually(t, 30*time.Second, "KubeRay sees the cluster ready", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(rc), rc); err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(rc.Object, "status", "state")
		return state == "ready", fmt.Errorf("state %q", state)
	})

	// The RayJob: its own cluster, a gang of two on the GPU left, then the submitter, which
	// kube-scheduler places.
	if _, err := c.StartKubeScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	job := exampleObject(t, ns, "ray", "rayjob.yaml")
	mustCreate(t, c, job)
	var jobCluster string
	eventually(t, 30*time.Second, "the RayJob's cluster", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		jobCluster, _, _ = unstructured.NestedString(job.Object, "status", "rayClusterName")
		return jobCluster != "", nil
	})
	jsel := map[string]string{kuberay.ClusterLabel: jobCluster}
	eventually(t, 60*time.Second, "the RayJob's cluster bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, jsel))) == 2, nil
	})
	for _, p := range podsIn(t, c, ctx, ns, jsel) {
		checkPod(t, &p, expectPod{queue: ns, framework: kuberay.Name, kind: string(adapters.KindRay), podGroup: adapters.GroupName("ray", jobCluster),
			subGroup: p.Labels[kuberay.GroupLabel], minMember: 2, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
	}
	jobPods := map[string]string{"batch.kubernetes.io/job-name": job.GetName()}
	eventually(t, 60*time.Second, "the submitter's pod placed by kube-scheduler", func(ctx context.Context) (bool, error) {
		for _, p := range podsIn(t, c, ctx, ns, jobPods) {
			if p.Spec.NodeName != "" {
				if p.Spec.SchedulerName != corev1.DefaultSchedulerName || p.Labels[fairwayv1.QueueLabel] != "" {
					return false, fmt.Errorf("submitter %s: scheduler %q queue %q", p.Name, p.Spec.SchedulerName, p.Labels[fairwayv1.QueueLabel])
				}
				return true, nil
			}
		}
		return false, nil
	})
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	deploy, _, _ := unstructured.NestedString(job.Object, "status", "jobDeploymentStatus")
	t.Logf("RayJob %s: cluster %s bound as a gang of 2, submitter placed; deployment status %s", job.GetName(), jobCluster, deploy)
}

// conditionStatus returns the status of a condition type ("" when absent).
func conditionStatus(conds []metav1.Condition, typ string) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}
