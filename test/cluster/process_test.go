package cluster_test

import (
	"os"
	"testing"

	"github.com/fairway-sched/fairway/test/cluster"
)

// The benchmarks and the scale suite read a process's resident memory from /proc: it must see
// this test's own process, and 0 for none.
func TestRSSKiB(t *testing.T) {
	if kib := cluster.RSSKiB(os.Getpid()); kib <= 0 {
		t.Errorf("RSSKiB(self) = %d, want > 0", kib)
	}
	if kib := cluster.RSSKiB(-1); kib != 0 {
		t.Errorf("RSSKiB(no such process) = %d, want 0", kib)
	}
}
