package v1alpha1

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodContractClassifiesEveryKey: every pod key fairway reads or writes has exactly one
// writer class, and the owned classes hold only known pod keys.
func TestPodContractClassifiesEveryKey(t *testing.T) {
	for _, k := range slices.Concat(PodLabelKeys, AliasLabelKeys) {
		if ClassOfPodLabel(k) == "" {
			t.Errorf("label %s has no class", k)
		}
	}
	for _, k := range slices.Concat(PodAnnotationKeys, AliasAnnotationKeys) {
		if ClassOfPodAnnotation(k) == "" {
			t.Errorf("annotation %s has no class", k)
		}
	}
	for _, k := range slices.Concat(AdmissionPodLabels, BindingPodLabels) {
		if !slices.Contains(PodLabelKeys, k) {
			t.Errorf("owned label %s is not in PodLabelKeys", k)
		}
		if slices.Contains(ImmutablePodLabels, k) && k != ManagedLabel {
			t.Errorf("owned label %s is also listed as an immutable user key", k)
		}
	}
	for _, k := range slices.Concat(AdmissionPodAnnotations, BindingPodAnnotations) {
		if !slices.Contains(PodAnnotationKeys, k) {
			t.Errorf("owned annotation %s is not in PodAnnotationKeys", k)
		}
	}
	for _, k := range AdmissionPodLabels {
		if slices.Contains(BindingPodLabels, k) {
			t.Errorf("label %s is in two classes", k)
		}
	}
	for _, k := range AdmissionPodAnnotations {
		if slices.Contains(BindingPodAnnotations, k) {
			t.Errorf("annotation %s is in two classes", k)
		}
	}
	if got := ClassOfPodAnnotation(GPUIndexAnnotation); got != ClassBinding {
		t.Errorf("gpu-index is %q, want binding", got)
	}
	if got := ClassOfPodLabel(QueueLabel); got != ClassUser {
		t.Errorf("queue is %q, want user", got)
	}
	if got := ClassOfPodLabel("example.com/x"); got != "" {
		t.Errorf("a foreign key is %q, want none", got)
	}
}

func TestIsReservationPod(t *testing.T) {
	pod := func(ns string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels}}
	}
	resv := map[string]string{ReservationLabel: "true"}
	for _, c := range []struct {
		pod  *corev1.Pod
		ns   string
		want bool
	}{
		{pod("fairway-system", resv), "fairway-system", true},
		{pod("team-a", resv), "fairway-system", false},
		{pod("fairway-system", nil), "fairway-system", false},
		{pod("fairway-system", map[string]string{ReservationLabel: "yes"}), "fairway-system", false},
		{pod("", resv), "", false},
		{nil, "fairway-system", false},
	} {
		if got := IsReservationPod(c.pod, c.ns); got != c.want {
			t.Errorf("IsReservationPod(%v, %q) = %v, want %v", c.pod, c.ns, got, c.want)
		}
	}
}
