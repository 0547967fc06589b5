package cache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// TrimPendingForeignPod keeps what fairway reads of a pod another scheduler has yet to place:
// its scheduler and the whole GPUs it asks for (kept as the one request of one container), so
// that each costs its name and little more, the many that ask for no GPU included. fairway
// places none of them; they only compete for GPUs (snapshot.ForeignPending).
func TrimPendingForeignPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	out.Spec.SchedulerName = p.Spec.SchedulerName
	// The watch's field selector has only such pods; a fake client's has any.
	if p.Spec.SchedulerName == v1alpha1.SchedulerName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending {
		return out
	}
	if q, ok := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[v1alpha1.ResourceGPU]; ok && !q.IsZero() {
		out.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{v1alpha1.ResourceGPU: q}}}}
	}
	return out
}

// PendingForeignGPUs is the whole GPUs a pod that TrimPendingForeignPod trimmed asks for.
func PendingForeignGPUs(p *corev1.Pod) int64 {
	if len(p.Spec.Containers) == 0 {
		return 0
	}
	q := p.Spec.Containers[0].Resources.Requests[v1alpha1.ResourceGPU]
	return q.Value()
}

// PendingForeignPod returns a pod another scheduler has yet to place, or nil. The object is
// shared: never modify it.
func (inf *Informers) PendingForeignPod(namespace, name string) *corev1.Pod {
	return get[corev1.Pod](inf.PendingForeignPods.GetStore(), nsKey(namespace, name))
}
