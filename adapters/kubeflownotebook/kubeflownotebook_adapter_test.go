package kubeflownotebook_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
)

func TestDescribe(t *testing.T) {
	a := kubeflownotebook.New()
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "notebook-gpu.yaml"))
	if !a.Recognize(pod) {
		t.Fatal("Recognize(notebook pod) = false")
	}
	got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Workload{Kind: adapters.KindNotebook, PodGroup: "nb-llm-dev", MinMember: 1, GPUContainer: "llm-dev"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}

	// A notebook whose container has another name (a Notebook written by hand): container 0.
	pod.Spec.Containers[0].Name = "jupyter"
	if got, _ := a.Describe(context.Background(), pod, adaptertest.NewReader()); got.GPUContainer != "jupyter" {
		t.Errorf("GPUContainer = %q, want container 0 (jupyter)", got.GPUContainer)
	}
}

// TestRecognizeLookAlikes: pods other tools label notebook-name, without the controller's
// StatefulSet named after the notebook, are not Kubeflow notebooks.
func TestRecognizeLookAlikes(t *testing.T) {
	base := adaptertest.LoadPod(t, filepath.Join("testdata", "notebook-gpu.yaml"))
	bare := base.DeepCopy()
	bare.OwnerReferences = nil
	other := base.DeepCopy()
	other.OwnerReferences[0].Name = "someone-else"
	deploy := base.DeepCopy()
	delete(deploy.Labels, kubeflownotebook.StatefulSetLabel)
	for name, pod := range map[string]*corev1.Pod{"bare pod": bare, "StatefulSet of another name": other, "no statefulset label": deploy} {
		if kubeflownotebook.New().Recognize(pod) {
			t.Errorf("Recognize(%s) = true", name)
		}
	}
}
