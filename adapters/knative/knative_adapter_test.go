package knative_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/knative"
)

func TestDescribe(t *testing.T) {
	a := knative.New()
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "service-gpu.yaml"))
	if !a.Recognize(pod) {
		t.Fatal("Recognize(revision pod) = false")
	}
	got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: "server"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}

	// Without the default-container annotation: the first container that is not queue-proxy.
	delete(pod.Annotations, knative.DefaultContainerAnnotation)
	pod.Spec.Containers[0], pod.Spec.Containers[1] = pod.Spec.Containers[1], pod.Spec.Containers[0]
	got, _ = a.Describe(context.Background(), pod, adaptertest.NewReader())
	if got.GPUContainer != "server" {
		t.Errorf("GPUContainer without the annotation = %q, want server", got.GPUContainer)
	}
}

// TestRecognizeLookAlike: the revision label copied onto a pod without Knative's sidecar (a
// debugging copy of a replica) does not make it a Knative replica.
func TestRecognizeLookAlike(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "service-gpu.yaml"))
	pod.Spec.Containers = pod.Spec.Containers[:1]
	if knative.New().Recognize(pod) {
		t.Error("Recognize(pod without queue-proxy) = true")
	}
}
