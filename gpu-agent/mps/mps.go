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
	// SharedMemoryDir, when set, is the directory the daemon and the servers it starts see as
	// /dev/shm, where MPS servers and their clients share memory: the client pod's own /dev/shm,
	// so that no other pod shares it. The daemon then runs in a mount namespace of its own
	// (Launch must make it so; see Exec).
	SharedMemoryDir string
	// Devices, when set, is the daemon's CUDA_VISIBLE_DEVICES (GPU UUIDs): the only GPUs its
	// servers open.
	Devices []string
	// Setup are control commands sent once the daemon answers, before it is reported enabled
	// and so before any client can connect: the server-side limits of every server it will
	// start (set_default_device_pinned_mem_limit, set_default_active_thread_percentage), which
	// a client's environment can only lower. A command that fails makes the daemon count as
	// failed (it is stopped and restarted).
	Setup []string
	// Launch makes the command that runs the daemon in the foreground (bin -f); exec.Command
	// when nil.
	Launch func(bin string, args ...string) *exec.Cmd
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
	// changed is closed and replaced at every change of status (WaitReady).
	changed chan struct{}
}

// New returns a daemon supervisor; nothing runs before Start.
func New(opts Options) *Daemon {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.Launch == nil {
		opts.Launch = exec.Command
	}
	return &Daemon{opts: opts, status: Status{Reason: "not started"}, changed: make(chan struct{})}
}

// Status reports the current mode; safe for concurrent use.
func (d *Daemon) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

// WaitReady waits until the daemon is up with its Setup applied, or ctx ends, or the daemon
// cannot run at all (soft mode), which it reports.
func (d *Daemon) WaitReady(ctx context.Context) error {
	for {
		d.mu.Lock()
		s, ch := d.status, d.changed
		d.mu.Unlock()
		if s.Enabled {
			return nil
		}
		if terminal(s.Reason) {
			return fmt.Errorf("MPS unavailable: %s", s.Reason)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the MPS control daemon (%s): %w", s.Reason, ctx.Err())
		case <-ch:
		}
	}
}

// terminal reports whether a disabled daemon's reason is one Start does not retry.
func terminal(reason string) bool {
	return strings.HasPrefix(reason, "disabled") || strings.HasSuffix(reason, " not found") ||
		reason == "cannot create MPS directories" || reason == "agent stopping"
}

func (d *Daemon) set(enabled bool, reason string) {
	d.mu.Lock()
	changed := d.status.Enabled != enabled || d.status.Reason != reason
	d.status = Status{Enabled: enabled, Reason: reason}
	if changed {
		close(d.changed)
		d.changed = make(chan struct{})
	}
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
		// Only root (the daemon) and whoever the directory is handed to may enter: the
		// caller makes it and gives it to the client's user (gpu-agent/mpsvolume); made here
		// it is root's alone.
		if err := os.MkdirAll(dir, 0o700); err != nil {
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
			if err := d.setup(ctx, bin); err != nil {
				d.set(false, "setup failed")
				d.opts.Log.Error(err, "Configuring the running MPS control daemon")
			} else {
				d.set(true, "")
				d.watchExternal(ctx, bin)
				continue
			}
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
	cmd := d.opts.Launch(bin, "-f")
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
					if err := d.setup(ctx, bin); err != nil {
						// Clients must never reach a server without its limits.
						_ = cmd.Process.Kill()
						<-exited //nolint:errcheck // killed on purpose
						return err
					}
					d.set(true, "")
				}
			}
		}
	}
}

// setup sends the Setup commands.
func (d *Daemon) setup(ctx context.Context, bin string) error {
	for _, c := range d.opts.Setup {
		if err := d.control(ctx, bin, c); err != nil {
			return fmt.Errorf("setting up the MPS control daemon: %w", err)
		}
	}
	return nil
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
	env := append(os.Environ(),
		"CUDA_MPS_PIPE_DIRECTORY="+d.opts.PipeDir,
		"CUDA_MPS_LOG_DIRECTORY="+d.opts.LogDir,
	)
	if len(d.opts.Devices) > 0 {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(d.opts.Devices, ","))
	}
	return env
}

// Limits are the server-side limits of every MPS server a daemon starts, as control commands
// (Options.Setup): the device pinned memory limit of each client on each device (MiB, none when
// 0) and the default active thread percentage (none when 0 or 100). The MPS documentation
// (docs.nvidia.com/deploy/mps, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) says a client's own environment can only lower these.
func Limits(devices []string, memoryMiB int64, threadPercent int) []string {
	var out []string
	if memoryMiB > 0 {
		for _, dev := range devices {
			out = append(out, fmt.Sprintf("set_default_device_pinned_mem_limit %s %dM", dev, memoryMiB))
		}
	}
	if threadPercent > 0 && threadPercent < 100 {
		out = append(out, fmt.Sprintf("set_default_active_thread_percentage %d", threadPercent))
	}
	return out
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
