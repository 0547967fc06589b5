//go:build e2e

package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// TestDemoPiped is a newcomer's `make demo | less`: the demo without a terminal says it plays
// plain lines, draws a GPU grid whose names are unique, ends with the end-of-story line and the
// KUBECONFIG to use, and, when Ctrl-C ends the pipe's reader first, still stops the cluster and
// removes its files (it ignores SIGPIPE; before, the first write to the closed pipe killed it
// and left the cluster's processes and 135 MB behind).
func TestDemoPiped(t *testing.T) {
	t.Parallel()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(t.TempDir(), "demo")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", demo, "./test/demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/demo: %v\n%s", err, out)
	}
	cmd := exec.Command(demo, "-pace", "0s")
	cmd.Env = append(os.Environ(), fairwayproc.BinaryEnv+"="+buildFairway(t))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var mu sync.Mutex
	var lines []string
	over := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if strings.HasPrefix(sc.Text(), "  export KUBECONFIG=") && slices.ContainsFunc(lines, isStoryOver) {
				close(over)
				return // the reader goes, as less does on Ctrl-C
			}
		}
	}()
	select {
	case <-over:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no end-of-story line within 5 minutes:\n%s", strings.Join(lines, "\n"))
	}
	mu.Lock()
	out := slices.Clone(lines)
	mu.Unlock()
	text := strings.Join(out, "\n")
	if !strings.Contains(text, "No live view (stdout is not a terminal") {
		t.Errorf("the demo did not say it plays plain lines:\n%s", text)
	}
	if strings.Contains(text, "✗ ") {
		t.Errorf("an outcome was not observed:\n%s", text)
	}
	checkGridNamesUnique(t, out)
	kubeconfig := strings.TrimPrefix(out[len(out)-1], "  export KUBECONFIG=")
	clusterDir := filepath.Dir(kubeconfig)
	if _, err := os.Stat(clusterDir); err != nil {
		t.Fatalf("the cluster's directory %s: %v", clusterDir, err)
	}

	// Ctrl-C: the reader has gone; the demo gets SIGINT and writes its goodbye to a closed pipe.
	if err := stdout.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the demo exited with %v after Ctrl-C, want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop within a minute of Ctrl-C")
	}
	if _, err := os.Stat(clusterDir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there after Ctrl-C (%v)", clusterDir, err)
	}
}

func isStoryOver(l string) bool { return strings.HasPrefix(l, "The story is over.") }

// checkGridNamesUnique checks every GPU grid the demo printed (after each act): a name stands
// for one pod, so it may fill several slots of one node (a pod with several GPUs) but never
// appear on two nodes.
func checkGridNamesUnique(t *testing.T, lines []string) {
	t.Helper()
	grids := 0
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "NODE    slot 0") {
			continue
		}
		grids++
		where := map[string]string{}
		for j := i + 1; j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "h100-"); j++ {
			cells := strings.Fields(lines[j])
			node := cells[0]
			for _, c := range cells[1:] {
				if c == "·" || c == "reserved" || strings.Contains(c, "×") {
					continue
				}
				if prev, ok := where[c]; ok && prev != node {
					t.Errorf("grid after line %d: %q stands for more than one pod (on %s and %s):\n%s", i+1, c, prev, node, strings.Join(lines[i:j+1], "\n"))
				}
				where[c] = node
			}
		}
	}
	if grids < 4 {
		t.Errorf("%d GPU grids printed, want one after each of the 4 acts", grids)
	}
}
