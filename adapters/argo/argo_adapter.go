// Package argo recognises the step pods of Argo Workflows. Argo has no gangs: every step pod is a
// gang of its own, preemptible, with the GPU share on the user's `main` container (Argo puts its
// `wait` sidecar first, at index 0). Argo's agent and artifact-GC pods are left alone.
//
// The labels Argo's controller selects its pods by (SelectorLabels) are never touched by fairway.
//
// A step pod is recreatable when Argo retries it after its pod is deleted: Argo marks a deleted
// step pod's node Error, not Failed, and retries it only under a retryStrategy whose retryPolicy
// is Always or OnError, with retries left (see Retries).
package argo

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Keys and names Argo's workflow-controller (v3.6, v3.7) puts on step pods.
const (
	WorkflowLabel    = "workflows.argoproj.io/workflow"
	CompletedLabel   = "workflows.argoproj.io/completed"
	InstanceIDLabel  = "workflows.argoproj.io/controller-instanceid"
	ComponentLabel   = "workflows.argoproj.io/component"
	NodeIDAnnotation = "workflows.argoproj.io/node-id"
	// NodeNameAnnotation is the pod's node name in the Workflow's status (see
	// fairwayv1.ArgoNodeNameAnnotation, its one owner: the scheduler reads it too).
	NodeNameAnnotation = fairwayv1.ArgoNodeNameAnnotation

	// MainContainer runs the user's template; WaitContainer is Argo's sidecar at index 0.
	MainContainer = "main"
	WaitContainer = "wait"

	// TemplateEnv holds, on the init and wait containers, the JSON of the template the pod runs,
	// its parameters resolved (Argo's common.EnvVarTemplate; its executor reads it back).
	TemplateEnv = "ARGO_TEMPLATE"
)

// WorkflowGVK is the kind whose workflow-wide retryStrategy a step without one of its own uses.
var WorkflowGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}

// Name is the framework name on the pods this adapter recognises.
const Name = "argo"

// SelectorLabels returns the labels Argo's controller finds its pods by. Changing one would make
// the controller lose the pod, so the webhook must never patch them.
func SelectorLabels() []string {
	return []string{WorkflowLabel, CompletedLabel, InstanceIDLabel}
}

// Adapter recognises Argo workflow step pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
)

// New returns the Argo adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{WorkflowGVK}
}

// Recognize implements adapters.Adapter: every pod the workflow-controller makes carries the
// workflow label.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	_, ok := pod.Labels[WorkflowLabel]
	return ok
}

// Describe implements adapters.Adapter.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	if component, ok := pod.Labels[ComponentLabel]; ok {
		return adapters.Workload{Ignore: "Argo " + component + " pod"}, nil
	}
	w := adapters.Workload{
		Kind:          adapters.KindWorkflowStep,
		PodGroup:      StepGroup(pod),
		MinMember:     1,
		PriorityClass: fairwayv1.PriorityClassTraining,
		GPUContainer:  GPUContainer(pod),
	}
	retried, warning := RetriedAfterDeletion(ctx, pod, objects)
	w.Recreatable = adapters.Bool(retried)
	if warning != "" {
		w.Warnings = append(w.Warnings, warning)
	}
	return w, nil
}

// RetryStrategy is the part of Argo's retryStrategy that decides whether a deleted pod is retried.
type RetryStrategy struct {
	Limit       *intstr.IntOrString `json:"limit,omitempty"`
	RetryPolicy string              `json:"retryPolicy,omitempty"`
	Expression  string              `json:"expression,omitempty"`
}

// Retries reports whether Argo retries a step under strategy s when its pod is deleted (an
// eviction): the node then errors, which only retryPolicy Always and OnError retry; the default
// policy, OnFailure, retries failed main containers only, and "pod deleted" is not one of the
// errors OnTransientError retries. A limit of 0, or one still a template expression, allows no
// retry that can be counted on; an expression may refuse the retry, so one makes the answer no.
func Retries(s *RetryStrategy) bool {
	if s == nil || s.Expression != "" {
		return false
	}
	switch s.RetryPolicy {
	case "Always", "OnError":
	default:
		return false
	}
	if s.Limit == nil {
		return true // no limit
	}
	return s.Limit.IntValue() > 0 // 0 also for a string that is not a number
}

// RetriedAfterDeletion reports whether Argo retries the step pod if it is deleted: under the
// retryStrategy of the template the pod runs (TemplateEnv), or when that has none, the
// Workflow's spec.retryStrategy. The warning says what could not be read (the answer is then no).
func RetriedAfterDeletion(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (bool, string) {
	var tmpl struct {
		RetryStrategy *RetryStrategy `json:"retryStrategy,omitempty"`
	}
	if raw := templateJSON(pod); raw != "" {
		if err := json.Unmarshal([]byte(raw), &tmpl); err != nil {
			return false, fmt.Sprintf("fairway: the step's %s is not a template (%v); taken for a step Argo does not retry if its pod is deleted", TemplateEnv, err)
		}
		if tmpl.RetryStrategy != nil {
			return Retries(tmpl.RetryStrategy), ""
		}
	}
	name := pod.Labels[WorkflowLabel]
	wf, err := objects.Get(ctx, WorkflowGVK, pod.Namespace, name)
	if err != nil {
		return false, fmt.Sprintf("fairway: cannot read Workflow %s/%s (%s); the step is taken for one Argo does not retry if its pod is deleted, so fairway will not move it to make room",
			pod.Namespace, name, adapters.ReadFailure(err))
	}
	spec, ok := wf.Object["spec"].(map[string]any)
	if !ok {
		return false, ""
	}
	raw, err := json.Marshal(spec["retryStrategy"])
	if err != nil {
		return false, ""
	}
	var s *RetryStrategy
	if json.Unmarshal(raw, &s) != nil {
		return false, ""
	}
	return Retries(s), ""
}

// templateJSON is the template the controller put on the pod's init or wait container.
func templateJSON(pod *corev1.Pod) string {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, e := range cs[i].Env {
				if e.Name == TemplateEnv && e.Value != "" {
					return e.Value
				}
			}
		}
	}
	return ""
}

// StepGroup is the gang of one Argo step: "wf-<workflow>-<hash of the node ID>". The node ID is
// unique per step and per retry, so a retried step is a new gang. Step pods always have a name,
// which stands in for a missing node ID.
func StepGroup(pod *corev1.Pod) string {
	node := pod.Annotations[NodeIDAnnotation]
	if node == "" {
		node = pod.Name
	}
	return adapters.GroupName("wf", pod.Labels[WorkflowLabel], adapters.ShortHash(node))
}

// GPUContainer is the container of a step pod that gets a GPU share: `main`, or for container-set
// templates (which name their containers) the first container that is not Argo's `wait`.
func GPUContainer(pod *corev1.Pod) string {
	if adapters.HasContainer(pod, MainContainer) {
		return MainContainer
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != WaitContainer {
			return c.Name
		}
	}
	return ""
}
