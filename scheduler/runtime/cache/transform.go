package cache

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// The transforms below run in the informers before objects are stored: they keep what the
// snapshot, the binder and the status writers read and drop the rest (managed fields, images,
// commands, environment, volumes other than claims, most of the status), so that the scheduler's
// memory grows with the number of pods by a few hundred bytes each rather than kilobytes.

// transform wraps f so that it also applies to the object inside a tombstone.
func transform[T any](f func(*T) *T) cache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *T:
			return f(o), nil
		case cache.DeletedFinalStateUnknown:
			if inner, ok := o.Obj.(*T); ok {
				o.Obj = f(inner)
			}
			return o, nil
		}
		return obj, nil
	}
}

// keptAnnotation reports whether a pod annotation is one fairway reads.
func keptAnnotation(k string) bool {
	switch k {
	case v1alpha1.GPUFractionAliasAnnotation, v1alpha1.GPUMemoryAliasAnnotation, v1alpha1.GPUContainerAliasAnnotation:
		return true
	case v1alpha1.ArgoNodeNameAnnotation:
		// Which step of its run an Argo pod is: pipeline admission's Stages mode follows runs.
		return true
	}
	return strings.HasPrefix(k, v1alpha1.Prefix)
}

func trimMeta(m *metav1.ObjectMeta, keepLabels bool, keepAnnotation func(string) bool, keepOwners bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp, DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
	}
	if keepLabels {
		out.Labels = m.Labels
	}
	if keepAnnotation != nil {
		for k, v := range m.Annotations {
			if keepAnnotation(k) {
				if out.Annotations == nil {
					out.Annotations = make(map[string]string)
				}
				out.Annotations[k] = v
			}
		}
	}
	if keepOwners {
		out.OwnerReferences = m.OwnerReferences
	}
	return out
}

func trimContainers(in []corev1.Container) []corev1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		c := &in[i]
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// TrimPod keeps what fairway reads of one of its own pods (spec.schedulerName=fairway).
func TrimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: trimMeta(&p.ObjectMeta, true, keptAnnotation, true)}
	s := &p.Spec
	out.Spec = corev1.PodSpec{
		NodeName: s.NodeName, SchedulerName: s.SchedulerName, Priority: s.Priority,
		PriorityClassName: s.PriorityClassName, NodeSelector: s.NodeSelector, Affinity: s.Affinity,
		Tolerations: s.Tolerations, SchedulingGates: s.SchedulingGates,
		TopologySpreadConstraints: s.TopologySpreadConstraints, ResourceClaims: s.ResourceClaims,
		Overhead: s.Overhead, Resources: s.Resources, TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
		Containers: trimContainers(s.Containers), InitContainers: trimContainers(s.InitContainers),
	}
	for _, v := range s.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName}}})
		case v.Ephemeral != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{}}})
		}
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime,
		// The names of the ResourceClaims made from the pod's templates (docs/dra.md).
		ResourceClaimStatuses: p.Status.ResourceClaimStatuses}
	if p.Status.Phase == corev1.PodFailed {
		// Why the kubelet failed it: a rejection at admission backs its node off.
		out.Status.Reason, out.Status.Message = p.Status.Reason, p.Status.Message
	}
	for _, c := range p.Status.Conditions {
		// GPUIdle is the gpu-agent's idleness of interactive pods, which idle GPU lending reads.
		if c.Type == corev1.PodScheduled || c.Type == corev1.DisruptionTarget || c.Type == v1alpha1.GPUIdleCondition {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out
}

// TrimForeignPod keeps what fairway reads of a pod another scheduler bound: only what it takes
// from its node.
func TrimForeignPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: trimMeta(&p.ObjectMeta, false, nil, false)}
	s := &p.Spec
	out.Spec = corev1.PodSpec{
		NodeName: s.NodeName, SchedulerName: s.SchedulerName, Overhead: s.Overhead, Resources: s.Resources,
		Containers: trimContainers(s.Containers), InitContainers: trimContainers(s.InitContainers),
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime}
	return out
}

