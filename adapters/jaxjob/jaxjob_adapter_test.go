package jaxjob_test

import (
	"testing"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jaxjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"worker: gang of both workers": {
			Pod: "worker.yaml", Objects: "demo.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jaxjob-jaxjob-simple", MinMember: 2, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "worker", MinMember: 2}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "jax", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "jaxjob-jaxjob-simple", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "jax"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, jaxjob.New(), cases)
}
