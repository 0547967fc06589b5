// Package argo recognises the step pods of Argo Workflows. Argo has no gangs: every step pod is a
// gang of its own, preemptible, with the GPU share on the user's `main` container (Argo puts its
// `wait` sidecar first, at index 0). Argo's agent and artifact-GC pods are left alone.
//
// The labels Argo's controller selects its pods by (SelectorLabels) are never touched by fairway.
package argo

import (
	"context"

	corev1 "k8s.io/api/core/v1"

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

	// MainContainer runs the user's template; WaitContainer is Argo's sidecar at index 0.
	MainContainer = "main"
	WaitContainer = "wait"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "argo"

// SelectorLabels returns the labels Argo's controller finds its pods by. Changing one would make
// the controller lose the pod, so the webhook must never patch them.
func SelectorLabels() []string {
	return []string{WorkflowLabel, CompletedLabel, InstanceIDLabel}
}

// Adapter recognises Argo workflow step pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the Argo adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: every pod the workflow-controller makes carries the
// workflow label.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	_, ok := pod.Labels[WorkflowLabel]
	return ok
}

// Describe implements adapters.Adapter.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	if component, ok := pod.Labels[ComponentLabel]; ok {
		return adapters.Workload{Ignore: "Argo " + component + " pod"}, nil
	}
	return adapters.Workload{
		Kind:          adapters.KindWorkflowStep,
		PodGroup:      StepGroup(pod),
		MinMember:     1,
		PriorityClass: fairwayv1.PriorityClassTraining,
		GPUContainer:  GPUContainer(pod),
	}, nil
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
