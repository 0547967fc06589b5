package tfjob_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/tfjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		pod, objects string
		want         adapters.Workload
		warns        int
	}{
		"ps and workers: one gang of all replicas, parameter servers first": {
			pod: "ps.yaml", objects: "tf_job_mnist.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 6, SubGroup: "ps",
				SubGroups:     []fairwayv1.SubGroup{{Name: "ps", MinMember: 2}, {Name: "worker", MinMember: 4}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow", Recreatable: adapters.Bool(false)},
		},
		"worker": {
			pod: "worker.yaml", objects: "tf_job_mnist.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 6, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "ps", MinMember: 2}, {Name: "worker", MinMember: 4}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow", Recreatable: adapters.Bool(false)},
		},
		"CRD missing: degrade": {
			pod: "worker.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow"},
			warns: 1,
		},
	}
	run(t, tfjob.New(), cases)
}

func run(t *testing.T, a adapters.Adapter, cases map[string]struct {
	pod, objects string
	want         adapters.Workload
	warns        int
}) {
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			reader := adaptertest.NewReader()
			if tc.objects != "" {
				for _, o := range adaptertest.LoadObjects(t, filepath.Join("testdata", tc.objects)) {
					reader.Add(o)
				}
			}
			if !a.Recognize(pod) {
				t.Fatalf("Recognize = false, want true")
			}
			got, err := a.Describe(context.Background(), pod, reader)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != tc.warns {
				t.Errorf("warnings = %q, want %d", got.Warnings, tc.warns)
			}
		})
	}
}
