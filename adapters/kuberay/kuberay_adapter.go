// Package kuberay recognises the head and worker pods KubeRay (v1.4, v1.5) makes for a RayCluster,
// whether the cluster stands alone or belongs to a RayJob or RayService. One RayCluster is one
// gang: the head plus, for every worker group, its minimum replicas when the in-tree autoscaler
// is on, or its desired replicas otherwise, times numOfHosts. Each group is a sub-group.
//
// KubeRay creates its pods with generateName, so the gang is keyed by the ray.io/cluster label,
// never by the pod's name. No KubeRay --batch-scheduler flag is needed.
//
// Workers are recreatable: KubeRay makes a deleted worker again and Ray reschedules the tasks
// and actors it ran. The head is not: deleting it loses the cluster's state and the jobs on it,
// so fairway never moves a head (nor, with it, a cluster at its minimum).
//
// The cluster of a RayService runs Ray Serve: its pods are inference (fairway-inference,
// non-preemptible), not Ray batch work. KubeRay marks them with ray.io/originated-from-crd
// RayService (inherited from the cluster) and ray.io/serve; the RayCluster's owner says the same
// when the pod's labels do not.
package kuberay

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Labels KubeRay puts on every Ray pod (ray-operator/controllers/ray/utils/constant.go). KubeRay
// does not let templates override them.
const (
	ClusterLabel   = "ray.io/cluster"
	NodeTypeLabel  = "ray.io/node-type"
	GroupLabel     = "ray.io/group"
	IsRayNodeLabel = "ray.io/is-ray-node"
	// PriorityClassLabel on a RayCluster (or the RayJob it came from) names the gang's priority
	// class, as KubeRay's own batch-scheduler plugins read it.
	PriorityClassLabel = "ray.io/priority-class-name"
	// OriginatedFromCRDLabel names the kind (RayJob, RayService) that made the cluster.
	OriginatedFromCRDLabel = "ray.io/originated-from-crd"
	// ServeLabel marks the pods of a RayService's cluster that serve traffic ("true"/"false").
	ServeLabel = "ray.io/serve"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "ray"

// The kinds this adapter reads.
var (
	RayClusterGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}
	RayJobGVK     = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
	RayServiceGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayService"}
)

// Adapter recognises KubeRay pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
	_ adapters.GangShaper    = (*Adapter)(nil)
)

// HeadGroup is the ray.io/group of every head pod (KubeRay's utils.RayNodeHeadGroupLabelValue),
// and so the name of the head's sub-group.
const HeadGroup = "headgroup"

// New returns the KubeRay adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{RayClusterGVK, RayJobGVK, RayServiceGVK}
}

// Recognize implements adapters.Adapter: a Ray head or worker. KubeRay's GCS fault-tolerance
// cleanup pods (node type redis-cleanup) are ordinary Job pods and are not recognised.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	t := pod.Labels[NodeTypeLabel]
	return pod.Labels[ClusterLabel] != "" && (t == "head" || t == "worker")
}

// Describe implements adapters.Adapter. It reads the RayCluster for the gang size, the queue and
// the priority class; when the RayCluster cannot be read the pod still gets the cluster's gang,
// with min-member 1 and a warning.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	cluster := pod.Labels[ClusterLabel]
	if ref := adapters.ControllerOfKind(pod, RayClusterGVK.Group, RayClusterGVK.Kind); ref != nil {
		cluster = ref.Name
	}
	w := adapters.Workload{
		Kind:          adapters.KindRay,
		PodGroup:      adapters.GroupName("ray", cluster),
		MinMember:     1,
		SubGroup:      pod.Labels[GroupLabel],
		PriorityClass: fairwayv1.PriorityClassTraining,
		Recreatable:   adapters.Bool(pod.Labels[NodeTypeLabel] == "worker"),
	}
	if len(pod.Spec.Containers) > 0 {
		// KubeRay requires the Ray container at index 0 (utils.RayContainerIndex).
		w.GPUContainer = pod.Spec.Containers[0].Name
	}

	_, serve := pod.Labels[ServeLabel]
	if serve || pod.Labels[OriginatedFromCRDLabel] == RayServiceGVK.Kind {
		w.Kind, w.PriorityClass = adapters.KindInference, fairwayv1.PriorityClassInference
	}

	rc, err := objects.Get(ctx, RayClusterGVK, pod.Namespace, cluster)
	if err != nil {
		w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("RayCluster %s/%s", pod.Namespace, cluster), err))
		return w, nil
	}
	if ref := adapters.ControllerOf(rc); rc.GetLabels()[OriginatedFromCRDLabel] == RayServiceGVK.Kind || ref != nil && ref.Kind == RayServiceGVK.Kind {
		w.Kind, w.PriorityClass = adapters.KindInference, fairwayv1.PriorityClassInference
	}
	shape := Shape(rc)
	w.MinMember, w.SubGroups = shape.MinMember, shape.SubGroups
	w.QueueHint = adapters.QueueFromLabels(rc.GetLabels())
	if pc := rc.GetLabels()[PriorityClassLabel]; pc != "" {
		w.PriorityClass = pc
	}
	if w.QueueHint == "" {
		w.QueueHint = ownerQueue(ctx, rc, objects)
	}
	return w, nil
}

