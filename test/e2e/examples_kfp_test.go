//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleKubeflowPipelines runs examples/kubeflow-pipelines/workflow.yaml, the Argo Workflow
// KFP submits for a run of pipeline.py, through the real workflow-controller with fairway. The
// test plays KFP's driver, which needs KFP's API server and ML Metadata: for every driver pod it
// reports the outputs the real driver would write (examples.KFPDriverOutputs), as Argo's wait
// container would. So the executors get exactly the pod-spec patch KFP makes: train's GPU comes
// from the driver, as on a real cluster. Then: every executor is a pipeline step of the
// namespace's queue; drivers are left to kube-scheduler, with no GPU; train gets a whole GPU on
// main; evaluate gets half a GPU, with the UUID of the GPU the kubelet gave its reservation; the
// run Succeeds. Last, a workflow of the KFP compiler's own golden outputs
// (mutating-webhook/testdata/realworld/kfp/nvidia_gpu_scheduling_check.yaml) runs the same way:
// its executor gets its GPU on main from fairway, its drivers run on kube-scheduler.
func TestExampleKubeflowPipelines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "kubeflow-user-alice" // a KFP profile namespace
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 2,
		GPUMemoryMiB: 81559, CPU: "64", Memory: "512Gi"}
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, KubeScheduler: true},
		[]client.Object{exampleQueue("vision", ns, "2")}, stack.Options{})
	// KFP runs its pods as pipeline-runner (multi-user installs: default-editor, made by the
	// profile controller).
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-runner", Namespace: ns}})
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}

	wf := exampleObject(t, ns, "kubeflow-pipelines", "workflow.yaml")
	kwokCompletes(t, wf, time.Second, nil)
	mustCreate(t, c, wf)
	t.Logf("run %s submitted", wf.GetName())
	sel := map[string]string{argo.WorkflowLabel: wf.GetName()}

	driverCtx, stopDriver := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { playKFPDriver(driverCtx, t, c, ns, sel) })
	defer wg.Wait()
	defer stopDriver()
	phase := waitUnstructured(t, c, wf, 90*time.Second, workflowDone)

	pods := podsIn(t, c, ctx, ns, sel)
	if phase != "Succeeded" {
		t.Fatalf("run ended %s; pods: %s; nodes: %s", phase, describePods(pods), workflowNodes(wf))
	}
	// 1 root DAG driver + 3 tasks x (driver + executor).
	if len(pods) != 7 {
		t.Fatalf("want 7 pods, got %s", describePods(pods))
	}
	executors := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		nodeName := p.Annotations[kfp.NodeNameAnnotation]
		role := kfp.PodRole(p)
		want := expectPod{queue: "vision", framework: kfp.Name, kind: string(adapters.KindPipelineStep), minMember: 1,
			podGroup:      adapters.GroupName("wf", wf.GetName(), adapters.ShortHash(p.Annotations[argo.NodeIDAnnotation])),
			priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)}
		if role == kfp.RoleExecutor {
			task := strings.TrimSuffix(strings.TrimPrefix(nodeName, wf.GetName()+".root."), ".executor")
			executors[task] = p
			if task == "evaluate" {
				want.gpuFraction, want.gpuContainer = "0.5", argo.MainContainer
			}
		} else {
			if gpusOf(p) != 0 || p.Annotations[fairwayv1.GPUFractionAnnotation] != "" {
				t.Errorf("driver %s (%s) has a GPU", p.Name, nodeName)
			}
			checkLeftToKubeScheduler(t, p)
		}
		if p.Labels[kfp.RunIDLabel] == "" || p.Labels[kfp.V2ComponentKey] != "true" {
			t.Errorf("pod %s lost KFP's labels: %v", p.Name, p.Labels)
		}
		if role == kfp.RoleExecutor {
			checkPod(t, p, want)
		}
	}
	if len(executors) != 3 || executors["preprocess"] == nil || executors["train"] == nil || executors["evaluate"] == nil {
		t.Fatalf("executors: %v", executors)
	}
	if n := gpusOf(executors["preprocess"]); n != 0 {
		t.Errorf("preprocess has %d GPUs", n)
	}
	train := executors["train"]
	var main *corev1.Container
	for i := range train.Spec.Containers {
		if train.Spec.Containers[i].Name == argo.MainContainer {
			main = &train.Spec.Containers[i]
		}
	}
	if q := main.Resources.Limits[fairwayv1.ResourceGPU]; q.Value() != 1 || main.Image != "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime" {
		t.Errorf("train's main: %s GPUs, image %s (from the driver's pod-spec patch)", q.String(), main.Image)
	}
	eval := executors["evaluate"]
	uuid := eval.Annotations[fairwayv1.GPUUUIDAnnotation]
	if uuid == "" {
		t.Errorf("evaluate %s has no GPU UUID", eval.Name)
	}
	if err := shareTicketOnly(eval); err != nil {
		t.Errorf("evaluate: %v", err)
	}
	t.Logf("run %s Succeeded: train on %s with 1 GPU, evaluate on half of GPU %s", wf.GetName(), train.Spec.NodeName, uuid)
	stopDriver()
	wg.Wait()

	t.Run("CompilerGolden", func(t *testing.T) { testKFPCompilerGolden(t, c, ns) })
}

