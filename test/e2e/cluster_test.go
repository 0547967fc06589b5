//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/nodepool"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// maxClusterStart is the promise to developers: a cluster with 4 Ready GPU nodes in under a
// minute once bin/ is built.
const maxClusterStart = 60 * time.Second

// TestLocalCluster brings up the local cluster the other e2e tests, the benchmarks and the demo
// use, and proves each part of it against the real components: GPU nodes, CRD validation by the
// API server, kube-scheduler plus kwok running a pod to completion, and the Argo and KubeRay
// helpers. The subtests share one cluster to keep the suite fast.
func TestLocalCluster(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	c := cluster.StartT(t, cluster.Config{
		NodePools:     []cluster.NodePool{cluster.H100Pool(4)},
		KubeScheduler: true,
		SkipCRDs:      true, // applied by a subtest, so a CRD that fails to apply fails only it
	})
	took := time.Since(begin)
	t.Logf("cluster with 4 Ready H100 nodes started in %v (limit %v)", took.Round(time.Millisecond), maxClusterStart)
	if took > maxClusterStart {
		t.Errorf("cluster start took %v, more than %v", took, maxClusterStart)
	}

	t.Run("GPUNodes", func(t *testing.T) { testGPUNodes(t, c) })
	t.Run("CRDValidation", func(t *testing.T) { testCRDValidation(t, c) })
	t.Run("PodRunsToCompletion", func(t *testing.T) { testPodRunsToCompletion(t, c) })
	t.Run("JobCompletes", func(t *testing.T) { testJobCompletes(t, c) })
	t.Run("ArgoWorkflow", func(t *testing.T) { testArgoWorkflow(t, c) })
	t.Run("KubeRayCluster", func(t *testing.T) { testKubeRayCluster(t, c) })
}

func testGPUNodes(t *testing.T, c *cluster.Cluster) {
	nodes := &corev1.NodeList{}
	if err := c.Client().List(t.Context(), nodes); err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	if len(nodes.Items) != 4 {
		t.Fatalf("got %d nodes, want 4", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if !cluster.NodeReady(&n) {
			t.Errorf("node %s is not Ready and schedulable: taints %v, conditions %v", n.Name, n.Spec.Taints, n.Status.Conditions)
		}
		gpus := n.Status.Allocatable[fairwayv1.ResourceGPU]
		if gpus.Value() != 8 {
			t.Errorf("node %s: allocatable %s = %s, want 8", n.Name, fairwayv1.ResourceGPU, gpus.String())
		}
		for k, want := range map[string]string{
			fairwayv1.GPUTypeLabel:         "H100",
			fairwayv1.GPUCountLabel:        "8",
			fairwayv1.GPUMemoryLabel:       "81559",
			nodepool.NVIDIAGPUProductLabel: "NVIDIA-H100-80GB-HBM3",
			fairwayv1.NVLinkDomainLabel:    "nvl-" + strings.TrimPrefix(n.Name, "h100-"),
		} {
			if got := n.Labels[k]; got != want {
				t.Errorf("node %s: label %s = %q, want %q", n.Name, k, got, want)
			}
		}
	}
}

// testCRDValidation applies fairway's CRDs and checks that the API server itself refuses bad
// objects with a message that names the field.
func testCRDValidation(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyCRDs(ctx, filepath.Join(root, "charts", "fairway", "crds")); err != nil {
		t.Fatalf("the API server refused fairway's CRDs: %v", err)
	}

	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	invalid := []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"negative quota", &fairwayv1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: "negative-quota"},
			Spec:       fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: q("-1")}}},
		}, "spec.resources.gpu.quota"},
		{"limit below quota", &fairwayv1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: "limit-below-quota"},
			Spec:       fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: q("8"), Limit: q("4")}}},
		}, "spec.resources.gpu.limit"},
		{"minMember 0", &fairwayv1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "empty-gang", Namespace: "default"},
			Spec:       fairwayv1.PodGroupSpec{MinMember: 0},
		}, "spec.minMember"},
	}
	for _, tc := range invalid {
		err := c.Client().Create(ctx, tc.obj)
		switch {
		case err == nil:
			t.Errorf("%s: the API server accepted an invalid %T", tc.name, tc.obj)
		case !apierrors.IsInvalid(err):
			t.Errorf("%s: want an Invalid error, got %v", tc.name, err)
		case !strings.Contains(err.Error(), tc.field):
			t.Errorf("%s: the message does not name %s: %v", tc.name, tc.field, err)
		default:
			t.Logf("%s refused: %v", tc.name, err)
		}
	}

	valid := []client.Object{
		&fairwayv1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec: fairwayv1.QueueSpec{
				Namespaces: []string{"default"},
				Resources:  fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: q("8"), Limit: q("16")}},
				GPUTypes:   []fairwayv1.GPUTypeQuota{{Name: "H100", Quota: q("8")}},
			},
		},
		&fairwayv1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"},
			Spec:       fairwayv1.PodGroupSpec{MinMember: 4, Queue: "team-a"},
		},
	}
	for _, obj := range valid {
		if err := c.Client().Create(ctx, obj); err != nil {
			t.Errorf("the API server refused a valid %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// testPodRunsToCompletion: a plain pod asking for a GPU is bound by the real kube-scheduler,
// made Running by kwok, and finished by kwok after its pod-complete delay.
func testPodRunsToCompletion(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "one-gpu",
			Namespace:   "default",
			Annotations: map[string]string{cluster.CompleteDelayAnnotation: "2s"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "busybox",
				Command:   []string{"sleep", "2"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}},
			}},
		},
	}
	begin := time.Now()
	if err := c.Client().Create(ctx, pod); err != nil {
		t.Fatalf("creating a pod: %v", err)
	}
	waitPodPhase(t, c, pod, corev1.PodRunning)
	t.Logf("pod %s bound to %s and Running after %v", pod.Name, pod.Spec.NodeName, time.Since(begin).Round(time.Millisecond))
	if pod.Spec.NodeName == "" {
		t.Fatalf("pod %s is Running without a node", pod.Name)
	}
	waitPodPhase(t, c, pod, corev1.PodSucceeded)
	t.Logf("pod %s Succeeded after %v", pod.Name, time.Since(begin).Round(time.Millisecond))

	// Without a kubelet, kwok's pod-delete stage is what removes a deleted pod.
	if err := c.Client().Delete(ctx, pod); err != nil {
		t.Fatalf("deleting pod %s: %v", pod.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Client().Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})), nil
	})
	if err != nil {
		t.Fatalf("deleted pod %s is still there: %v", pod.Name, err)
	}
}

