package mpijob_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/mpijob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// The launcher and the workers are one gang: launcher 1 + workers 2 of the operator's
// tensorflow-mnist example.
func TestDescribe(t *testing.T) {
	gang := []fairwayv1.SubGroup{{Name: "launcher", MinMember: 1}, {Name: "worker", MinMember: 2}}
	cases := map[string]adaptertest.DescribeCase{
		"launcher starts with its workers": {
			Pod: "launcher.yaml", Objects: "mpijob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 3, SubGroup: "launcher",
				SubGroups: gang, PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi", QueueHint: "train-team",
				Recreatable: adapters.Bool(false)},
		},
		"worker: same gang": {
			Pod: "worker.yaml", Objects: "mpijob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 3, SubGroup: "worker",
				SubGroups: gang, PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi", QueueHint: "train-team",
				Recreatable: adapters.Bool(false)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, mpijob.New(), cases)
}

// runPolicy.schedulingPolicy.minAvailable sizes the gang; the launcher claims its place first.
func TestShapeMinAvailable(t *testing.T) {
	job := adaptertest.LoadObjects(t, filepath.Join("testdata", "mpijob.yaml"))[0]
	if err := unstructured.SetNestedField(job.Object, int64(2), "spec", "runPolicy", "schedulingPolicy", "minAvailable"); err != nil {
		t.Fatal(err)
	}
	want := adapters.GangShape{PodGroup: "mpijob-tensorflow-mnist", MinMember: 2,
		SubGroups: []fairwayv1.SubGroup{{Name: "launcher", MinMember: 1}, {Name: "worker", MinMember: 1}}}
	if diff := cmp.Diff([]adapters.GangShape{want}, mpijob.New().GangShapes(job)); diff != "" {
		t.Errorf("GangShapes (-want +got):\n%s", diff)
	}
}

// The MPIJob controller fails the job with its launcher and never replaces a failed worker, so
// no replica comes back after an eviction, whatever its restartPolicy.
func TestRestarted(t *testing.T) {
	job := adaptertest.LoadObjects(t, filepath.Join("testdata", "mpijob.yaml"))[0]
	a := mpijob.New()
	for _, policy := range []string{"", "OnFailure", "Always", "ExitCode"} {
		for _, typ := range []string{"Launcher", "Worker"} {
			if policy != "" {
				if err := unstructured.SetNestedField(job.Object, policy, "spec", "mpiReplicaSpecs", typ, "restartPolicy"); err != nil {
					t.Fatal(err)
				}
			}
			if a.Restarted(job, strings.ToLower(typ)) {
				t.Errorf("%s with restartPolicy %q: Restarted = true, want false", typ, policy)
			}
		}
	}
}
