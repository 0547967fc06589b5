package kfp_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
)

func TestDescribe(t *testing.T) {
	step := func(wf, nodeID string) string { return "wf-" + wf + "-" + adapters.ShortHash(nodeID) }
	cases := map[string]struct {
		fixture  string
		wantRole kfp.Role
		want     adapters.Workload
	}{
		"2.17 executor: GPU on main": {
			fixture:  "executor-2.17.yaml",
			wantRole: kfp.RoleExecutor,
			want: adapters.Workload{Kind: adapters.KindPipelineStep, PodGroup: step("my-pipeline-abcde", "my-pipeline-abcde-2950131327"),
				MinMember: 1, PriorityClass: "fairway-training", GPUContainer: "main"},
		},
		"2.14 executor without runtime-role": {
			fixture:  "executor-2.14.yaml",
			wantRole: kfp.RoleExecutor,
			want: adapters.Workload{Kind: adapters.KindPipelineStep, PodGroup: step("iris-9f2kd", "iris-9f2kd-1203943817"),
				MinMember: 1, PriorityClass: "fairway-training", GPUContainer: "main"},
		},
		"2.17 driver is left to kube-scheduler": {
			fixture:  "driver-2.17.yaml",
			wantRole: kfp.RoleDriver,
			want:     adapters.Workload{Ignore: "Kubeflow Pipelines driver pod"},
		},
		"2.14 driver known by template name and image": {
			fixture:  "driver-2.14.yaml",
			wantRole: kfp.RoleDriver,
			want:     adapters.Workload{Ignore: "Kubeflow Pipelines driver pod"},
		},
		"DAG driver": {
			fixture:  "dag-driver.yaml",
			wantRole: kfp.RoleDriver,
			want:     adapters.Workload{Ignore: "Kubeflow Pipelines driver pod"},
		},
		"importer says launcher but is left to kube-scheduler": {
			fixture:  "importer.yaml",
			wantRole: kfp.RoleImporter,
			want:     adapters.Workload{Ignore: "Kubeflow Pipelines importer pod"},
		},
	}
	a := kfp.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.fixture))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize = false, want true")
			}
			if !argo.New().Recognize(pod) {
				t.Errorf("fixture is not an Argo pod; KFP pods must be")
			}
			if got := kfp.PodRole(pod); got != tc.wantRole {
				t.Errorf("PodRole = %q, want %q", got, tc.wantRole)
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			// Recreatable and its warnings: see recreatable_test.go.
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Recreatable", "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecognizeNeedsKFPMarkers(t *testing.T) {
	plainArgo := adaptertest.LoadPod(t, filepath.Join("..", "argo", "testdata", "step-gpu.yaml"))
	if kfp.New().Recognize(plainArgo) {
		t.Errorf("a plain Argo step was recognised as a KFP pod")
	}
}
