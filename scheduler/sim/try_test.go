package sim

import (
	"os"
	"testing"

	"github.com/fairway-sched/fairway/scheduler/engine"
)

func TestTryOpenB(t *testing.T) {
	trace := os.Getenv("OPENB_TRACE")
	if trace == "" {
		t.Skip()
	}
	dir := "/work/shared/traces/alibaba-openb-2023/csv/"
	nodes, err := LoadOpenBNodes(dir + "openb_node_list_gpu_node.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadOpenBPods(dir + "openb_pod_list_" + trace + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	snap, capMilli, err := OpenBCluster(nodes)
	if err != nil {
		t.Fatal(err)
	}
	w := OpenBWorkload(pods, capMilli, 1.3, 42, OrderShuffle)
	if os.Getenv("OPENB_N") != "" {
		w = w[:9500]
	}
	res, err := RunOpenB(snap, capMilli, w, engine.Options{SharesNeedInventory: true}, func(d, n int) { t.Logf("%d/%d", d, n) })
	if err != nil {
		t.Fatal(err)
	}
	c := res.Columns(130)
	t.Logf("cap %d pods %d failed %d elapsed %v  100:%.2f 130:%.2f", capMilli, len(w), res.Failed, res.Elapsed, c[100], c[130])
}
