package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodRecreatable reports whether evicting pod loses it for good (false) or its controller makes
// it again without losing work (true). The scheduler moves only recreatable pods to defragment
// nodes and prefers them as victims, so the rule is one place, here:
//
//   - RecreatableAnnotation "true" or "false", written by the webhook's adapter, which read the
//     owner objects (the Workflow's retry strategy, the RayCluster's head and workers);
//   - otherwise the pod's controller kind: a ReplicaSet (a Deployment's) or StatefulSet pod comes
//     back with no work lost; a bare pod, a Job's (an eviction counts against backoffLimit unless
//     its podFailurePolicy ignores DisruptionTarget, which only the Job says) and any other
//     controller's do not.
//
// A nil pod is not recreatable.
func PodRecreatable(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	switch pod.Annotations[RecreatableAnnotation] {
	case "true":
		return true
	case "false":
		return false
	}
	for i := range pod.OwnerReferences {
		ref := &pod.OwnerReferences[i]
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		return err == nil && recreatingKinds[gv.WithKind(ref.Kind).GroupKind()]
	}
	return false
}

// recreatingKinds are the controllers whose pods come back after an eviction with nothing lost.
var recreatingKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "ReplicaSet"}:        true,
	{Group: "apps", Kind: "StatefulSet"}:       true,
	{Group: "", Kind: "ReplicationController"}: true,
}
