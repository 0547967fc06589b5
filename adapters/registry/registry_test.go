package registry_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/registry"
)

// TestEveryFixtureIsClaimedOnce checks the registry order: each framework's pods are claimed by
// that framework's adapter, even where an earlier or later adapter would also recognise them
// (KFP pods are Argo pods).
func TestEveryFixtureIsClaimedOnce(t *testing.T) {
	cases := map[string]string{
		"../kfp/testdata/executor-2.17.yaml":             "kubeflow-pipelines",
		"../kfp/testdata/driver-2.14.yaml":               "kubeflow-pipelines",
		"../argo/testdata/step-gpu.yaml":                 "argo",
		"../argo/testdata/agent.yaml":                    "argo",
		"../kuberay/testdata/worker-gpu.yaml":            "ray",
		"../kuberay/testdata/head.yaml":                  "ray",
		"../jupyterhub/testdata/z2jh-notebook.yaml":      "jupyterhub",
		"../jupyterhub/testdata/placeholder.yaml":        "none",
		"../pytorchjob/testdata/worker.yaml":             "pytorchjob",
		"../mpijob/testdata/launcher.yaml":               "mpijob",
		"../mpijob/testdata/worker.yaml":                 "mpijob",
		"../tfjob/testdata/ps.yaml":                      "tfjob",
		"../xgboostjob/testdata/master.yaml":             "xgboostjob",
		"../paddlejob/testdata/worker.yaml":              "paddlejob",
		"../jaxjob/testdata/worker.yaml":                 "jaxjob",
		"../jobset/testdata/trainjob-node.yaml":          "jobset",
		"../usergang/testdata/kueue-pod.yaml":            "gang",
		"../usergang/testdata/indexed-job-pod.yaml":      "gang",
		"../kubeflownotebook/testdata/notebook-gpu.yaml": "kubeflow-notebook",
		"../airflow/testdata/kpo-gpu.yaml":               "airflow",
		"../airflow/testdata/executor-worker.yaml":       "airflow",
		"../mlflow/testdata/project-pod.yaml":            "mlflow",
		"../lws/testdata/vllm-leader.yaml":               "leaderworkerset",
		"../lws/testdata/vllm-worker.yaml":               "leaderworkerset",
		"../kserve/testdata/raw-predictor.yaml":          "kserve",
		"../kserve/testdata/serverless-predictor.yaml":   "kserve",
		"../kserve/testdata/multinode-worker.yaml":       "kserve",
		"../knative/testdata/service-gpu.yaml":           "knative",
		"../modelserver/testdata/triton-chart.yaml":      "triton",
		"../modelserver/testdata/vllm-guide.yaml":        "vllm",
		"../kuberay/testdata/rayservice-worker.yaml":     "ray",
	}
	all := registry.All()
	for fixture, want := range cases {
		t.Run(filepath.Base(fixture), func(t *testing.T) {
			pod := adaptertest.LoadPod(t, fixture)
			got := registry.Match(all, pod)
			if got == nil || got.Name() != want {
				t.Errorf("Match(%s) = %v, want the %s adapter", fixture, got, want)
			}
		})
	}
}

func TestFallbackClaimsEverythingElse(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-7d9f-", Namespace: "team-a"}}
	if got := registry.Match(registry.All(), pod); got == nil || got.Name() != "none" {
		t.Errorf("Match(bare pod) = %v, want the plain-pod fallback", got)
	}
}

func TestWatchedKinds(t *testing.T) {
	var got []string
	for _, gvk := range registry.WatchedKinds(registry.All()) {
		got = append(got, gvk.Kind)
	}
	want := []string{"Workflow", "RayCluster", "RayJob", "RayService", "PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "JobSet", "TrainJob", "Job", "LeaderWorkerSet", "PodGroup", "PodGroup", "PodGroup", "PodGroup"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WatchedKinds (-want +got):\n%s", diff)
	}
}

// BenchmarkMatch: the cost of recognition for the pod that asks every adapter, a pod of no
// framework (the webhook does this once per admitted pod; make bench-webhook holds it to its
// latency budget end to end).
func BenchmarkMatch(b *testing.B) {
	all := registry.All()
	pod := adaptertest.LoadPod(b, "../jupyterhub/testdata/placeholder.yaml")
	b.ReportAllocs()
	for b.Loop() {
		if registry.Match(all, pod) == nil {
			b.Fatal("no adapter")
		}
	}
}
