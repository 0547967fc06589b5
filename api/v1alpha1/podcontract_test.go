package v1alpha1

import (
	"slices"
	"strings"
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

// FuzzPodBindingRoundTrip: what the writer writes, the reader reads back, whatever the values.
func FuzzPodBindingRoundTrip(f *testing.F) {
	f.Add(3, 5, "GPU-1", "n1-3", 2, true)
	f.Add(0, -1, "", "", -1, false)
	f.Fuzz(func(t *testing.T, i1, i2 int, uuid, group string, slot int, loan bool) {
		var idx []int
		for _, i := range []int{i1, i2} {
			if i >= 0 {
				idx = append(idx, i)
			}
		}
		if strings.ContainsAny(uuid, ",") || strings.TrimSpace(group) != group {
			t.Skip()
		}
		in := PodBinding{GPUIndexes: idx, GPUUUID: uuid, Group: group, Slot: max(slot, -1), Loan: loan}
		out, err := PodBindingOf(in.Labels(), in.Annotations())
		if err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
		if !slices.Equal(in.GPUIndexes, out.GPUIndexes) || in.GPUUUID != out.GPUUUID || in.Group != out.Group || in.Slot != out.Slot || in.Loan != out.Loan {
			t.Fatalf("wrote %+v, read %+v", in, out)
		}
	})
}

// FuzzMinMemberRoundTrip: SetMinMember's value reads back; anything else the reader takes is a
// positive integer.
func FuzzMinMemberRoundTrip(f *testing.F) {
	f.Add(int32(3), "7")
	f.Add(int32(1), "0")
	f.Fuzz(func(t *testing.T, n int32, raw string) {
		if n >= 1 {
			a := map[string]string{}
			SetMinMember(a, n)
			if got, ok, err := MinMemberOf(a); got != n || !ok || err != nil {
				t.Fatalf("wrote %d, read %d %v %v", n, got, ok, err)
			}
		}
		if got, ok, err := MinMemberOf(map[string]string{MinMemberAnnotation: raw}); err == nil && (!ok || got < 1) {
			t.Fatalf("%q read as %d without an error", raw, got)
		}
	})
}

func TestPreemptibilityOf(t *testing.T) {
	for v, want := range map[string]Preemptibility{"preemptible": Preemptible, "non-preemptible": NonPreemptible} {
		if got, err := PreemptibilityOf(map[string]string{PreemptibilityLabel: v}); got != want || err != nil {
			t.Errorf("%q: %q %v", v, got, err)
		}
	}
	if got, err := PreemptibilityOf(nil); got != "" || err != nil {
		t.Errorf("unset: %q %v", got, err)
	}
	if _, err := PreemptibilityOf(map[string]string{PreemptibilityLabel: "never"}); err == nil || !strings.Contains(err.Error(), `must be "preemptible" or "non-preemptible"`) {
		t.Errorf("bad value: %v", err)
	}
}
