package v1alpha1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func sealedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p",
			Labels:      map[string]string{QueueLabel: "team-a", ManagedLabel: "true", "app": "x"},
			Annotations: map[string]string{PodGroupAnnotation: "g", MinMemberAnnotation: "2", WorkloadKindAnnotation: "training"}},
		Spec: corev1.PodSpec{SchedulerName: SchedulerName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}}}},
	}
}

// A seal holds while nothing it covers changes (binding keys and foreign keys may), and breaks
// when any sealed key, the namespace, the scheduler or the GPU count changes, or under another key.
func TestAdmissionSeal(t *testing.T) {
	key := AdmissionKey(strings.Repeat("k", 32))
	pod := sealedPod()
	pod.Annotations[AdmittedAnnotation] = key.Seal(pod)
	if err := key.VerifyAdmission(pod); err != nil {
		t.Fatalf("a fresh seal: %v", err)
	}
	for name, change := range map[string]func(p *corev1.Pod){
		"binding keys written": func(p *corev1.Pod) {
			p.Annotations[GPUIndexAnnotation] = "3"
			p.Annotations[LoanAnnotation] = "true"
			p.Labels[GPUGroupLabel] = "n-1"
		},
		"a foreign label": func(p *corev1.Pod) { p.Labels["app"] = "y" },
		"the pod's name":  func(p *corev1.Pod) { p.Name = "q" },
		"bound to a node": func(p *corev1.Pod) { p.Spec.NodeName = "n1" },
		"a CPU-only limit": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		},
	} {
		p := pod.DeepCopy()
		change(p)
		if err := key.VerifyAdmission(p); err != nil {
			t.Errorf("%s: the seal broke: %v", name, err)
		}
	}
	for name, change := range map[string]func(p *corev1.Pod){
		"another queue":          func(p *corev1.Pod) { p.Labels[QueueLabel] = "team-b" },
		"the Run:ai queue added": func(p *corev1.Pod) { p.Labels[RunAIQueueLabel] = "team-b" },
		"managed removed":        func(p *corev1.Pod) { delete(p.Labels, ManagedLabel) },
		"preemptibility added":   func(p *corev1.Pod) { p.Labels[PreemptibilityLabel] = string(NonPreemptible) },
		"another gang":           func(p *corev1.Pod) { p.Annotations[PodGroupAnnotation] = "h" },
		"another kind":           func(p *corev1.Pod) { p.Annotations[WorkloadKindAnnotation] = "notebook" },
		"a GPU share added":      func(p *corev1.Pod) { p.Annotations[GPUFractionAnnotation] = "0.5" },
		"another namespace":      func(p *corev1.Pod) { p.Namespace = "team-b" },
		"another scheduler":      func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" },
		"more GPUs":              func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits[ResourceGPU] = resource.MustParse("8") },
		"a GPU init container": func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}}}}
		},
		"no seal":           func(p *corev1.Pod) { delete(p.Annotations, AdmittedAnnotation) },
		"a seal of garbage": func(p *corev1.Pod) { p.Annotations[AdmittedAnnotation] = "v1:AAAA" },
	} {
		p := pod.DeepCopy()
		change(p)
		if err := key.VerifyAdmission(p); !errors.Is(err, ErrNotAdmitted) {
			t.Errorf("%s: VerifyAdmission = %v, want ErrNotAdmitted", name, err)
		}
	}
	other := AdmissionKey(strings.Repeat("x", 32))
	if err := other.VerifyAdmission(pod); !errors.Is(err, ErrNotAdmitted) {
		t.Errorf("another key accepted the seal: %v", err)
	}
}

func TestLoadAdmissionKey(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	if err := os.WriteFile(good, []byte(strings.Repeat("a", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadAdmissionKey(good); err != nil || len(k) != 40 {
		t.Errorf("good key: %d bytes, %v", len(k), err)
	}
	if _, err := LoadAdmissionKey(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short key: %v", err)
	}
	if _, err := LoadAdmissionKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing key file was accepted")
	}
}

// FuzzAdmissionSeal: whatever the keys' values, a seal verifies on the pod it was made for and
// not once a sealed value changes.
func FuzzAdmissionSeal(f *testing.F) {
	f.Add("team-a", "g", "0.5", "x")
	f.Fuzz(func(t *testing.T, queue, group, fraction, extra string) {
		key := AdmissionKey(strings.Repeat("k", 32))
		p := sealedPod()
		p.Labels[QueueLabel], p.Annotations[PodGroupAnnotation], p.Annotations[GPUFractionAnnotation] = queue, group, fraction
		p.Annotations[AdmittedAnnotation] = key.Seal(p)
		if err := key.VerifyAdmission(p); err != nil {
			t.Fatalf("fresh seal: %v", err)
		}
		if extra != queue {
			p.Labels[QueueLabel] = extra
			if key.VerifyAdmission(p) == nil {
				t.Fatalf("queue %q -> %q kept the seal", queue, extra)
			}
		}
	})
}

// BenchmarkVerifyAdmission is the scheduler's cost of checking one pending pod's seal, paid on
// each update of the pod while it is pending.
func BenchmarkVerifyAdmission(b *testing.B) {
	key := AdmissionKey(strings.Repeat("k", 32))
	pod := sealedPod()
	pod.Annotations[AdmittedAnnotation] = key.Seal(pod)
	b.ReportAllocs()
	for b.Loop() {
		if err := key.VerifyAdmission(pod); err != nil {
			b.Fatal(err)
		}
	}
}
