package jobset_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jobset"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"TrainJob (in order): one gang per replicated job; queue from the TrainJob": {
			Pod: "trainjob-node.yaml", Objects: "jobset-trainjob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1-node", MinMember: 4,
				PriorityClass: "fairway-training", GPUContainer: "node", QueueHint: "train-team", Recreatable: adapters.Bool(false)},
		},
		"JobSet started at once: one gang, replicated jobs are sub-groups": {
			Pod: "trainjob-node.yaml", Objects: "jobset-parallel.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1", MinMember: 7, SubGroup: "node",
				SubGroups:     []fairwayv1.SubGroup{{Name: "driver", MinMember: 1}, {Name: "node", MinMember: 6}},
				PriorityClass: "fairway-training", GPUContainer: "node", QueueHint: "train-team", Recreatable: adapters.Bool(false)},
		},
		"JobSet CRD missing: degrade": {
			Pod: "trainjob-node.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jobset-tj1", MinMember: 1, SubGroup: "node",
				PriorityClass: "fairway-training", GPUContainer: "node"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, jobset.New(), cases)
}

// A replicated job's pods come back after an eviction only when its Job template's
// podFailurePolicy ignores DisruptionTarget; otherwise each eviction burns the Job's backoffLimit.
func TestReplicatedJobIgnoresDisruption(t *testing.T) {
	js := adaptertest.LoadObjects(t, filepath.Join("testdata", "jobset-parallel.yaml"))[0]
	if jobset.ReplicatedJobIgnoresDisruption(js, "node") {
		t.Error("no podFailurePolicy: got true, want false")
	}
	rjobs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	spec := rjobs[1].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["podFailurePolicy"] = map[string]any{"rules": []any{
		map[string]any{"action": "FailJob", "onExitCodes": map[string]any{"operator": "In", "values": []any{int64(42)}}},
		map[string]any{"action": "Ignore", "onPodConditions": []any{map[string]any{"type": "DisruptionTarget"}}},
	}}
	_ = unstructured.SetNestedSlice(js.Object, rjobs, "spec", "replicatedJobs")
	if !jobset.ReplicatedJobIgnoresDisruption(js, "node") {
		t.Error("Ignore on DisruptionTarget: got false, want true")
	}
	if jobset.ReplicatedJobIgnoresDisruption(js, "driver") {
		t.Error("the driver's template has no such rule: got true, want false")
	}
}

// TestShapes: a JobSet started at once is one gang with a sub-group per replicated job; one
// started in order is a gang per replicated job, without sub-groups.
func TestShapes(t *testing.T) {
	first := func(file string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range adaptertest.LoadObjects(t, filepath.Join("testdata", file)) {
			if o.GetKind() == "JobSet" {
				return o
			}
		}
		t.Fatalf("%s holds no JobSet", file)
		return nil
	}
	cases := map[string][]adapters.GangShape{
		"jobset-parallel.yaml": {{PodGroup: "jobset-tj1", MinMember: 7,
			SubGroups: []fairwayv1.SubGroup{{Name: "driver", MinMember: 1}, {Name: "node", MinMember: 6}}}},
		"jobset-trainjob.yaml": {
			{PodGroup: adapters.GroupName("jobset", "tj1", "dataset-initializer"), MinMember: 1},
			{PodGroup: adapters.GroupName("jobset", "tj1", "node"), MinMember: 4},
		},
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			if d := cmp.Diff(want, jobset.New().GangShapes(first(file))); d != "" {
				t.Errorf("GangShapes (-want +got):\n%s", d)
			}
		})
	}
}
