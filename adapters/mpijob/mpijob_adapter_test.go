package mpijob_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
	cases := map[string]struct {
		pod, objects string
		want         adapters.Workload
		warns        int
	}{
		"launcher starts with its workers": {
			pod: "launcher.yaml", objects: "mpijob.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 3, SubGroup: "launcher",
				SubGroups: gang, PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi", QueueHint: "train-team",
				Recreatable: adapters.Bool(false)},
		},
		"worker: same gang": {
			pod: "worker.yaml", objects: "mpijob.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 3, SubGroup: "worker",
				SubGroups: gang, PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi", QueueHint: "train-team",
				Recreatable: adapters.Bool(false)},
		},
		"CRD missing: degrade": {
			pod: "worker.yaml",
			want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "mpijob-tensorflow-mnist", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "mpi"},
			warns: 1,
		},
	}
	a := mpijob.New()
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
