package mutatingwebhook

import (
	"bytes"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPatchFor checks both ways of building the patch against each other: applied to the raw
// pod, each gives the mutated pod.
func TestPatchFor(t *testing.T) {
	original := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a/b": "1", "gone": "x"}},
		Spec: corev1.PodSpec{
			Priority: ptr.To[int32](0),
			Containers: []corev1.Container{
				{Name: "wait", Image: "argoexec", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1000m")}}},
				{Name: "main", Image: "train", Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}, {Name: "X", Value: "1"}}},
			},
		},
	}
	mutated := original.DeepCopy()
	mutated.Labels["fairway.dev/queue"] = "q"
	mutated.Labels["a/b"] = "2"
	delete(mutated.Labels, "gone")
	mutated.Annotations = map[string]string{"fairway.dev/pod-group": "g"}
	mutated.Spec.SchedulerName = "fairway"
	mutated.Spec.PriorityClassName = "fairway-training"
	mutated.Spec.Priority = nil
	mutated.Spec.Containers[1].Env[0] = corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "NVIDIA_VISIBLE_DEVICES"}}}
	mutated.Spec.Containers[1].Env = append(mutated.Spec.Containers[1].Env, corev1.EnvVar{Name: "Y", Value: "2"})
	mutated.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "mps", MountPath: "/tmp/nvidia-mps"}}
	mutated.Spec.Volumes = []corev1.Volume{{Name: "mps"}}
	// The share ticket: added name by name where the container had resources, whole where not.
	ticket := corev1.ResourceList{"fairway.dev/gpu-share": resource.MustParse("1")}
	mutated.Spec.Containers[0].Resources.Limits = ticket.DeepCopy()
	mutated.Spec.Containers[0].Resources.Requests["fairway.dev/gpu-share"] = resource.MustParse("1")
	mutated.Spec.Containers[1].Resources = corev1.ResourceRequirements{Limits: ticket.DeepCopy(), Requests: ticket.DeepCopy()}

	raw, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	// As a client may write it: the Go encoder writes the canonical "1".
	raw = bytes.Replace(raw, []byte(`"cpu":"1"`), []byte(`"cpu":"1000m"`), 1)
	direct, ok := directPatch(original, mutated)
	if !ok {
		t.Fatalf("directPatch refused the defaulter's kind of change")
	}
	diffed, err := diffPatch(raw, original, mutated)
	if err != nil {
		t.Fatal(err)
	}
	for name, ops := range map[string]any{"direct": direct, "diff": diffed} {
		b, _ := json.Marshal(ops)
		p, err := jsonpatch.DecodePatch(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := p.Apply(raw)
		if err != nil {
			t.Fatalf("%s patch does not apply: %v\n%s", name, err, b)
		}
		if name == "direct" && !bytes.Contains(out, []byte(`"cpu":"1000m"`)) {
			t.Errorf("the direct patch rewrote a quantity the defaulter left alone:\n%s", out)
		}
		got := &corev1.Pod{}
		if err := json.Unmarshal(out, got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(mutated, got); diff != "" {
			t.Errorf("%s patch gives (-want +got):\n%s", name, diff)
		}
	}

	// A change outside the covered fields is left to the JSON diff.
	other := mutated.DeepCopy()
	other.Spec.NodeName = "n1"
	if _, ok := directPatch(original, other); ok {
		t.Errorf("directPatch accepted a change to spec.nodeName")
	}
	// So is a body without metadata, which the direct patch would descend into.
	ops, err := patchFor([]byte(`{"spec":{"containers":[{"name":"c"}]}}`), &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k": "v"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}})
	if err != nil || len(ops) != 1 || ops[0].Path != "/metadata" {
		t.Errorf("patch for a body without metadata = %v, %v; want one add of /metadata", ops, err)
	}
}
