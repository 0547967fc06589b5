package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 nodes"}, {1, "1 node"}, {4, "4 nodes"}} {
		if got := count(tc.n, "node", "nodes"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// An eviction's message names its beneficiary as users know it: the pod of a one-pod gang (not
// the PodGroup the webhook made up for it), else the gang; with its kind of work and workload.
func TestClaimantName(t *testing.T) {
	task := func(name string, kind v1alpha1.WorkloadKind) *snapshot.Task {
		return &snapshot.Task{Key: types.NamespacedName{Namespace: "team-a", Name: name}, Kind: kind}
	}
	deploy := v1alpha1.Workload{Kind: "Deployment", Name: "serve"}
	for _, tc := range []struct {
		name string
		g    *snapshot.Gang
		want string
	}{
		{"Deployment replica", &snapshot.Gang{Key: snapshot.GangKey{Namespace: "team-a", Name: "pod-serve-6cc45dbb8-3eb6c340", PodGroup: true},
			Workload: deploy, Tasks: []*snapshot.Task{task("serve-6cc45dbb8-q8fk7", v1alpha1.KindInference)}},
			"pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve)"},
		{"gang", &snapshot.Gang{Key: snapshot.GangKey{Namespace: "team-a", Name: "train", PodGroup: true},
			Workload: v1alpha1.Workload{Kind: "PyTorchJob", Name: "train"}, Tasks: []*snapshot.Task{task("train-0", v1alpha1.KindTraining), task("train-1", v1alpha1.KindTraining)}},
			"gang team-a/train (training PyTorchJob train)"},
		{"bare pod", &snapshot.Gang{Key: snapshot.GangKey{Namespace: "team-a", Name: "debug"}, Tasks: []*snapshot.Task{task("debug", v1alpha1.KindPod)}},
			"pod team-a/debug"},
		{"pods of several objects", &snapshot.Gang{Key: snapshot.GangKey{Namespace: "team-a", Name: "js", PodGroup: true},
			Tasks: []*snapshot.Task{task("js-0", v1alpha1.KindTraining), task("js-1", v1alpha1.KindTraining)}},
			"gang team-a/js (training)"},
	} {
		if got := claimantName(tc.g); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
