package tfjob_test

import (
	"testing"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/tfjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"ps and workers: one gang of all replicas, parameter servers first": {
			Pod: "ps.yaml", Objects: "tf_job_mnist.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 6, SubGroup: "ps",
				SubGroups:     []fairwayv1.SubGroup{{Name: "ps", MinMember: 2}, {Name: "worker", MinMember: 4}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow", Recreatable: adapters.Bool(false)},
		},
		"worker": {
			Pod: "worker.yaml", Objects: "tf_job_mnist.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 6, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "ps", MinMember: 2}, {Name: "worker", MinMember: 4}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow", Recreatable: adapters.Bool(false)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "tfjob-dist-mnist-for-e2e-test", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "tensorflow"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, tfjob.New(), cases)
}
