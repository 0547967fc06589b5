package v1alpha1

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Workload is the object that made a pod, as its users know it: the pod's controller, except
// that a Deployment's ReplicaSet is named as the Deployment. Messages name it so that a person
// finds what an eviction hit or served ("inference Deployment serve") rather than a pod name
// with hashes, or a PodGroup fairway made up for a pod that is a gang of its own.
type Workload struct {
	Kind string
	Name string
}

// String is "Kind name" ("Deployment serve"), "" for no workload.
func (w Workload) String() string {
	if w.Kind == "" {
		return ""
	}
	return w.Kind + " " + w.Name
}

// WorkloadOf returns the workload of a pod; the zero Workload for a pod no controller made.
// A ReplicaSet whose name is the pod's pod-template-hash label after a dash is a Deployment's
// (the Deployment controller names them so): the Deployment is named instead.
func WorkloadOf(pod *corev1.Pod) Workload {
	if pod == nil {
		return Workload{}
	}
	for i := range pod.OwnerReferences {
		ref := &pod.OwnerReferences[i]
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
			if h := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
				if d, ok := strings.CutSuffix(ref.Name, "-"+h); ok && d != "" {
					return Workload{Kind: "Deployment", Name: d}
				}
			}
		}
		return Workload{Kind: ref.Kind, Name: ref.Name}
	}
	return Workload{}
}
