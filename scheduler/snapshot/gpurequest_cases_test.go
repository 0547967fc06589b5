package snapshot_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// TestGPUShareCases runs the GPU-share table that gpurequest, the webhook and the CLI also run
// through PodInfoFromPod, as the scheduler reads a pod the webhook never saw: an accepted input
// is the request the table gives, a refused one asks for no share and makes the pod's problem,
// with the parser's message.
func TestGPUShareCases(t *testing.T) {
	for _, tc := range gpurequesttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := testutil.MakePod("a", "p").Queue("a").Obj()
			pod.Annotations = maps.Clone(tc.Annotations)
			info := snapshot.PodInfoFromPod(pod)
			if info.Req.FractionMilli != tc.Milli || info.Req.GPUMemoryMiB != tc.MemoryMiB {
				t.Errorf("read %d milli-GPU / %d MiB, want %d / %d", info.Req.FractionMilli, info.Req.GPUMemoryMiB, tc.Milli, tc.MemoryMiB)
			}
			switch {
			case !tc.Refused() && info.Problem != nil:
				t.Errorf("problem %+v, want none", info.Problem)
			case tc.Refused() && info.Problem == nil:
				t.Errorf("no problem, want one with %q", tc.Err)
			case tc.Refused() && (info.Problem.Code != snapshot.ProblemInvalidRequest ||
				!strings.HasPrefix(info.Problem.Message, "annotation "+tc.ErrKey+" ") || !strings.Contains(info.Problem.Message, tc.Err)):
				t.Errorf("problem %+v, want %s naming %s with %q", info.Problem, snapshot.ProblemInvalidRequest, tc.ErrKey, tc.Err)
			}
		})
	}
}
