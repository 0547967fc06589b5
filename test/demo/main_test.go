package main

import (
	"os"
	"path/filepath"
	"testing"
)

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
