package pytorchjob_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/pytorchjob"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		pod, objects string
		want         adapters.Workload
		warns        int
	}{
		"worker: gang = all replicas": {
			pod: "worker.yaml", objects: "pytorchjob.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 4, SubGroup: "worker",
				PriorityClass: "fairway-training", GPUContainer: "pytorch", QueueHint: "train-team", Recreatable: adapters.Bool(true)},
		},
		"master is a sub-group of the same gang": {
			pod: "master.yaml", objects: "pytorchjob.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 4, SubGroup: "master",
				PriorityClass: "fairway-training", GPUContainer: "pytorch", QueueHint: "train-team", Recreatable: adapters.Bool(true)},
		},
		"elastic: minReplicas": {
			pod: "worker.yaml", objects: "pytorchjob-elastic.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 2, SubGroup: "worker",
				PriorityClass: "fairway-training", GPUContainer: "pytorch", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			pod: "worker.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 1, SubGroup: "worker",
				PriorityClass: "fairway-training", GPUContainer: "pytorch"},
			warns: 1,
		},
	}
	a := pytorchjob.New()
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

func TestMinMemberPrefersSchedulingPolicy(t *testing.T) {
	job := adaptertest.LoadObjects(t, filepath.Join("testdata", "pytorchjob-elastic.yaml"))[0]
	if err := setNested(job.Object, int64(5), "spec", "runPolicy", "schedulingPolicy", "minAvailable"); err != nil {
		t.Fatal(err)
	}
	if got := pytorchjob.MinMember(job); got != 5 {
		t.Errorf("MinMember = %d, want 5 (minAvailable wins over elasticPolicy.minReplicas)", got)
	}
}

func setNested(obj map[string]any, v any, path ...string) error {
	for _, p := range path[:len(path)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	obj[path[len(path)-1]] = v
	return nil
}

// A replica comes back after an eviction unless its restartPolicy is Never (the job then fails).
func TestRestarted(t *testing.T) {
	job := adaptertest.LoadObjects(t, filepath.Join("testdata", "pytorchjob.yaml"))[0]
	if !pytorchjob.Restarted(job, "worker") || !pytorchjob.Restarted(job, "master") {
		t.Error("OnFailure replicas: Restarted = false, want true")
	}
	never := job.DeepCopy()
	_ = unstructured.SetNestedField(never.Object, "Never", "spec", "pytorchReplicaSpecs", "Worker", "restartPolicy")
	if pytorchjob.Restarted(never, "worker") {
		t.Error("restartPolicy Never: Restarted = true, want false")
	}
	unset := job.DeepCopy()
	unstructured.RemoveNestedField(unset.Object, "spec", "pytorchReplicaSpecs", "Worker", "restartPolicy")
	if !pytorchjob.Restarted(unset, "worker") {
		t.Error("restartPolicy unset (the operator defaults it to OnFailure): Restarted = false, want true")
	}
	if pytorchjob.Restarted(job, "launcher") {
		t.Error("unknown replica type: Restarted = true, want false")
	}
}
