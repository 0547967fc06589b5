package mps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// DefaultBinary is the control daemon's name, looked up in PATH.
const DefaultBinary = "nvidia-cuda-mps-control"

// Options configure the daemon.
type Options struct {
	// Enabled is false to run in soft mode on purpose (--mps=false).
	Enabled bool
	// Binary is the control daemon, a path or a name looked up in PATH; DefaultBinary when
	// empty.
	Binary string
	// PipeDir is CUDA_MPS_PIPE_DIRECTORY: the daemon's control pipe, which MPS clients (the
	// fractional pods) must see at the same path.
	PipeDir string
	// LogDir is CUDA_MPS_LOG_DIRECTORY.
	LogDir string
	// MaxBackoff caps the delay between restarts of a dying daemon; 30s when zero.
	MaxBackoff time.Duration
	// OnChange, if set, is called after every change of Status (the agent re-publishes the
	// inventory's mps field). It must not block.
	OnChange func(Status)
	Log      logr.Logger
}

// Status is whether fractional pods on this node get hard limits, and why not.
type Status struct {
	Enabled bool
	// Reason explains a disabled daemon: "disabled", "binary not found", "daemon exited", ...
	Reason string
}

// Daemon supervises the MPS control daemon. It implements manager.Runnable.
type Daemon struct {
	opts Options

	mu     sync.Mutex
	status Status
}

// New returns a daemon supervisor; nothing runs before Start.
func New(opts Options) *Daemon {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	return &Daemon{opts: opts, status: Status{Reason: "not started"}}
}

// Status reports the current mode; safe for concurrent use.
func (d *Daemon) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

func (d *Daemon) set(enabled bool, reason string) {
	d.mu.Lock()
	changed := d.status.Enabled != enabled || d.status.Reason != reason
	d.status = Status{Enabled: enabled, Reason: reason}
	d.mu.Unlock()
	if !changed {
		return
	}
	if d.opts.OnChange != nil {
		d.opts.OnChange(Status{Enabled: enabled, Reason: reason})
	}
	if enabled {
		d.opts.Log.Info("MPS enabled: fractional pods get hard GPU memory limits", "pipeDirectory", d.opts.PipeDir)
	} else {
		d.opts.Log.Info("MPS not running: soft mode, fractional pods' GPU memory limits rely on the application", "reason", reason)
	}
}

// NeedLeaderElection is false: every node runs its own daemon.
func (d *Daemon) NeedLeaderElection() bool { return false }

// Start runs and supervises the daemon until ctx ends, then asks it to quit. In soft mode it
// only waits for ctx. It returns an error only when the MPS directories cannot be made.
func (d *Daemon) Start(ctx context.Context) error {
	if !d.opts.Enabled {
		d.set(false, "disabled (--mps=false)")
		<-ctx.Done()
		return nil
	}
	bin, err := exec.LookPath(d.opts.Binary)
	if err != nil {
		d.set(false, fmt.Sprintf("%s not found", d.opts.Binary))
		<-ctx.Done()
		return nil
	}
	for _, dir := range []string{d.opts.PipeDir, d.opts.LogDir} {
		// Clients in pods, of any UID, reach the control pipe through this directory.
		if err := os.MkdirAll(dir, 0o777); err != nil {
			d.set(false, "cannot create MPS directories")
			return fmt.Errorf("creating MPS directory %s: %w", dir, err)
		}
	}
	initial := min(time.Second, d.opts.MaxBackoff)
	backoff := initial
	for ctx.Err() == nil {
		started := time.Now()
		if d.control(ctx, bin, "get_server_list") == nil {
			// A daemon of an earlier agent (or of the host) already serves this pipe
			// directory: use it, and watch that it keeps answering.
			d.set(true, "")
			d.watchExternal(ctx, bin)
			continue
		}
		err := d.run(ctx, bin)
		if ctx.Err() != nil {
			break
		}
		d.set(false, "daemon exited")
		d.opts.Log.Error(err, "MPS control daemon exited; restarting", "backoff", backoff.String())
		if time.Since(started) > time.Minute {
			backoff = initial
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, d.opts.MaxBackoff)
	}
	d.set(false, "agent stopping")
	return nil
}

// run starts the daemon in the foreground and returns when it exits; when ctx ends it sends
// quit and waits.
func (d *Daemon) run(ctx context.Context, bin string) error {
	cmd := exec.Command(bin, "-f")
	cmd.Env = d.env()
	out := &tail{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	ready := time.NewTicker(100 * time.Millisecond)
	defer ready.Stop()
	deadline := time.After(30 * time.Second)
	for up := false; ; {
		select {
		case err := <-exited:
			return fmt.Errorf("daemon exited (%w): %s", err, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			quitCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := d.control(quitCtx, bin, "quit"); err != nil {
				d.opts.Log.Error(err, "Asking the MPS control daemon to quit")
			}
			cancel()
			// The daemon was asked to quit: its exit status says nothing we act on.
			select {
			case <-exited: //nolint:errcheck // exit status of a daemon told to quit
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited //nolint:errcheck // killed on purpose
			}
			return nil
		case <-deadline:
			if !up {
				d.opts.Log.Info("MPS control daemon did not create its control pipe in 30s", "pipeDirectory", d.opts.PipeDir)
			}
		case <-ready.C:
			if !up {
				if _, err := os.Stat(filepath.Join(d.opts.PipeDir, "control")); err == nil {
					up = true
					d.set(true, "")
				}
			}
		}
	}
}

// watchExternal returns once a daemon it did not start stops answering.
func (d *Daemon) watchExternal(ctx context.Context, bin string) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.control(ctx, bin, "get_server_list"); err != nil {
				d.set(false, "external daemon stopped answering")
				return
			}
		}
	}
}

// control sends one command to a running daemon, as `echo cmd | nvidia-cuda-mps-control`.
func (d *Daemon) control(ctx context.Context, bin, command string) error {
	if _, err := os.Stat(filepath.Join(d.opts.PipeDir, "control")); err != nil {
		return errors.New("no control pipe")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = d.env()
	cmd.Stdin = strings.NewReader(command + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (d *Daemon) env() []string {
	return append(os.Environ(),
		"CUDA_MPS_PIPE_DIRECTORY="+d.opts.PipeDir,
		"CUDA_MPS_LOG_DIRECTORY="+d.opts.LogDir,
	)
}

// tail keeps the last max bytes written to it: the daemon's last words, for the log when it
// dies, without growing for as long as it lives.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
