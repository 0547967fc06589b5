package jobset_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jobset"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		objects string
		want    adapters.Workload
		warns   int
	}{
		"TrainJob (in order): one gang per replicated job; queue from the TrainJob": {
			objects: "jobset-trainjob.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1-node", MinMember: 4,
				PriorityClass: "fairway-training", GPUContainer: "node", QueueHint: "train-team"},
		},
		"JobSet started at once: one gang, replicated jobs are sub-groups": {
			objects: "jobset-parallel.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1", MinMember: 7, SubGroup: "node",
				PriorityClass: "fairway-training", GPUContainer: "node", QueueHint: "train-team"},
		},
		"JobSet CRD missing: degrade": {
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1", MinMember: 1, SubGroup: "node",
				PriorityClass: "fairway-training", GPUContainer: "node"},
			warns: 1,
		},
	}
	a := jobset.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", "trainjob-node.yaml"))
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
