// Package knative recognises the pods of Knative Serving (v1.14 to v1.19) revisions: every Knative
// Service, Configuration or bare Revision runs its revision as a Deployment whose pods carry the
// serving.knative.dev/revision label and, appended last, Knative's queue-proxy sidecar. Knative
// writes the serving container's name to the pod's kubectl.kubernetes.io/default-container
// annotation (pkg/reconciler/revision/resources/deploy.go), which is where the GPU share goes.
//
// A revision replica is inference, a gang of its own: the KPA adds and removes replicas one at a
// time with the request load, down to zero. KServe's Serverless predictors are Knative revisions
// too; the kserve adapter, earlier in the registry, claims those.
package knative

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Labels, annotations and containers Knative Serving puts on revision pods
// (pkg/apis/serving/register.go, pkg/reconciler/revision/resources).
const (
	RevisionLabel = "serving.knative.dev/revision"
	ServiceLabel  = "serving.knative.dev/service"
	// DefaultContainerAnnotation names the serving container of a revision pod.
	DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
	// QueueProxyContainer is the sidecar Knative injects; it never gets the GPU.
	QueueProxyContainer = "queue-proxy"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "knative"

// Adapter recognises Knative revision pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the Knative adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: a pod of a Knative revision, which Knative labels with
// the revision's name and gives the queue-proxy sidecar. The label alone could be copied onto
// any pod; the sidecar is Knative's own.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	return pod.Labels[RevisionLabel] != "" && adapters.HasContainer(pod, QueueProxyContainer)
}

// Describe implements adapters.Adapter: inference, a gang of its own (named by the webhook), the
// GPU share on the serving container.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	w := adapters.Workload{Kind: adapters.KindInference, MinMember: 1}
	if c := pod.Annotations[DefaultContainerAnnotation]; c != "" && c != QueueProxyContainer && adapters.HasContainer(pod, c) {
		w.GPUContainer = c
		return w, nil
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != QueueProxyContainer {
			w.GPUContainer = c.Name
			break
		}
	}
	return w, nil
}
