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
//
// A multi-node predictor (spec.predictor.workerSpec: one model split over a Ray cluster, vLLM
// with pipeline parallelism) is one head pod (kserve-container) and RAY_NODE_COUNT-1 worker pods
// (worker-container) from two Deployments; KServe writes RAY_NODE_COUNT into both containers
// (components/predictor.go, multiNodeProcess). Such a predictor is useless in part, so it is one
// gang of RAY_NODE_COUNT pods with the head a sub-group of its own.
package kserve

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
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
	// RayNodeCountEnv is the pod count of a multi-node predictor (RayNodeCountEnvName).
	RayNodeCountEnv = "RAY_NODE_COUNT"
)

// Sub-groups of a multi-node predictor's gang.
const (
	HeadSubGroup   = "head"
	WorkerSubGroup = "worker"
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

// Describe implements adapters.Adapter. A replica is a gang of its own (the webhook names it: a
// replica has no name of its own at admission); the model server's container gets the GPU share.
// The pods of a multi-node predictor are one gang, named after the InferenceService and its
// component.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	w := adapters.Workload{Kind: adapters.KindInference, MinMember: 1}
	for _, c := range []string{ModelContainer, WorkerContainer} {
		if adapters.HasContainer(pod, c) {
			w.GPUContainer = c
			break
		}
	}
	nodes, err := rayNodeCount(pod, w.GPUContainer)
	if err != nil || nodes < 2 {
		return w, err
	}
	w.PodGroup = adapters.GroupName("kserve", pod.Labels[InferenceServiceLabel], pod.Labels[ComponentLabel])
	w.MinMember = nodes
	w.SubGroup = HeadSubGroup
	if w.GPUContainer == WorkerContainer {
		w.SubGroup = WorkerSubGroup
	}
	w.SubGroups = []fairwayv1.SubGroup{{Name: HeadSubGroup, MinMember: 1}, {Name: WorkerSubGroup, MinMember: nodes - 1}}
	return w, nil
}

// rayNodeCount reads RAY_NODE_COUNT from the model or worker container: 0 when absent (a
// single-node predictor), an error naming the variable when it is not a count.
func rayNodeCount(pod *corev1.Pod, container string) (int32, error) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name != RayNodeCountEnv || e.ValueFrom != nil {
				continue
			}
			n, err := strconv.ParseInt(e.Value, 10, 32)
			if err != nil || n < 1 || n > adapters.MaxMinMember {
				return 0, fmt.Errorf("container %s: env %s %q: must be the multi-node predictor's pod count, a whole number from 1 to %d (KServe writes it from workerSpec's parallelism)",
					container, RayNodeCountEnv, e.Value, adapters.MaxMinMember)
			}
			return int32(n), nil
		}
	}
	return 0, nil
}
