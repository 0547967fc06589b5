package airflow_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/airflow"
)

func TestDescribe(t *testing.T) {
	a := airflow.New()
	for _, fixture := range []string{"kpo-gpu.yaml", "executor-worker.yaml"} {
		t.Run(fixture, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", fixture))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize(%s) = false", fixture)
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatal(err)
			}
			want := adapters.Workload{Kind: adapters.KindTraining, MinMember: 1, GPUContainer: "base"}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(adapters.Workload{}, "PodGroup")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}

			// One gang per task try: the same try (a pod made again) shares it, a retry does not,
			// nor does another map index of a mapped task.
			again := pod.DeepCopy()
			again.Name = "train-other-suffix"
			retry := pod.DeepCopy()
			retry.Labels[airflow.TryNumberLabel] = "2"
			mapped := pod.DeepCopy()
			mapped.Labels[airflow.MapIndexLabel] = "3"
			group := func(p *corev1.Pod) string {
				w, _ := a.Describe(context.Background(), p, adaptertest.NewReader())
				return w.PodGroup
			}
			if g := group(again); g != got.PodGroup {
				t.Errorf("same try, another pod: gang %q, want %q", g, got.PodGroup)
			}
			if g := group(retry); g == got.PodGroup {
				t.Errorf("retry shares the gang %q of the first try", g)
			}
			if g := group(mapped); g == got.PodGroup {
				t.Errorf("map index 3 shares the gang %q", g)
			}
		})
	}
}

// TestRecognizeLookAlikes: a pod that only carries task labels (Airflow's own scheduler pod
// template, a user's pod) is not a task pod; the operator's marker must be "True".
func TestRecognizeLookAlikes(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "kpo-gpu.yaml"))
	pod.Labels[airflow.KPOLabel] = "false"
	if airflow.New().Recognize(pod) {
		t.Error("Recognize(kubernetes_pod_operator=false) = true")
	}
	delete(pod.Labels, airflow.KPOLabel)
	if airflow.New().Recognize(pod) {
		t.Error("Recognize(no operator label) = true")
	}
}
