//go:build e2e

package e2e

import (
	"testing"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/scale"
)

// TestScaleOutcomes plays KAI-Scheduler's public scale suite (test/scale) on 50 nodes of 8 GPUs
// and checks every scenario's outcome: every job placed, every gang whole, each reclaim evicting
// exactly what the claimant is owed, the limit-0 queue's jobs pending with their reason, and the
// impossible gang answered with a reason on its PodGroup. It asserts no time: the figures are
// `make bench-scale`'s (docs/performance.md). Three samples instead of KAI's ten keep it short.
func TestScaleOutcomes(t *testing.T) {
	t.Parallel()
	c := cluster.StartT(t, scale.ClusterConfig())
	results, err := scale.Run(t.Context(), c, scale.Options{Nodes: 50, Samples: 3, Binary: buildFairway(t), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(scale.Scenarios) {
		t.Fatalf("%d of %d scenarios played", len(results), len(scale.Scenarios))
	}
}
