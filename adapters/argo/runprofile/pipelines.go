package runprofile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/api/pipelinerun"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Pipelines is Argo's side of the scheduler's pipeline admission (the runtime's
// pipelines.Engine, which cmd/ wires): the Workflow kind, a run's profile, and which run and
// step a pod belongs to. It lives here, with the profile, so that the scheduler knows Argo and
// KFP only through that interface.
type Pipelines struct{}

// RunKind is Argo's Workflow.
func (Pipelines) RunKind() schema.GroupVersionKind { return argo.WorkflowGVK }

// Profile computes the run's profile with the default Options.
func (Pipelines) Profile(wf *unstructured.Unstructured) (*pipelinerun.Profile, error) {
	return Compute(wf, Options{})
}

// RunOf is the Workflow that made pod (Argo's workflow label).
func (Pipelines) RunOf(pod *corev1.Pod) string { return pod.Labels[argo.WorkflowLabel] }

// NodeOf is pod's node name in its Workflow's status (Argo's node-name annotation).
func (Pipelines) NodeOf(pod *corev1.Pod) string { return pod.Annotations[argo.NodeNameAnnotation] }

// StepKind is KindPipelineStep for a pod of a KFP run, else KindWorkflowStep.
func (Pipelines) StepKind(pod *corev1.Pod) v1alpha1.WorkloadKind {
	if kfp.New().Recognize(pod) {
		return v1alpha1.KindPipelineStep
	}
	return v1alpha1.KindWorkflowStep
}