// testJobCompletes: a Job's pod finishes through kwok's Job stage without any annotation, and the
// Job controller in kube-controller-manager marks the Job complete.
func testJobCompletes(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default"},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
			}},
		},
	}
	begin := time.Now()
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatalf("creating a Job: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, nil
		}
		for _, cond := range job.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Job did not complete (status %+v): %v", job.Status, err)
	}
	t.Logf("Job %s complete after %v", job.Name, time.Since(begin).Round(time.Millisecond))
}

// waitPodPhase waits for a pod to reach a phase, refreshing pod.
func waitPodPhase(t *testing.T, c *cluster.Cluster, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, nil
		}
		return pod.Status.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("pod %s did not reach %s (phase %s, node %q, conditions %v): %v", pod.Name, phase, pod.Status.Phase, pod.Spec.NodeName, pod.Status.Conditions, err)
	}
}

const helloWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: hello
  namespace: default
spec:
  entrypoint: main
  podMetadata:
    annotations:
      pod-complete.stage.kwok.x-k8s.io/delay: 1s
  templates:
  - name: main
    container:
      image: busybox
      command: [echo, hello]
      resources:
        limits:
          nvidia.com/gpu: "1"
`

// testArgoWorkflow: a one-step Workflow runs to Succeeded through the real workflow-controller,
// the real kube-scheduler and kwok.
func testArgoWorkflow(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	begin := time.Now()
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}
	t.Logf("Argo workflow-controller up after %v", time.Since(begin).Round(time.Millisecond))
	wf := mustUnstructured(t, helloWorkflow)
	if err := c.Client().Create(ctx, wf); err != nil {
		t.Fatalf("creating the workflow: %v", err)
	}
	phase := waitUnstructured(t, c, wf, 60*time.Second, func(u *unstructured.Unstructured) (string, bool) {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase, phase == "Succeeded" || phase == "Failed" || phase == "Error"
	})
	if phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		t.Fatalf("workflow ended %s: %s", phase, msg)
	}
	t.Logf("workflow %s Succeeded %v after the controller started", wf.GetName(), time.Since(begin).Round(time.Millisecond))
}

const rayCluster = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc
  namespace: default
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.40.0
          resources:
            limits: {cpu: "2", memory: 8Gi}
  workerGroupSpecs:
  - groupName: gpu
    replicas: 2
    minReplicas: 0
    maxReplicas: 4
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.40.0
          resources:
            limits: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1"}
`

// testKubeRayCluster: the real KubeRay operator creates a RayCluster's head and worker pods, and
// they run through kube-scheduler and kwok.
func testKubeRayCluster(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	begin := time.Now()
	if _, err := c.StartKubeRay(ctx, cluster.KubeRayOptions{}); err != nil {
		t.Fatalf("starting KubeRay: %v", err)
	}
	t.Logf("KubeRay operator up after %v", time.Since(begin).Round(time.Millisecond))
	if err := c.Client().Create(ctx, mustUnstructured(t, rayCluster)); err != nil {
		t.Fatalf("creating the RayCluster: %v", err)
	}
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Client().List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"ray.io/cluster": "rc"}); err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3, nil
	})
	if err != nil {
		t.Fatalf("want 3 Running pods of RayCluster rc (head + 2 workers), got %s: %v", describePods(pods.Items), err)
	}
	t.Logf("RayCluster pods Running %v after the operator started: %s", time.Since(begin).Round(time.Millisecond), describePods(pods.Items))
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s(%s on %q) ", p.Name, p.Status.Phase, p.Spec.NodeName)
	}
	return strings.TrimSpace(b.String())
}

func mustUnstructured(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("parsing a test manifest: %v", err)
	}
	return u
}

// waitUnstructured polls obj until done says so, and returns done's summary.
func waitUnstructured(t *testing.T, c *cluster.Cluster, obj *unstructured.Unstructured, timeout time.Duration, done func(*unstructured.Unstructured) (string, bool)) string {
	t.Helper()
	var summary string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		var ok bool
		summary, ok = done(obj)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s %s: still %q: %v", obj.GetKind(), obj.GetName(), summary, err)
	}
	return summary
}
