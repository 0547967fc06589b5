package xgboostjob_test

import (
	"testing"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/xgboostjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]adaptertest.DescribeCase{
		"master: gang of master and workers; Never does not come back": {
			Pod: "master.yaml", Objects: "xgboostjob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "xgboostjob-xgboost-dist-iris-test-train", MinMember: 3, SubGroup: "master",
				SubGroups:     []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 2}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "xgboost", Recreatable: adapters.Bool(false)},
		},
		"worker: restartPolicy ExitCode comes back": {
			Pod: "worker.yaml", Objects: "xgboostjob.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "xgboostjob-xgboost-dist-iris-test-train", MinMember: 3, SubGroup: "worker",
				SubGroups:     []fairwayv1.SubGroup{{Name: "master", MinMember: 1}, {Name: "worker", MinMember: 2}},
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "xgboost", Recreatable: adapters.Bool(true)},
		},
		"CRD missing: degrade": {
			Pod: "worker.yaml",
			Want: adapters.Workload{Kind: adapters.KindTraining, PodGroup: "xgboostjob-xgboost-dist-iris-test-train", MinMember: 1, SubGroup: "worker",
				PriorityClass: fairwayv1.PriorityClassTraining, GPUContainer: "xgboost"},
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, xgboostjob.New(), cases)
}
