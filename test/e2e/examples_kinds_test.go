//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/airflow"
	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
	"github.com/fairway-sched/fairway/adapters/lws"
	"github.com/fairway-sched/fairway/adapters/mlflow"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleWorkloadKinds runs, on two nodes of four GPUs, the pods of the tools that have no
// controller in the test cluster, made as their controllers make them (test/examples plays the
// controllers from their sources; the cluster's StatefulSet and Job controllers make the pods):
//
//   - examples/kubeflow-notebooks: the notebook-controller's StatefulSet; its pod is an
//     interactive notebook, fairway-interactive and non-preemptible, with its half GPU on the
//     notebook's container;
//   - examples/airflow/kpo-pod.yaml: the KubernetesPodOperator's pod is a one-pod training gang
//     named after the task try, fairway-training, with its half GPU on base;
//   - examples/mlflow: the Job MLflow's Kubernetes backend makes from the template; its pod is a
//     training gang named after the run;
//   - a LeaderWorkerSet group of four (leader StatefulSet first, the worker StatefulSet once the
//     leader pod exists, as the LWS controller does under startupPolicy LeaderCreated): the
//     leader does not start alone; the four start as one gang of inference.
func TestExampleWorkloadKinds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "h100", Count: 2, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 4,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	c := startExample(t, []cluster.NodePool{gpu}, []client.Object{
		exampleQueue("alice", "kubeflow-user", "1"), exampleQueue("team-b", "team-b", "1"),
		exampleQueue("ml-research", "mlflow", "1"), exampleQueue("serving", "serving", "4"),
	}, stack.Options{})
	runningPod := func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
		var p corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return nil, err
		}
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			return nil, fmt.Errorf("%s is %s on %q: %s", name, p.Status.Phase, p.Spec.NodeName, reasonOf(&p))
		}
		return &p, nil
	}

	// Kubeflow notebook. Kubeflow's profile controller gives every profile namespace the
	// default-editor ServiceAccount notebooks run as; there is no profile controller here.
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default-editor", Namespace: "kubeflow-user"}})
	nb := exampleObject(t, "kubeflow-user", "kubeflow-notebooks", "notebook.yaml")
	sts, err := examples.NotebookStatefulSet(nb)
	if err != nil {
		t.Fatal(err)
	}
	sts.Spec.Template.Annotations[cluster.CompleteDelayAnnotation] = "1h"
	mustCreate(t, c, sts)
	var notebook *corev1.Pod
	eventually(t, 2*time.Minute, "the notebook's pod running", func(ctx context.Context) (bool, error) {
		notebook, err = runningPod(ctx, "kubeflow-user", "llm-dev-0")
		return err == nil, err
	})
	checkPod(t, notebook, expectPod{queue: "alice", framework: kubeflownotebook.Name, kind: string(fairwayv1.KindNotebook), podGroup: "nb-llm-dev", minMember: 1,
		priorityClass: fairwayv1.PriorityClassInteractive, priority: ptr.To[int32](fairwayv1.NonPreemptiblePriority),
		gpuFraction: "0.5", gpuContainer: "llm-dev"})
	if notebook.Labels[fairwayv1.PreemptibilityLabel] != string(fairwayv1.NonPreemptible) || !fairwayv1.IsInteractive(notebook) {
		t.Errorf("notebook: preemptibility %q, interactive %v; want non-preemptible and interactive (idle-GPU lending tracks it)",
			notebook.Labels[fairwayv1.PreemptibilityLabel], fairwayv1.IsInteractive(notebook))
	}

	// Airflow KubernetesPodOperator pod.
	kpo := exampleObject(t, "team-b", "airflow", "kpo-pod.yaml")
	if err := unstructuredSet(kpo, "1h", "metadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, kpo)
	var task *corev1.Pod
	eventually(t, 2*time.Minute, "the KPO pod running", func(ctx context.Context) (bool, error) {
		task, err = runningPod(ctx, "team-b", kpo.GetName())
		return err == nil, err
	})
	group := task.Annotations[fairwayv1.PodGroupAnnotation]
	checkPod(t, task, expectPod{queue: "team-b", framework: airflow.Name, kind: string(fairwayv1.KindTraining), podGroup: group, minMember: 1,
		priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50), gpuFraction: "0.5", gpuContainer: airflow.BaseContainer})
	if !strings.HasPrefix(group, "airflow-kpo-") || !strings.HasSuffix(group, "-train-try-1") {
		t.Errorf("KPO pod's gang %q, want airflow-kpo-...-train-try-1", group)
	}
	if task.Labels[fairwayv1.PreemptibilityLabel] != "" {
		t.Errorf("KPO pod: preemptibility label %q, want none (preemptible by its priority)", task.Labels[fairwayv1.PreemptibilityLabel])
	}
	for _, k := range []string{airflow.DagIDLabel, airflow.TaskIDLabel, airflow.RunIDLabel, airflow.TryNumberLabel, airflow.KPOLabel} {
		if task.Labels[k] != kpo.GetLabels()[k] {
			t.Errorf("KPO pod: Airflow's label %s = %q, want %q unchanged", k, task.Labels[k], kpo.GetLabels()[k])
		}
	}
	var pg fairwayv1.PodGroup
	eventually(t, time.Minute, "the KPO pod's PodGroup", func(ctx context.Context) (bool, error) {
		err := c.Client().Get(ctx, client.ObjectKey{Namespace: "team-b", Name: group}, &pg)
		return err == nil && pg.Spec.MinMember == 1, err
	})

	// MLflow project run.
	tpl := exampleObject(t, "mlflow", "mlflow", "kubernetes_job_template.yaml")
	job, err := examples.MLflowJob(tpl, "wine", "2026-08-01-10-00-00-123456", "registry.local/mlflow-wine@sha256:4b9f2c1d",
		[]string{"python", "train.py", "--alpha", "0.5"}, "7e1c2b9f3a4d4e5f8a6b0c1d2e3f4a5b", "3", "http://mlflow.mlflow:5000")
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Template.Annotations = map[string]string{cluster.CompleteDelayAnnotation: "1h"}
	mustCreate(t, c, job)
	eventually(t, 2*time.Minute, "the MLflow run's pod running", func(ctx context.Context) (bool, error) {
		pods := bound(podsIn(t, c, ctx, "mlflow", map[string]string{"batch.kubernetes.io/job-name": job.Name}))
		if len(pods) != 1 {
			return false, fmt.Errorf("%d pods bound", len(pods))
		}
		checkPod(t, &pods[0], expectPod{queue: "ml-research", framework: mlflow.Name, kind: string(fairwayv1.KindTraining),
			podGroup: "mlflow-7e1c2b9f3a4d4e5f8a6b0c1d2e3f4a5b", minMember: 1, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
		return true, nil
	})

	// A LeaderWorkerSet group of four one-GPU pods.
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{cluster.CompleteDelayAnnotation: "1h"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{{
			Name: "vllm", Image: "vllm/vllm-openai:v0.9.1", Command: []string{"sh", "-c", "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}},
		}}},
	}
	leader, workers := examples.LeaderWorkerSetGroup("vllm", "serving", 4, 0, tmpl)
	mustCreate(t, c, leader)
	eventually(t, time.Minute, "the leader pod, waiting for its group", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "serving", Name: "vllm-0"}, &p); err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == fairwayv1.SchedulerName && p.Spec.NodeName == "" && reasonOf(&p) != "", fmt.Errorf("node %q, reason %q", p.Spec.NodeName, reasonOf(&p))
	})
	time.Sleep(3 * time.Second) // GPUs are free: the leader must still not start alone
	var lp corev1.Pod
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "serving", Name: "vllm-0"}, &lp); err != nil || lp.Spec.NodeName != "" {
		t.Fatalf("the leader started without its workers (node %q, %v)", lp.Spec.NodeName, err)
	}
	t.Logf("leader alone waits: %s", reasonOf(&lp))
	mustCreate(t, c, workers)
	sel := map[string]string{lws.SetNameLabel: "vllm"}
	eventually(t, 2*time.Minute, "the group of four running", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, "serving", sel)
		return len(pods) == 4 && len(bound(pods)) == 4, fmt.Errorf("%d pods, %d bound", len(pods), len(bound(pods)))
	})
	for _, p := range podsIn(t, c, ctx, "serving", sel) {
		sub := lws.WorkerSubGroup
		if p.Name == "vllm-0" {
			sub = lws.LeaderSubGroup
		}
		checkPod(t, &p, expectPod{queue: "serving", framework: lws.Name, kind: string(fairwayv1.KindInference), podGroup: "lws-vllm-0", subGroup: sub,
			minMember: 4, priorityClass: fairwayv1.PriorityClassInference, priority: ptr.To[int32](125)})
	}
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "serving", Name: "lws-vllm-0"}, &pg); err != nil {
		t.Fatal(err)
	}
	if pg.Spec.MinMember != 4 || len(pg.Spec.SubGroups) != 2 || pg.Spec.SubGroups[0].Name != lws.LeaderSubGroup {
		t.Errorf("PodGroup lws-vllm-0: minMember %d, sub-groups %v; want 4 with the leader a sub-group", pg.Spec.MinMember, pg.Spec.SubGroups)
	}
}
