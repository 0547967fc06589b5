package mlflow_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/mlflow"
)

func TestDescribe(t *testing.T) {
	a := mlflow.New()
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "project-pod.yaml"))
	if !a.Recognize(pod) {
		t.Fatal("Recognize(project pod) = false")
	}
	want := adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mlflow-7e1c2b9f3a4d4e5f8a6b0c1d2e3f4a5b", MinMember: 1,
		GPUContainer: "sklearn_elasticnet_wine", Recreatable: adapters.Bool(true), QueueHint: "team-b"}
	got, err := a.Describe(context.Background(), pod, adaptertest.NewReader(adaptertest.LoadObjects(t, filepath.Join("testdata", "project-job.yaml"))...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}

	// The Job not readable yet: the same gang, the owner-kind default for recreating.
	want.Recreatable, want.QueueHint = nil, ""
	got, _ = a.Describe(context.Background(), pod, adaptertest.NewReader())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe without the Job (-want +got):\n%s", diff)
	}
}

// TestRecognizeLookAlikes: a Job pod that only logs to MLflow (its tracking URI set, no run id
// handed down) and a bare pod with the run's environment are not project runs.
func TestRecognizeLookAlikes(t *testing.T) {
	base := adaptertest.LoadPod(t, filepath.Join("testdata", "project-pod.yaml"))
	logging := base.DeepCopy()
	logging.Spec.Containers[0].Env = logging.Spec.Containers[0].Env[1:2]
	bare := base.DeepCopy()
	bare.OwnerReferences = nil
	if mlflow.New().Recognize(logging) {
		t.Error("Recognize(tracking URI only) = true")
	}
	if mlflow.New().Recognize(bare) {
		t.Error("Recognize(bare pod) = true")
	}
}
