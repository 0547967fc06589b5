//go:build e2enodes

package nodes

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-logr/logr/testr"
)

// TestReapOrphans creates (never starts: no node image needed) one container as a killed
// test's Start left it and one as a live process's, and checks that only the first and its
// directory go.
func TestReapOrphans(t *testing.T) {
	if err := RequireDocker(); err != nil {
		t.Fatal(err)
	}
	const image = "fairway.local/reap-test:empty"
	imp := exec.Command("docker", "import", "-", image)
	imp.Stdin = emptyTar()
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphanDir, err := os.MkdirTemp("", "fwn-reaptest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(orphanDir) })
	liveDir := t.TempDir()
	create := func(name, owner, dir string) {
		t.Helper()
		out, err := exec.Command("docker", "create", "--name", name,
			"--label", LabelNode+"="+name, "--label", labelOwner+"="+owner,
			"--label", labelNet+"=", "--label", labelDir+"="+dir,
			image, "/none").CombinedOutput()
		if err != nil {
			t.Fatalf("docker create %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	}
	suffix := filepath.Base(orphanDir)
	orphan, live := "fairway-node-orphan-"+suffix, "fairway-node-live-"+suffix
	create(orphan, strconv.Itoa(dead.Process.Pid)+"-1", orphanDir)
	create(live, ownerToken, liveDir)

	removed, err := reapOrphans(context.Background(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != orphan {
		t.Errorf("removed %v, want [%s]", removed, orphan)
	}
	if exists(orphan) {
		t.Errorf("%s (owner gone) still exists", orphan)
	}
	if !exists(live) {
		t.Errorf("%s (owner alive) was removed", live)
	}
	if _, err := os.Stat(orphanDir); !os.IsNotExist(err) {
		t.Errorf("the orphan's directory %s: %v, want removed", orphanDir, err)
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Errorf("the live container's directory: %v", err)
	}
}

func exists(container string) bool {
	return exec.Command("docker", "inspect", container).Run() == nil
}

// emptyTar is a tar archive of no files (two zero blocks), which docker import takes as an
// empty image.
func emptyTar() *bytes.Reader { return bytes.NewReader(make([]byte, 1024)) }
