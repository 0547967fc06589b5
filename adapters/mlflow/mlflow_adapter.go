// Package mlflow recognises the pods of MLflow Projects run on Kubernetes (`mlflow run
// --backend kubernetes`, MLflow 1.x to 3.x). MLflow fills the project's Job template
// (mlflow/projects/kubernetes.py, _get_kubernetes_job_definition): the Job is named
// <project>-<timestamp>, container 0 is renamed after the project and given the project's image,
// entry point and the run's environment (MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID,
// MLFLOW_TRACKING_URI, from mlflow/projects/utils.py get_run_env_vars). MLflow adds no labels,
// so the pod is known by its batch Job owner and the literal MLFLOW_RUN_ID and
// MLFLOW_EXPERIMENT_ID on container 0: a user adds nothing to the template for fairway to
// recognise it (the queue label and GPU requests in the template's pod metadata and resources are
// theirs to add, see examples/mlflow).
//
// A project run is training: a gang per run (the Job's pods, one at a time unless the template
// sets parallelism), fairway-training and preemptible by the kind, the GPU share on container 0.
// As for any Job, an evicted pod comes back without spending a retry only when the template's
// podFailurePolicy ignores DisruptionTarget (adapters.IgnoresDisruption).
package mlflow

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
)

// Environment variables MLflow gives a project run's container.
const (
	RunIDEnv        = "MLFLOW_RUN_ID"
	ExperimentIDEnv = "MLFLOW_EXPERIMENT_ID"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "mlflow"

// JobGVK is the kind of the object MLflow submits.
var JobGVK = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

// Adapter recognises MLflow project pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
)

// New returns the MLflow adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher: the Job's podFailurePolicy.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind { return []schema.GroupVersionKind{JobGVK} }

// Recognize implements adapters.Adapter: a Job's pod whose container 0 has the run's id and
// experiment as literal values.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 || adapters.ControllerOfKind(pod, JobGVK.Group, JobGVK.Kind) == nil {
		return false
	}
	return runEnv(&pod.Spec.Containers[0], RunIDEnv) != "" && runEnv(&pod.Spec.Containers[0], ExperimentIDEnv) != ""
}

func runEnv(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Describe implements adapters.Adapter: a training gang named after the MLflow run.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	c := &pod.Spec.Containers[0]
	w := adapters.Workload{
		Kind:         adapters.KindTraining,
		PodGroup:     adapters.GroupName("mlflow", runEnv(c, RunIDEnv)),
		MinMember:    1,
		GPUContainer: c.Name,
	}
	ref := adapters.ControllerOfKind(pod, JobGVK.Group, JobGVK.Kind)
	// A Job that cannot be read leaves the owner-kind default, which takes its pods for lost.
	if job, err := objects.Get(ctx, JobGVK, pod.Namespace, ref.Name); err == nil {
		spec, _ := job.Object["spec"].(map[string]any)
		w.Recreatable = adapters.Bool(adapters.IgnoresDisruption(spec))
		w.QueueHint = adapters.QueueFromLabels(job.GetLabels())
	}
	return w, nil
}
