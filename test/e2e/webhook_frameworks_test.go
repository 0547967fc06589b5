//go:build e2e

package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// trainPipeline is a three-step Argo workflow; its train step asks for half a GPU through the
// template's pod metadata. Workflow-wide podMetadata carries kwok's completion delay (so steps
// finish under kwok) and a team label.
const trainPipeline = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: train-pipeline
  namespace: team-a
spec:
  entrypoint: pipeline
  podMetadata:
    labels: {team: vision}
    annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 1s}
  templates:
  - name: pipeline
    steps:
    - - {name: prepare, template: prepare}
    - - {name: train, template: train}
    - - {name: evaluate, template: evaluate}
  - name: prepare
    container: {image: "python:3.12", command: [python, prepare.py], resources: {requests: {cpu: "1", memory: 2Gi}}}
  - name: train
    metadata:
      annotations: {fairway.dev/gpu-fraction: "0.5"}
    container: {image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", command: [python, train.py], resources: {requests: {cpu: "4", memory: 16Gi}}}
  - name: evaluate
    container: {image: "python:3.12", command: [python, evaluate.py], resources: {requests: {cpu: "1", memory: 2Gi}}}
`

// testArgoWorkflow3Steps: the real workflow-controller runs the three steps; each pod lands with
// fairway's scheduler, queue, a gang of its own, the training priority, and the GPU share on
// main (never on Argo's wait sidecar at index 0); the workflow finishes, which also proves the
// controller still finds its pods by the labels the webhook never touches.
func testArgoWorkflow3Steps(t *testing.T, c *cluster.Cluster) {
	startArgoOnce(t, c)
	wf := mustUnstructured(t, trainPipeline)
	if err := c.Client().Create(t.Context(), wf); err != nil {
		t.Fatalf("creating the workflow: %v", err)
	}
	phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone)
	pods := podsOf(t, c, "team-a", map[string]string{argo.WorkflowLabel: "train-pipeline"})
	if phase != "Succeeded" {
		t.Errorf("workflow ended %s; pods: %s", phase, describePods(pods))
	}
	if len(pods) != 3 {
		t.Fatalf("want 3 step pods, got %s", describePods(pods))
	}
	for i := range pods {
		p := &pods[i]
		want := expectPod{queue: "team-a", framework: argo.Name, kind: string(adapters.KindWorkflowStep), minMember: 1,
			podGroup:      adapters.GroupName("wf", "train-pipeline", adapters.ShortHash(p.Annotations[argo.NodeIDAnnotation])),
			priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)}
		if p.Spec.Containers[0].Name != argo.WaitContainer {
			t.Errorf("pod %s: container 0 is %q; Argo puts wait first", p.Name, p.Spec.Containers[0].Name)
		}
		if p.Labels["team"] != "vision" {
			t.Errorf("pod %s lost its podMetadata label", p.Name)
		}
		if p.Annotations["workflows.argoproj.io/node-name"] == "train-pipeline[1].train" {
			want.gpuFraction, want.gpuContainer = "0.5", argo.MainContainer
		}
		checkPod(t, p, want)
	}
}

// kfpPipeline is a workflow shaped as KFP 2.17 compiles a one-task pipeline: a root DAG driver, a
// container driver and the executor (system-container-impl, with the kfp-launcher init
// container), KFP's run label and component markers on every pod, and - as an administrator's
// COMPILED_PIPELINE_SPEC_PATCH would put it - a GPU share on every pod, which the drivers must
// shed.
const kfpPipeline = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: my-pipeline-kx7qz
  namespace: team-a
  labels: {pipeline/runid: 6f1c2a8e-52b1-4f5e-8d1c-7d0f3d8f9a11}
  annotations: {pipelines.kubeflow.org/run_name: nightly}
spec:
  entrypoint: entrypoint
  podMetadata:
    labels:
      pipelines.kubeflow.org/v2_component: "true"
      pipeline/runid: 6f1c2a8e-52b1-4f5e-8d1c-7d0f3d8f9a11
    annotations:
      pipelines.kubeflow.org/v2_component: "true"
      pod-complete.stage.kwok.x-k8s.io/delay: 1s
      fairway.dev/gpu-fraction: "0.25"
  templates:
  - name: entrypoint
    dag:
      tasks:
      - {name: root-driver, template: system-dag-driver}
      - {name: train-driver, template: system-container-driver, depends: root-driver}
      - {name: executor, template: system-container-impl, depends: train-driver}
  - name: system-dag-driver
    metadata:
      annotations: {pipelines.kubeflow.org/runtime-role: driver, sidecar.istio.io/inject: "false"}
    container:
      image: ghcr.io/kubeflow/kfp-driver:2.17.0
      command: [driver]
      args: [--type, ROOT_DAG, --pipeline_name, my-pipeline]
      resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 500m, memory: 512Mi}}
  - name: system-container-driver
    metadata:
      annotations: {pipelines.kubeflow.org/runtime-role: driver, sidecar.istio.io/inject: "false"}
    container:
      image: ghcr.io/kubeflow/kfp-driver:2.17.0
      command: [driver]
      args: [--type, CONTAINER, --pipeline_name, my-pipeline]
      resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 500m, memory: 512Mi}}
  - name: system-container-impl
    metadata:
      annotations: {pipelines.kubeflow.org/runtime-role: launcher, sidecar.istio.io/inject: "false"}
    initContainers:
    - name: kfp-launcher
      image: ghcr.io/kubeflow/kfp-launcher:2.17.0
      command: [launcher-v2, --copy, /kfp-launcher/launch]
      resources: {requests: {cpu: 100m}, limits: {cpu: 500m, memory: 256Mi}}
    container:
      image: ghcr.io/example/vision-train:2.0
      command: [/kfp-launcher/launch, --pipeline_name, my-pipeline, --executor_type, container, --, python, train.py]
      resources: {requests: {cpu: "4", memory: 16Gi}}
`

// testKFPWorkflow: the same controller runs the KFP-shaped workflow; drivers are tiny steps with
// no GPU, the executor gets the share on main.
func testKFPWorkflow(t *testing.T, c *cluster.Cluster) {
	startArgoOnce(t, c)
	wf := mustUnstructured(t, kfpPipeline)
	if err := c.Client().Create(t.Context(), wf); err != nil {
		t.Fatalf("creating the workflow: %v", err)
	}
	phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone)
	pods := podsOf(t, c, "team-a", map[string]string{argo.WorkflowLabel: wf.GetName()})
	if phase != "Succeeded" {
		t.Errorf("workflow ended %s; pods: %s", phase, describePods(pods))
	}
	if len(pods) != 3 {
		t.Fatalf("want 3 pods (2 drivers, 1 executor), got %s", describePods(pods))
	}
	executors := 0
	for i := range pods {
		p := &pods[i]
		want := expectPod{queue: "team-a", framework: "kubeflow-pipelines", kind: string(adapters.KindPipelineStep), minMember: 1,
			podGroup:      adapters.GroupName("wf", wf.GetName(), adapters.ShortHash(p.Annotations[argo.NodeIDAnnotation])),
			priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)}
		if p.Annotations["pipelines.kubeflow.org/runtime-role"] != "launcher" {
			checkLeftToKubeScheduler(t, p)
			continue
		}
		executors++
		want.gpuFraction, want.gpuContainer = "0.25", argo.MainContainer
		checkPod(t, p, want)
	}
	if executors != 1 {
		t.Errorf("want 1 executor pod, got %d", executors)
	}
}

