package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fairway-sched/fairway/test/cluster"
)

// TestDescribePools: the start line describes the nodes the demo starts, from the -nodes file
// when there is one, not always the default's four H100 nodes.
func TestDescribePools(t *testing.T) {
	a100 := cluster.NodePool{Name: "a100", Count: 1, GPUType: "A100", GPUsPerNode: 4}
	cpu := cluster.NodePool{Name: "cpu", Count: 2}
	for _, tc := range []struct {
		pools []cluster.NodePool
		want  string
	}{
		{[]cluster.NodePool{cluster.H100Pool(4)}, "4 fake nodes of 8 H100 GPUs"},
		{[]cluster.NodePool{a100, cpu}, "1 fake node of 4 A100 GPUs, 2 fake nodes without GPUs"},
	} {
		if got := describePools(tc.pools); got != tc.want {
			t.Errorf("describePools = %q, want %q", got, tc.want)
		}
	}
}

// TestKeepLogs: a failed demo's component logs survive the cluster's clean-up.
func TestKeepLogs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver.log"), []byte("started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, err := keepLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(kept)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "kube-apiserver.log")); err != nil || string(b) != "started\n" {
		t.Errorf("kept log: %q, %v", b, err)
	}
}
