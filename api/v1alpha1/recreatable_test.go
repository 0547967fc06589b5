package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodRecreatable(t *testing.T) {
	yes := true
	owned := func(apiVersion, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "x", Controller: &yes}}
	}
	cases := []struct {
		name string
		ann  map[string]string
		refs []metav1.OwnerReference
		want bool
	}{
		{name: "bare pod"},
		{name: "replicaset", refs: owned("apps/v1", "ReplicaSet"), want: true},
		{name: "statefulset", refs: owned("apps/v1", "StatefulSet"), want: true},
		{name: "job: an eviction burns backoffLimit", refs: owned("batch/v1", "Job")},
		{name: "unknown controller", refs: owned("example.com/v1", "Thing")},
		{name: "same kind in another group", refs: owned("example.com/v1", "ReplicaSet")},
		{name: "owner that is not the controller", refs: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x"}}},
		{name: "adapter says no", ann: map[string]string{RecreatableAnnotation: "false"}, refs: owned("apps/v1", "ReplicaSet")},
		{name: "adapter says yes", ann: map[string]string{RecreatableAnnotation: "true"}, refs: owned("ray.io/v1", "RayCluster"), want: true},
		{name: "malformed value falls back to the owner", ann: map[string]string{RecreatableAnnotation: "yes"}, refs: owned("apps/v1", "ReplicaSet"), want: true},
	}
	for _, c := range cases {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: c.ann, OwnerReferences: c.refs}}
		if got := PodRecreatable(pod); got != c.want {
			t.Errorf("%s: PodRecreatable = %v, want %v", c.name, got, c.want)
		}
	}
	if PodRecreatable(nil) {
		t.Error("nil pod: want false")
	}
}