// TrimNode keeps what the snapshot reads of a node: labels, the GPU inventory, cordon, taints
// and allocatable.
func TrimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: trimMeta(&n.ObjectMeta, true, func(k string) bool { return k == v1alpha1.GPUInventoryAnnotation }, false)}
	out.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}
	out.Status = corev1.NodeStatus{Allocatable: n.Status.Allocatable}
	return out
}

// TrimQueue drops a Queue's managed fields.
func TrimQueue(q *v1alpha1.Queue) *v1alpha1.Queue {
	q.ManagedFields = nil
	return q
}

// SpecOnly keeps of a framework object (an OptionalKind's, unstructured) its apiVersion, kind,
// metadata and spec, without managed fields: what fairway reads of a gang's owner or a pipeline
// run. A kind that also reads part of the status adds it to the result.
func SpecOnly(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": u.Object["metadata"], "spec": u.Object["spec"],
	}}
	out.SetManagedFields(nil)
	return out
}

// TrimToSpec is an OptionalKind.Trim that keeps SpecOnly of each object; anything else (a
// tombstone) passes as it is.
func TrimToSpec(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return SpecOnly(u), nil
	}
	return obj, nil
}

// TrimNamespace keeps a namespace's name and labels.
func TrimNamespace(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: trimMeta(&ns.ObjectMeta, true, nil, false)}
}

// TrimPodGroup drops a PodGroup's managed fields.
func TrimPodGroup(pg *v1alpha1.PodGroup) *v1alpha1.PodGroup {
	pg.ManagedFields = nil
	return pg
}

// TrimBudget keeps what fairway reads of a PodDisruptionBudget: its selector, the disruptions it
// allows and the pods it counts as disrupted.
func TrimBudget(b *policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: trimMeta(&b.ObjectMeta, false, nil, false),
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: b.Spec.Selector},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: b.Status.DisruptionsAllowed, DisruptedPods: b.Status.DisruptedPods},
	}
}

// TrimPriorityClass keeps a class's name and value.
func TrimPriorityClass(pc *schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: trimMeta(&pc.ObjectMeta, false, nil, false), Value: pc.Value}
}

// TrimClaim keeps what volume binding reads of a claim: the fields FindMatchingVolume matches,
// its bound volume, its owners, and the annotations of the binding protocol (selected-node, bind-completed,
// storage-provisioner).
func TrimClaim(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		// The owner tells an ephemeral volume's claim from a claim of the same name.
		ObjectMeta: trimMeta(&c.ObjectMeta, false, claimAnnotation, true),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: c.Spec.AccessModes, Selector: c.Spec.Selector, Resources: c.Spec.Resources,
			VolumeName: c.Spec.VolumeName, StorageClassName: c.Spec.StorageClassName, VolumeMode: c.Spec.VolumeMode,
			VolumeAttributesClassName: c.Spec.VolumeAttributesClassName,
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: c.Status.Phase},
	}
}

func claimAnnotation(k string) bool {
	switch k {
	case volumehelpers.AnnSelectedNode, volumehelpers.AnnBindCompleted, volumehelpers.AnnStorageProvisioner,
		volumehelpers.AnnBetaStorageProvisioner, corev1.BetaStorageClassAnnotation:
		return true
	}
	return false
}

// TrimVolume keeps what volume binding reads of a volume: node affinity, claim, phase and the
// fields FindMatchingVolume matches (its labels for claim selectors). The volume source is
// dropped: the binder reads the full object from the API server before it writes.
func TrimVolume(v *corev1.PersistentVolume) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: trimMeta(&v.ObjectMeta, true, func(k string) bool { return k == corev1.BetaStorageClassAnnotation }, false),
		Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: v.Spec.NodeAffinity, ClaimRef: v.Spec.ClaimRef, Capacity: v.Spec.Capacity,
			AccessModes: v.Spec.AccessModes, StorageClassName: v.Spec.StorageClassName, VolumeMode: v.Spec.VolumeMode,
			VolumeAttributesClassName: v.Spec.VolumeAttributesClassName,
		},
		Status: corev1.PersistentVolumeStatus{Phase: v.Status.Phase},
	}
}

// TrimStorageClass drops a class's managed fields.
func TrimStorageClass(c *storagev1.StorageClass) *storagev1.StorageClass {
	c.ManagedFields = nil
	return c
}