// rayCluster has two worker groups; its gang is 1 head + 1 cpu + 2 gpu workers = 4. The operator
// runs without --batch-scheduler.
const rayClusterTwoGroups = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc-e2e
  namespace: team-ray
  labels: {fairway.dev/queue: ray-team}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers: [{name: ray-head, image: "rayproject/ray:2.46.0", resources: {limits: {cpu: "2", memory: 8Gi}}}]
  workerGroupSpecs:
  - groupName: cpu
    replicas: 1
    minReplicas: 1
    maxReplicas: 3
    rayStartParams: {}
    template:
      spec:
        containers: [{name: ray-worker, image: "rayproject/ray:2.46.0", resources: {limits: {cpu: "8", memory: 32Gi}}}]
  - groupName: gpu
    replicas: 2
    minReplicas: 0
    maxReplicas: 4
    rayStartParams: {}
    template:
      metadata:
        annotations: {fairway.dev/gpu-fraction: "0.5"}
      spec:
        containers: [{name: ray-worker, image: "rayproject/ray:2.46.0-gpu", resources: {limits: {cpu: "8", memory: 32Gi}}}]
`

// testKubeRay: the real KubeRay operator creates the cluster's pods with generateName; every pod
// carries the cluster's gang, its group as sub-group, and the GPU workers the share on the Ray
// container at index 0.
func testKubeRay(t *testing.T, c *cluster.Cluster) {
	if _, err := c.StartKubeRay(t.Context(), cluster.KubeRayOptions{}); err != nil {
		t.Fatalf("starting KubeRay: %v", err)
	}
	if err := c.Client().Create(t.Context(), mustUnstructured(t, rayClusterTwoGroups)); err != nil {
		t.Fatalf("creating the RayCluster: %v", err)
	}
	pods := waitPods(t, c, "team-ray", map[string]string{"ray.io/cluster": "rc-e2e"}, 4, 90*time.Second)
	if len(pods) != 4 {
		t.Fatalf("want 4 pods, got %s", describePods(pods))
	}
	for i := range pods {
		p := &pods[i]
		if p.GenerateName == "" {
			t.Errorf("pod %s was not made from generateName", p.Name)
		}
		group := p.Labels["ray.io/group"]
		want := expectPod{queue: "ray-team", framework: "ray", kind: string(adapters.KindRay), podGroup: "ray-rc-e2e",
			subGroup: group, minMember: 4, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)}
		if group == "gpu" {
			want.gpuFraction, want.gpuContainer = "0.5", p.Spec.Containers[0].Name
		}
		checkPod(t, p, want)
		// KubeRay makes a deleted worker again; a deleted head loses the cluster.
		wantRecreatable := strconv.FormatBool(p.Labels["ray.io/node-type"] == "worker")
		if got := p.Annotations[fairwayv1.RecreatableAnnotation]; got != wantRecreatable {
			t.Errorf("pod %s (%s): %s = %q, want %q", p.Name, p.Labels["ray.io/node-type"], fairwayv1.RecreatableAnnotation, got, wantRecreatable)
		}
	}
}

// retriedPipeline is a two-step Argo workflow: the first step's template retries errors (a
// deleted pod), the second has the default retry policy, OnFailure, which does not.
const retriedPipeline = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: retried-pipeline
  namespace: team-a
spec:
  entrypoint: pipeline
  podMetadata:
    annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 1s}
  templates:
  - name: pipeline
    steps:
    - - {name: train, template: train}
    - - {name: evaluate, template: evaluate}
  - name: train
    retryStrategy: {limit: "2", retryPolicy: OnError}
    container: {image: ghcr.io/example/train:1.4, command: [python, train.py], resources: {requests: {cpu: 100m}}}
  - name: evaluate
    retryStrategy: {limit: "2"}
    container: {image: ghcr.io/example/train:1.4, command: [python, eval.py], resources: {requests: {cpu: 100m}}}
`

