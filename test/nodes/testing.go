package nodes

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/fairway-sched/fairway/test/cluster"
)

// HoldEnv, set to a duration ("5m"), keeps a failed test's nodes (and so its cluster) running
// that long before they are removed, to look into them with docker exec.
const HoldEnv = "FAIRWAY_NODES_HOLD"

// StartT starts nodes for a test and removes them when it ends, failed or not; when it failed
// the kubelet and containerd logs are first copied to the test's artifacts directory (next to
// the control plane's, see cluster.ArtifactsDir). It fails the test at once when Docker or the
// node image is missing: the real-node tier never skips.
func StartT(t testing.TB, c *cluster.Cluster, cfg Config) *Nodes {
	t.Helper()
	if cfg.Log.GetSink() == nil {
		cfg.Log = testr.NewWithInterface(t, testr.Options{})
	}
	ns, err := Start(context.Background(), c, cfg)
	if err != nil {
		t.Fatalf("starting real nodes: %v", err)
	}
	t.Cleanup(func() {
		if hold, err := time.ParseDuration(os.Getenv(HoldEnv)); t.Failed() && err == nil {
			t.Logf("%s: holding the failed test's nodes for %s (docker ps --filter label=%s)", HoldEnv, hold, LabelNode)
			time.Sleep(hold)
		}
		if t.Failed() {
			if dst, err := cluster.ArtifactsDir(t); err == nil {
				if err := ns.SaveLogs(dst); err != nil {
					t.Logf("keeping the node logs: %v", err)
				}
				t.Logf("node logs kept in %s", dst)
			}
		}
		if err := ns.Stop(); err != nil {
			t.Errorf("removing the real nodes: %v", err)
		}
	})
	return ns
}
