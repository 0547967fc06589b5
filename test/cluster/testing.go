package cluster

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/go-logr/logr/testr"
)

// StartT starts a cluster for a test and registers its cleanup: the cluster is stopped when the
// test ends, and when the test failed every component log is first copied to
// <repo root>/test/e2e/_artifacts/<test name>/ (git-ignored), and the path is logged. A start
// failure fails the test at once, with the logs rescued the same way. Unset cfg.Logger logs
// through t.
func StartT(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = testr.NewWithInterface(t, testr.Options{})
	}
	c, err := start(context.Background(), cfg)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() || err != nil {
				c.stopProcesses()
				saveLogs(t, c.logDir)
			}
			if err := c.Stop(); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	return c
}

// ArtifactsDir returns <repo root>/test/e2e/_artifacts/<test name>, where StartT keeps the
// logs of failed tests. Subtest slashes and other odd characters become underscores.
func ArtifactsDir(t testing.TB) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	name := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(t.Name(), "_")
	return filepath.Join(root, "test", "e2e", "_artifacts", name), nil
}

// saveLogs copies the log files of a failed test into its artifacts directory.
func saveLogs(t testing.TB, logDir string) {
	dst, err := ArtifactsDir(t)
	if err != nil {
		t.Logf("not keeping the component logs of %s: %v", logDir, err)
		return
	}
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Logf("not keeping the component logs: %v", err)
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := copyFile(filepath.Join(logDir, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Logf("keeping %s: %v", e.Name(), err)
		}
	}
	t.Logf("component logs kept in %s", dst)
}
