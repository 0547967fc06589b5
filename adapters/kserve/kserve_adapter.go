// Package kserve recognises the pods of KServe InferenceServices (v0.13 to v0.15): the
// predictor, transformer and explainer replicas, in both of KServe's deployment modes. In
// RawDeployment mode KServe makes a Deployment per component; in Serverless mode a Knative
// Service, whose revisions Knative runs as Deployments. Either way every pod carries the
// serving.kserve.io/inferenceservice and component labels (KServe's constants
// InferenceServicePodLabelKey and KServiceComponentLabel), set on the pod template before any
// pod exists, and runs the model in the container named kserve-container.
//
// A replica is inference, a gang of its own: replicas are independent, and the HPA (raw mode) or
// the KPA (Serverless) adds and removes them one at a time. The kind gives them fairway-inference
// and non-preemptible by default.
package kserve

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Labels and names KServe puts on the pods of an InferenceService (pkg/constants/constants.go).
const (
	// InferenceServiceLabel names the InferenceService a pod serves.
	InferenceServiceLabel = "serving.kserve.io/inferenceservice"
	// ComponentLabel is predictor, transformer or explainer.
	ComponentLabel = "component"
	// DeploymentModeAnnotation is RawDeployment, Serverless or ModelMesh.
	DeploymentModeAnnotation = "serving.kserve.io/deploymentMode"
	// ModelContainer is the container that runs the model server (InferenceServiceContainerName).
	ModelContainer = "kserve-container"
	// WorkerContainer runs a multi-node worker (WorkerContainerName).
	WorkerContainer = "worker-container"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "kserve"

// Adapter recognises KServe pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the KServe adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: a pod labelled with its InferenceService and a component.
// ModelMesh pods carry neither and are left to the other rules.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	return pod.Labels[InferenceServiceLabel] != "" && pod.Labels[ComponentLabel] != ""
}

// Describe implements adapters.Adapter. The pod is a gang of its own (the webhook names it: a
// replica has no name of its own at admission); the model server's container gets the GPU share.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	w := adapters.Workload{Kind: adapters.KindInference, MinMember: 1}
	for _, c := range []string{ModelContainer, WorkerContainer} {
		if adapters.HasContainer(pod, c) {
			w.GPUContainer = c
			break
		}
	}
	return w, nil
}
