package pipelines

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/api/pipelinerun"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Engine is what pipeline admission needs to know of the pipeline engine whose runs it holds:
// Argo Workflows, whose runs Kubeflow Pipelines v2 runs also are. The Argo adapter implements it
// (runprofile.Pipelines) and cmd/ wires it through Options, so that the scheduler imports no
// adapter and the layers stay apart: the runtime sees frameworks only as interfaces. Without an
// Engine no run is watched, held or staged.
type Engine interface {
	// RunKind is the kind of a run object (argoproj.io/v1alpha1 Workflow).
	RunKind() schema.GroupVersionKind
	// Profile is what a run asks of the cluster over its life, computed from its spec alone.
	Profile(run *unstructured.Unstructured) (*pipelinerun.Profile, error)
	// RunOf names the run that made pod in pod's namespace, "" when no run made it.
	RunOf(pod *corev1.Pod) string
	// NodeOf is pod's node name in its run's status, "" when unknown.
	NodeOf(pod *corev1.Pod) string
	// StepKind is the workload kind a stand-in for one of a run's pods gets:
	// v1alpha1.KindPipelineStep for a Kubeflow Pipelines step, else v1alpha1.KindWorkflowStep.
	StepKind(pod *corev1.Pod) v1alpha1.WorkloadKind
}
