package mps

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// fakeControl behaves like nvidia-cuda-mps-control as far as the agent can tell: with -f it
// creates the control pipe and runs until told to quit; without arguments it reads one command
// from stdin.
const fakeControl = `#!/bin/sh
if [ "$1" = "-f" ]; then
  echo "pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" > "$CUDA_MPS_LOG_DIRECTORY/env"
  echo $$ > "$CUDA_MPS_LOG_DIRECTORY/pid"
  touch "$CUDA_MPS_PIPE_DIRECTORY/control"
  while [ ! -f "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done
  rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" "$CUDA_MPS_PIPE_DIRECTORY/quit"
  echo quit >> "$CUDA_MPS_LOG_DIRECTORY/commands"
  exit 0
fi
read cmd
echo "$cmd" >> "$CUDA_MPS_LOG_DIRECTORY/commands"
case "$cmd" in
  quit) touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
  get_server_list) if [ -n "$EXTERNAL" ]; then exit 0; fi; exit 1 ;;
esac
`

func fakeBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	p := filepath.Join(t.TempDir(), DefaultBinary)
	if err := os.WriteFile(p, []byte(fakeControl), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSoftMode(t *testing.T) {
	for name, opts := range map[string]Options{
		"disabled":       {Enabled: false},
		"binary missing": {Enabled: true, Binary: "/nonexistent/" + DefaultBinary},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts.PipeDir, opts.LogDir, opts.Log = filepath.Join(dir, "pipe"), filepath.Join(dir, "log"), testr.New(t)
			d := New(opts)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- d.Start(ctx) }()
			waitFor(t, "soft mode", func() bool { return d.Status().Reason != "not started" })
			if s := d.Status(); s.Enabled || s.Reason == "" {
				t.Errorf("status = %+v, want soft mode with a reason", s)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
}

func TestSuperviseDaemon(t *testing.T) {
	dir := t.TempDir()
	pipe, logDir := filepath.Join(dir, "pipe"), filepath.Join(dir, "log")
	d := New(Options{Enabled: true, Binary: fakeBinary(t), PipeDir: pipe, LogDir: logDir, MaxBackoff: 100 * time.Millisecond, Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Start(ctx) }()

	waitFor(t, "MPS enabled", func() bool { return d.Status().Enabled })
	env, _ := os.ReadFile(filepath.Join(logDir, "env"))
	if want := "pipe=" + pipe + " log=" + logDir; strings.TrimSpace(string(env)) != want {
		t.Errorf("daemon env = %q, want %q", env, want)
	}

	// The daemon dies: soft mode is reported, then it is restarted.
	pid, _ := os.ReadFile(filepath.Join(logDir, "pid"))
	_ = os.Remove(filepath.Join(pipe, "control"))
	if err := exec.Command("kill", strings.TrimSpace(string(pid))).Run(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart", func() bool {
		p, _ := os.ReadFile(filepath.Join(logDir, "pid"))
		return string(p) != string(pid) && d.Status().Enabled
	})

	// The agent stops: the daemon is asked to quit.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if cmds, _ := os.ReadFile(filepath.Join(logDir, "commands")); !strings.Contains(string(cmds), "quit") {
		t.Errorf("daemon was not asked to quit; commands: %q", cmds)
	}
	if d.Status().Enabled {
		t.Error("still enabled after stop")
	}
}

func TestAdoptRunningDaemon(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "pipe")
	if err := os.MkdirAll(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pipe, "control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXTERNAL", "1") // the fake answers get_server_list: a daemon already runs
	d := New(Options{Enabled: true, Binary: fakeBinary(t), PipeDir: pipe, LogDir: filepath.Join(dir, "log"), Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Start(ctx) }()
	waitFor(t, "adoption", func() bool { return d.Status().Enabled })
	if _, err := os.Stat(filepath.Join(dir, "log", "pid")); err == nil {
		t.Error("a second daemon was started next to the running one")
	}
}

// The server-side limits are set before the daemon counts as ready, so before any client of the
// pod can reach it, and the daemon sees only the pod's GPU.
func TestSetupBeforeReady(t *testing.T) {
	dir := t.TempDir()
	pipe, logDir := filepath.Join(dir, "pipe"), filepath.Join(dir, "log")
	d := New(Options{Enabled: true, Binary: fakeBinary(t), PipeDir: pipe, LogDir: logDir, Devices: []string{"GPU-1"},
		Setup: Limits([]string{"GPU-1"}, 1024, 25), Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Start(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := d.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	cmds, _ := os.ReadFile(filepath.Join(logDir, "commands"))
	if want := "set_default_device_pinned_mem_limit GPU-1 1024M\nset_default_active_thread_percentage 25\n"; string(cmds) != want {
		t.Errorf("commands before ready = %q, want %q", cmds, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}

	// Without the binary WaitReady says so at once.
	s := New(Options{Enabled: true, Binary: "/nonexistent/x", PipeDir: pipe, LogDir: logDir, Log: testr.New(t)})
	go func() { _ = s.Start(t.Context()) }()
	if err := s.WaitReady(t.Context()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("WaitReady without the binary: %v", err)
	}
}
