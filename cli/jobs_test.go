package cli_test

import (
	"testing"
	"time"

	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
)

// A Deployment's and a StatefulSet's replicas, each a gang of its own, are one row named after
// the workload, not one per PodGroup the webhook made up (issue 39). Unit test only: the e2e
// cluster's garbage collector would delete replicas without their owners (clitest.Replicas).
func TestJobsReplicasGolden(t *testing.T) {
	base := cli.Options{Client: fakeClient(t, clitest.Replicas()...), Now: func() time.Time { return clitest.Now }}
	for golden, args := range map[string][]string{
		"jobs-replicas.txt":  {"jobs", "-n", "team-a"},
		"jobs-replicas.json": {"jobs", "-n", "team-a", "-o", "json"},
	} {
		t.Run(golden, func(t *testing.T) {
			got, err := execute(t, base, args...)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, golden, clitest.Normalize(got))
		})
	}
}
