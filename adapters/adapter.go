package adapters

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Adapter is the required interface of a framework integration. The webhook asks the adapters of
// the registry, in order, whether they recognise a pod; the first that does describes the pod's
// workload, and no other adapter sees the pod. A framework whose pods are also pods of another
// framework (Kubeflow Pipelines runs on Argo) must therefore come first in the registry.
//
// Implementations must be safe for concurrent use: one adapter value serves every admission
// request.
type Adapter interface {
	// Name is the framework's name, written to the pod's fairway.dev/framework label (for example
	// "argo"). It is constant and a valid label value.
	Name() string

	// Recognize reports whether the framework made the pod. It runs for every admitted pod, so it
	// must look only at the pod itself (labels, annotations, owner references, containers) and
	// never call the API server.
	Recognize(pod *corev1.Pod) bool

	// Describe tells the webhook which workload a recognised pod belongs to: its kind, its gang,
	// the default priority and the container that gets a GPU share. It may read framework objects
	// (the pod's owner and its ancestors) through objects, which serves them from an informer
	// cache. When a framework object cannot be read (its CRD is not installed, it is not in the
	// cache yet) Describe must still answer, with the pod as a gang of its own and a warning in
	// Workload.Warnings, rather than fail admission. An error is returned only for input the user
	// must fix, and the webhook denies the pod with the error's message.
	Describe(ctx context.Context, pod *corev1.Pod, objects ObjectReader) (Workload, error)
}

// ObjectWatcher is an optional interface for adapters that read framework objects in Describe.
// The webhook starts an informer for each kind it returns when the kind's CRD is installed, so
// that the first pod of a workload does not wait for a cache to fill.
type ObjectWatcher interface {
	// WatchedKinds lists the kinds Describe may pass to ObjectReader.Get.
	WatchedKinds() []schema.GroupVersionKind
}

// GangShaper is an optional interface for adapters whose gangs are sized by a framework object
// that changes while its pods run: a RayCluster scaled by its user or by the Ray autoscaler, an
// elastic PyTorchJob, a JobSet. The adapter's Describe reports the shape at admission (in
// Workload.MinMember and Workload.SubGroups); the scheduler watches the kinds GangOwnerKinds
// lists, when their CRDs are installed, and keeps the minMember and subGroups of the PodGroups
// it created true to GangShapes of the object as it changes. PodGroups users write are theirs
// and are never updated.
type GangShaper interface {
	// GangOwnerKinds lists the kinds whose objects GangShapes reads.
	GangOwnerKinds() []schema.GroupVersionKind
	// GangShapes returns the gangs obj makes (one for most kinds; one per replicated job for a
	// JobSet started in order) with their size. Like Recognize it must look only at obj: it runs
	// in the scheduler for every change of every such object.
	GangShapes(obj *unstructured.Unstructured) []GangShape
}

// GangShape is the size of one gang as its framework object asks for it.
type GangShape struct {
	// PodGroup is the gang's name, as Describe writes it on the gang's pods.
	PodGroup string
	// MinMember is how many pods must be placed together; at least 1, at least the sum of the
	// sub-groups' minimums.
	MinMember int32
	// SubGroups are the gang's parts with their own minimum (at least 1 each; a part whose
	// minimum would be 0 is left out), named as the pods' Workload.SubGroup. Their topology
	// constraints are unset.
	SubGroups []fairwayv1.SubGroup
}

// ShapeOf returns the shape named podGroup among shapes, or false.
func ShapeOf(shapes []GangShape, podGroup string) (GangShape, bool) {
	for _, s := range shapes {
		if s.PodGroup == podGroup {
			return s, true
		}
	}
	return GangShape{}, false
}

// ObjectReader reads framework objects, as unstructured objects, so that fairway's go.mod does
// not depend on the Go modules of Argo, KubeRay or Kubeflow.
type ObjectReader interface {
	// Get returns the object of kind gvk named name in namespace. It returns an error satisfying
	// errors.Is(err, ErrKindNotInstalled) when the API server does not serve gvk, and one
	// satisfying apierrors.IsNotFound when the object does not exist.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
}

// ErrKindNotInstalled is returned by ObjectReader.Get for a kind whose CRD is not installed.
var ErrKindNotInstalled = errors.New("kind not served by the API server")

// WorkloadKind names the kind of work a pod does; it is written to the pod's
// fairway.dev/workload-kind annotation and decides the default priority. Queue policies are
// written per kind, so api/v1alpha1 owns the names.
type WorkloadKind = fairwayv1.WorkloadKind

// The workload kinds fairway knows (v1alpha1's).
const (
	KindPipelineStep = fairwayv1.KindPipelineStep
	KindWorkflowStep = fairwayv1.KindWorkflowStep
	KindRay          = fairwayv1.KindRay
	KindNotebook     = fairwayv1.KindNotebook
	KindTraining     = fairwayv1.KindTraining
	KindPod          = fairwayv1.KindPod
	KindInference    = fairwayv1.KindInference
)

// Workload is what an adapter says about the workload a pod belongs to. The webhook turns it into
// the pod's fairway labels and annotations.
type Workload struct {
	// Ignore, when not empty, says why fairway must leave the pod alone: it is a helper the
	// framework runs for itself (Argo's agent and artifact-GC pods). The webhook then changes
	// nothing, and the pod keeps its own scheduler.
	Ignore string

	// Kind is the kind of work.
	Kind WorkloadKind

	// PodGroup is the gang's name, the same for every pod of the gang and derived only from what
	// the pods carry at admission (many have no name yet). It must be a DNS-1123 label; use
	// GroupName to build one.
	PodGroup string
	// MinMember is how many pods of the gang must be placed together; at least 1.
	MinMember int32
	// SubGroup names the pod's part of the gang (a Ray worker group, a replica type), or is empty.
	SubGroup string
	// SubGroups are the gang's parts that have their own minimum (GangShape.SubGroups), the same
	// for every pod of the gang; the webhook writes them to fairway.dev/sub-groups.
	SubGroups []fairwayv1.SubGroup

	// PriorityClass is the priority class the pod gets when the user set none, or empty to leave
	// the cluster's default.
	PriorityClass string

	// GPUContainer is the name of the container that gets a fractional GPU, or empty for the first
	// container. A user's fairway.dev/gpu-container annotation wins over it.
	GPUContainer string
	// NoGPU marks helper pods that must never get a GPU share (Kubeflow's drivers): the webhook
	// drops GPU-share annotations they inherit from workflow-wide metadata.
	NoGPU bool

	// Recreatable says whether the framework makes the pod again, with no work lost, if it is
	// evicted (written to the pod's fairway.dev/recreatable); nil when the adapter cannot tell,
	// which leaves the owner-kind default of v1alpha1.PodRecreatable. Only pods that come back
	// are moved to defragment nodes.
	Recreatable *bool

	// QueueHint is the queue named on the framework object (for example a RayCluster's
	// fairway.dev/queue label), used when the pod itself names none.
	QueueHint string

	// Warnings are returned to the client that created the pod: what the adapter could not find
	// out and what it assumed instead.
	Warnings []string
}
