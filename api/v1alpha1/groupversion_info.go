// Package v1alpha1 holds fairway's API, group fairway.dev, version v1alpha1: the Queue tree
// that carries project quotas and the PodGroup that makes a set of pods one gang.
//
// The types are the contract between users, the mutating webhook, the scheduler runtime, the
// CLI and the dashboards, so the validation a user needs lives here, in the CRD schema itself
// (OpenAPI bounds and CEL rules): a bad object is refused by the API server with a message that
// names the field, before any fairway component sees it. The package depends only on
// k8s.io/api and k8s.io/apimachinery, so any project can import it cheaply.
//
// +kubebuilder:object:generate=true
// +groupName=fairway.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "fairway.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Queue{}, &QueueList{}, &PodGroup{}, &PodGroupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
