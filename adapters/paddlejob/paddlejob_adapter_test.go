package paddlejob_test

import (
	"testing"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/paddlejob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"worker: gang of both workers": {
			Pod: "worker.yaml", Objects: "simple-gpu.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 2, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 2}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle", Recreatable: adapters.Bool(true)},
		},
		"elastic: minReplicas workers": {
			Pod: "worker.yaml", Objects: "elastic.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 1, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 1}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "paddlejob-paddle-simple-gpu", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "paddle"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, paddlejob.New(), cases)
}
