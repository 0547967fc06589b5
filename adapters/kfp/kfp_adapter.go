// Package kfp recognises the pods of Kubeflow Pipelines v2 runs, which KFP compiles into Argo
// workflows. For every task KFP runs a driver pod and an executor pod; only the executor runs the
// user's code and may get a GPU share (on `main`). Drivers, DAG drivers and importers are tiny
// system pods that never get a GPU; fairway leaves them to kube-scheduler.
//
// KFP pods are also Argo pods, so this adapter must come before the Argo adapter in the registry.
//
// Whether a step comes back after an eviction is Argo's rule (argo.RetriedAfterDeletion). KFP
// compiles a task's retry policy into a retryStrategy without a retryPolicy, that is Argo's
// OnFailure, which does not retry a deleted pod: KFP steps are moved only when the workflow says
// OnError or Always (for example through a workflow-wide retryStrategy).
package kfp

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/argo"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Keys KFP 2.x puts on the pods of a run (backend/src/v2/compiler/argocompiler,
// backend/src/apiserver/template/v2_template.go).
const (
	// V2ComponentKey is both a label and an annotation (spec.podMetadata of every KFP workflow).
	V2ComponentKey = "pipelines.kubeflow.org/v2_component"
	// RunIDLabel carries the run's UUID.
	RunIDLabel = "pipeline/runid"
	// RuntimeRoleAnnotation is "driver" or "launcher", from KFP 2.17 on.
	RuntimeRoleAnnotation = "pipelines.kubeflow.org/runtime-role"
	// NodeNameAnnotation is Argo's node name: executors end in ".executor".
	NodeNameAnnotation = "workflows.argoproj.io/node-name"
	// LauncherInitContainer copies the launcher binary into executor and importer pods.
	LauncherInitContainer = "kfp-launcher"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "kubeflow-pipelines"

// Role is what a KFP pod does in its run.
type Role string

// The roles of KFP pods.
const (
	RoleExecutor Role = "executor"
	RoleDriver   Role = "driver"
	RoleImporter Role = "importer"
)

// Adapter recognises Kubeflow Pipelines v2 pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the Kubeflow Pipelines adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: an Argo pod marked as a KFP v2 component.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	if _, ok := pod.Labels[argo.WorkflowLabel]; !ok {
		return false
	}
	return pod.Labels[V2ComponentKey] == "true" || pod.Annotations[V2ComponentKey] == "true"
}

// Describe implements adapters.Adapter. Every executor is a gang of its own (an Argo step).
// Drivers and importers are left alone (Workload.Ignore): they are short control pods of a few
// hundred millicores that never hold a GPU, and every executor waits for its driver, so queueing
// them behind GPU quota or preempting them would stall the run for nothing; kube-scheduler places
// them at once, and they count against no queue.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	if component, ok := pod.Labels[argo.ComponentLabel]; ok {
		return adapters.Workload{Ignore: "Argo " + component + " pod"}, nil
	}
	role := PodRole(pod)
	if role != RoleExecutor {
		return adapters.Workload{Ignore: "Kubeflow Pipelines " + string(role) + " pod"}, nil
	}
	w := adapters.Workload{
		Kind:          adapters.KindPipelineStep,
		PodGroup:      argo.StepGroup(pod),
		MinMember:     1,
		PriorityClass: fairwayv1.PriorityClassTraining,
	}
	retried, warning := argo.RetriedAfterDeletion(ctx, pod, objects)
	w.Recreatable = adapters.Bool(retried)
	if warning != "" {
		w.Warnings = append(w.Warnings, warning)
	}
	w.GPUContainer = argo.GPUContainer(pod)
	return w, nil
}

// PodRole tells executors from drivers and importers: by the runtime-role annotation (KFP 2.17
// and later), else by the template name in the pod name, the Argo node name, the launcher init
// container and the driver's command. A pod that matches none of them is taken for an executor,
// because only executors carry user-requested metadata.
func PodRole(pod *corev1.Pod) Role {
	name := pod.Name
	switch {
	case strings.Contains(name, "-system-importer-") || isImporterCommand(pod):
		return RoleImporter
	case pod.Annotations[RuntimeRoleAnnotation] == "driver",
		strings.Contains(name, "-system-container-driver-"),
		strings.Contains(name, "-system-dag-driver-"),
		strings.HasSuffix(pod.Annotations[NodeNameAnnotation], "-driver"),
		isDriverCommand(pod):
		return RoleDriver
	}
	return RoleExecutor
}

// isDriverCommand: the driver's main container runs `driver --type CONTAINER|ROOT_DAG|DAG ...`
// from the kfp-driver image.
func isDriverCommand(pod *corev1.Pod) bool {
	c := mainContainer(pod)
	return c != nil && (strings.Contains(c.Image, "kfp-driver") || (len(c.Command) > 0 && c.Command[0] == "driver"))
}

// mainContainer is the pod's Argo main container, nil when it has none.
func mainContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == argo.MainContainer {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// isImporterCommand: the importer's main container runs the launcher with --executor_type
// importer.
func isImporterCommand(pod *corev1.Pod) bool {
	c := mainContainer(pod)
	if c == nil {
		return false
	}
	args := append(slices.Clone(c.Command), c.Args...)
	for i, a := range args {
		if a == "--executor_type=importer" || (a == "--executor_type" && i+1 < len(args) && args[i+1] == "importer") {
			return true
		}
	}
	return false
}