// testKFPCompilerGolden runs the KFP compiler's nvidia_gpu_scheduling_check workflow: one task
// whose component asks for nvidia.com/gpu 1 (and tolerates the GPU taint).
func testKFPCompilerGolden(t *testing.T, c *cluster.Cluster, ns string) {
	ctx := t.Context()
	wf := loadUnstructured(t, "mutating-webhook/testdata/realworld/kfp/nvidia_gpu_scheduling_check.yaml")
	wf.SetNamespace(ns)
	kwokCompletes(t, wf, time.Second, nil)
	mustCreate(t, c, wf)
	sel := map[string]string{argo.WorkflowLabel: wf.GetName()}
	driverCtx, stopDriver := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { playKFPDriver(driverCtx, t, c, ns, sel) })
	defer wg.Wait()
	defer stopDriver()
	phase := waitUnstructured(t, c, wf, 90*time.Second, workflowDone)
	pods := podsIn(t, c, ctx, ns, sel)
	if phase != "Succeeded" {
		t.Fatalf("run ended %s; pods: %s; nodes: %s", phase, describePods(pods), workflowNodes(wf))
	}
	executors := 0
	for i := range pods {
		p := &pods[i]
		if kfp.PodRole(p) != kfp.RoleExecutor {
			checkLeftToKubeScheduler(t, p)
			continue
		}
		executors++
		checkPod(t, p, expectPod{queue: "vision", framework: kfp.Name, kind: string(adapters.KindPipelineStep), minMember: 1,
			podGroup:      adapters.GroupName("wf", wf.GetName(), adapters.ShortHash(p.Annotations[argo.NodeIDAnnotation])),
			priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
		for _, ctr := range p.Spec.Containers {
			q := ctr.Resources.Limits[fairwayv1.ResourceGPU]
			if (ctr.Name == argo.MainContainer) != (q.Value() == 1) {
				t.Errorf("executor %s: container %s has %s GPUs; want 1 on main only", p.Name, ctr.Name, q.String())
			}
		}
	}
	if executors != 1 || len(pods) != 3 {
		t.Errorf("want 1 executor among 3 pods (root DAG driver, driver, executor): %s", describePods(pods))
	}
	t.Logf("compiler golden %s Succeeded: its executor's GPU on main, %d drivers on kube-scheduler", wf.GetName(), len(pods)-executors)
}

// playKFPDriver reports, for every driver pod of the run, the outputs KFP's driver would write,
// until ctx ends.
func playKFPDriver(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, sel map[string]string) {
	done := map[string]bool{}
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.Client().List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			return false, nil
		}
		for i := range list.Items {
			p := &list.Items[i]
			if done[p.Name] {
				continue
			}
			outputs, ok, err := examples.KFPDriverOutputs(p)
			if err != nil {
				t.Errorf("playing the driver of %s: %v", p.Name, err)
			}
			if !ok || err != nil {
				done[p.Name] = true
				continue
			}
			if err := c.Client().Create(ctx, examples.ArgoTaskResult(p, outputs)); err != nil && !apierrors.IsAlreadyExists(err) {
				if ctx.Err() == nil {
					t.Errorf("reporting the outputs of driver %s: %v", p.Name, err)
				}
				continue
			}
			done[p.Name] = true
		}
		return false, nil
	})
}
