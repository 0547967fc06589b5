package v1alpha1_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestWorkloadOf(t *testing.T) {
	yes, no := true, false
	pod := func(hash string, refs ...metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: refs}}
		if hash != "" {
			p.Labels = map[string]string{"pod-template-hash": hash}
		}
		return p
	}
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "serve-6cc45dbb8", Controller: &yes}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"nil", nil, ""},
		{"bare pod", pod(""), ""},
		{"Deployment's ReplicaSet", pod("6cc45dbb8", rs), "Deployment serve"},
		{"ReplicaSet of its own", pod("", rs), "ReplicaSet serve-6cc45dbb8"},
		{"ReplicaSet named otherwise", pod("abc", rs), "ReplicaSet serve-6cc45dbb8"},
		{"StatefulSet", pod("", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: &yes}), "StatefulSet db"},
		{"PyTorchJob", pod("", metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "train", Controller: &yes}), "PyTorchJob train"},
		{"owner that is not the controller", pod("", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", Controller: &no}), ""},
	} {
		if got := v1alpha1.WorkloadOf(tc.pod).String(); got != tc.want {
			t.Errorf("%s: WorkloadOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