// testArgoRecreatable: with the real workflow-controller, the webhook reads each step's retry
// strategy from the template Argo puts on the pod: the step that retries errors is recreatable,
// the one that retries failures only is not.
func testArgoRecreatable(t *testing.T, c *cluster.Cluster) {
	startArgoOnce(t, c)
	wf := mustUnstructured(t, retriedPipeline)
	if err := c.Client().Create(t.Context(), wf); err != nil {
		t.Fatalf("creating the workflow: %v", err)
	}
	phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone)
	pods := podsOf(t, c, "team-a", map[string]string{argo.WorkflowLabel: "retried-pipeline"})
	if phase != "Succeeded" || len(pods) != 2 {
		t.Fatalf("workflow ended %s; want 2 step pods, got %s", phase, describePods(pods))
	}
	for i := range pods {
		p := &pods[i]
		want := "false"
		if strings.Contains(p.Annotations["workflows.argoproj.io/node-name"], ".train") {
			want = "true"
		}
		if got := p.Annotations[fairwayv1.RecreatableAnnotation]; got != want {
			t.Errorf("pod %s (%s): %s = %q, want %q", p.Name, p.Annotations["workflows.argoproj.io/node-name"], fairwayv1.RecreatableAnnotation, got, want)
		}
	}
}

var argoStarted = map[*cluster.Cluster]bool{}

// startArgoOnce starts the workflow-controller for the first Argo subtest of a cluster.
func startArgoOnce(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if argoStarted[c] {
		return
	}
	if _, err := c.StartArgo(t.Context(), cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}
	argoStarted[c] = true
}

func workflowDone(u *unstructured.Unstructured) (string, bool) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return phase, phase == "Succeeded" || phase == "Failed" || phase == "Error"
}

// loadFixture reads an adapter fixture pod, by its path from the repository root.
func loadFixture(t *testing.T, path string) *corev1.Pod {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return adaptertest.LoadPod(t, filepath.Join(root, path))
}
