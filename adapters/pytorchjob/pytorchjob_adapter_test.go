package pytorchjob_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/pytorchjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"worker: gang = all replicas": {
			Pod: "worker.yaml", Objects: "pytorchjob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 4, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 3}},
				PriorityClass: "fairway-training", GPUContainer: "pytorch", QueueHint: "train-team", Recreatable: adapters.Bool(true)},
		},
		"master is a sub-group of the same gang": {
			Pod: "master.yaml", Objects: "pytorchjob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 4, SubGroup: "master",
				SubGroups:     []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 3}},
				PriorityClass: "fairway-training", GPUContainer: "pytorch", QueueHint: "train-team", Recreatable: adapters.Bool(true)},
		},
		"elastic: minReplicas": {
			Pod: "worker.yaml", Objects: "pytorchjob-elastic.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 2, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 2}},
				PriorityClass: "fairway-training", GPUContainer: "pytorch", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "pytorchjob-ddp", MinMember: 1, SubGroup: "worker",
				PriorityClass: "fairway-training", GPUContainer: "pytorch"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, pytorchjob.New(), cases)
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

// TestShape: Master first and whole, Workers at their elastic minimum, minAvailable capping the
// sum; the sub-groups always add up to the gang's minimum.
func TestShape(t *testing.T) {
	job := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
			"metadata": map[string]any{"name": "ddp", "namespace": "ns"}, "spec": spec,
		}}
	}
	replicas := func(master, worker int64) map[string]any {
		return map[string]any{
			"Worker": map[string]any{"replicas": worker},
			"Master": map[string]any{"replicas": master},
		}
	}
	cases := map[string]struct {
		spec map[string]any
		want adapters.GangShape
	}{
		"master and workers": {
			spec: map[string]any{"pytorchReplicaSpecs": replicas(1, 4)},
			want: adapters.GangShape{PodGroup: "pytorchjob-ddp", MinMember: 5,
				SubGroups: []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 4}}},
		},
		"elastic: workers at minReplicas, master whole": {
			spec: map[string]any{"pytorchReplicaSpecs": replicas(1, 6), "elasticPolicy": map[string]any{"minReplicas": int64(2), "maxReplicas": int64(8)}},
			want: adapters.GangShape{PodGroup: "pytorchjob-ddp", MinMember: 3,
				SubGroups: []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 2}}},
		},
		"minAvailable caps the sum, master first": {
			spec: map[string]any{"pytorchReplicaSpecs": replicas(1, 6), "runPolicy": map[string]any{"schedulingPolicy": map[string]any{"minAvailable": int64(3)}}},
			want: adapters.GangShape{PodGroup: "pytorchjob-ddp", MinMember: 3,
				SubGroups: []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 2}}},
		},
		"no workers": {
			spec: map[string]any{"pytorchReplicaSpecs": map[string]any{"Master": map[string]any{}}},
			want: adapters.GangShape{PodGroup: "pytorchjob-ddp", MinMember: 1, SubGroups: []fairwayv1.SubGroup{{Name: "master", MinMember: 1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff([]adapters.GangShape{tc.want}, pytorchjob.New().GangShapes(job(tc.spec))); d != "" {
				t.Errorf("GangShapes (-want +got):\n%s", d)
			}
		})
	}
}