// ownerQueue reads the queue label of the RayJob or RayService that owns a RayCluster. KubeRay
// copies a RayJob's labels to its cluster, so this matters only for labels added later and for
// RayServices. Errors mean no hint.
func ownerQueue(ctx context.Context, rc *unstructured.Unstructured, objects adapters.ObjectReader) string {
	ref := adapters.ControllerOf(rc)
	if ref == nil {
		return ""
	}
	for _, gvk := range []schema.GroupVersionKind{RayJobGVK, RayServiceGVK} {
		if ref.Kind != gvk.Kind {
			continue
		}
		owner, err := objects.Get(ctx, gvk, rc.GetNamespace(), ref.Name)
		if err != nil {
			return ""
		}
		return adapters.QueueFromLabels(owner.GetLabels())
	}
	return ""
}

// MinMember is the gang size of a RayCluster, Shape(rc).MinMember.
func MinMember(rc *unstructured.Unstructured) int32 { return Shape(rc).MinMember }

// GangOwnerKinds implements adapters.GangShaper: the RayCluster sizes the gang (a RayJob's or
// RayService's cluster is a RayCluster too).
func (*Adapter) GangOwnerKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{RayClusterGVK}
}

// GangShapes implements adapters.GangShaper.
func (*Adapter) GangShapes(rc *unstructured.Unstructured) []adapters.GangShape {
	return []adapters.GangShape{Shape(rc)}
}

// Shape is the gang of a RayCluster: one head plus, for every worker group that is not
// suspended, numOfHosts times its minReplicas when the in-tree autoscaler is on, or times its
// desired replicas (replicas clamped to [minReplicas, maxReplicas]) otherwise. The defaults are
// KubeRay's: replicas 0, minReplicas 0, maxReplicas 2^31-1, numOfHosts 1.
//
// The head is a sub-group of minimum 1, so that the gang never starts with workers and no head
// (they would wait for a GCS that is not there); every worker group with a minimum above 0 is a
// sub-group of that minimum, so that one group's pods cannot stand in for another's (a GPU group
// for a CPU one). Workers above the minimum, those the autoscaler adds, join the running gang as
// capacity allows. The sub-groups are in KubeRay's order: the head, then workerGroupSpecs.
func Shape(rc *unstructured.Unstructured) adapters.GangShape {
	shape := adapters.GangShape{
		PodGroup:  adapters.GroupName("ray", rc.GetName()),
		SubGroups: []fairwayv1.SubGroup{{Name: HeadGroup, MinMember: 1}},
	}
	spec, _, _ := unstructured.NestedMap(rc.Object, "spec")
	autoscaling := adapters.BoolField(spec, "enableInTreeAutoscaling")
	groups, _, _ := unstructured.NestedSlice(spec, "workerGroupSpecs")
	total := int64(1)
	for _, g := range groups {
		group, ok := g.(map[string]any)
		if !ok || adapters.BoolField(group, "suspend") {
			continue
		}
		lo := max(adapters.Int64Field(group, 0, "minReplicas"), 0)
		hi := adapters.Int64Field(group, math.MaxInt32, "maxReplicas")
		replicas := lo
		if !autoscaling {
			replicas = max(lo, min(adapters.Int64Field(group, 0, "replicas"), hi))
		}
		hosts := max(adapters.Int64Field(group, 1, "numOfHosts"), 1)
		n := min(min(replicas, adapters.MaxMinMember)*min(hosts, adapters.MaxMinMember), adapters.MaxMinMember-total)
		name, _, _ := unstructured.NestedString(group, "groupName")
		if n > 0 && name != "" && len(shape.SubGroups) < maxSubGroups {
			shape.SubGroups = append(shape.SubGroups, fairwayv1.SubGroup{Name: name, MinMember: int32(n)})
		}
		total += n
		if total >= adapters.MaxMinMember {
			break
		}
	}
	shape.MinMember = adapters.Clamp32(total, 1, adapters.MaxMinMember)
	return shape
}

// maxSubGroups is the PodGroup API's bound on spec.subGroups; groups past it (KubeRay allows
// more) count towards MinMember only.
const maxSubGroups = 32
