package paddlejob_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/paddlejob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		pod, objects string
		want         adapters.Workload
		warns        int
	}{
		"worker: gang of both workers": {
			pod: "worker.yaml", objects: "simple-gpu.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 2, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 2}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle", Recreatable: adapters.Bool(true)},
		},
		"elastic: minReplicas workers": {
			pod: "worker.yaml", objects: "elastic.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 1, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 1}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			pod: "worker.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle"},
			warns: 1,
		},
	}
	run(t, paddlejob.New(), cases)
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
