package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// ProcessSpec describes a process the cluster runs and stops, such as a control-plane component,
// an operator, or one of fairway's own binaries.
type ProcessSpec struct {
	// Name identifies the process in logs; its output goes to <log dir>/<Name>.log. Required and
	// unique within a cluster.
	Name string
	// Path is the binary. A bare name (no slash) is looked up in the cluster's BinDir.
	Path string
	// Args are the command-line arguments.
	Args []string
	// Env is added to the test's environment (KEY=VALUE). KUBECONFIG is always set to the
	// cluster's admin kubeconfig unless Env sets it.
	Env []string
	// Dir is the working directory; the cluster's work directory when empty.
	Dir string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL; 10s when zero.
	StopTimeout time.Duration
}

// Process is a running child process. Its whole process group is signalled on Stop, so helpers
// it spawned die with it, and on Linux the kernel kills it when the test binary dies.
type Process struct {
	name        string
	cmd         *exec.Cmd
	logPath     string
	logFile     *os.File
	stopTimeout time.Duration
	done        chan struct{}
	waitErr     error
	log         logr.Logger
}

// startProcess starts spec with its output in logDir. The returned Process is running; Done is
// closed when it exits.
func startProcess(spec ProcessSpec, logDir string, log logr.Logger) (*Process, error) {
	if spec.Name == "" || spec.Path == "" {
		return nil, errors.New("process spec needs a name and a path")
	}
	logPath := filepath.Join(logDir, spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", spec.Name, err)
	}
	fmt.Fprintf(logFile, "+ %s %s\n", spec.Path, strings.Join(spec.Args, " "))

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &Process{
		name:        spec.Name,
		cmd:         cmd,
		logPath:     logPath,
		logFile:     logFile,
		stopTimeout: spec.StopTimeout,
		done:        make(chan struct{}),
		log:         log.WithValues("process", spec.Name, "pid", cmd.Process.Pid),
	}
	if p.stopTimeout == 0 {
		p.stopTimeout = 10 * time.Second
	}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	p.log.V(1).Info("started", "log", logPath)
	return p, nil
}

// Name returns the name the process was started with.
func (p *Process) Name() string { return p.name }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file that holds the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and if so with which error (nil for status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// exitError describes an unexpected exit with the tail of the process's log, so a failing
// start says why without opening files.
func (p *Process) exitError() error {
	return fmt.Errorf("%s exited early (%w); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, p.Tail(20))
}

// Tail returns up to n last lines of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Stop sends SIGTERM to the process group, waits up to the stop timeout, then sends SIGKILL to
// the group. It returns nil when the process exits on its own accord or because of the signal.
// The group is only signalled while its leader is known to be unreaped, so a recycled process id
// is never hit.
func (p *Process) Stop() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	signalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(p.stopTimeout):
		p.log.Info("did not stop in time; killing", "timeout", p.stopTimeout)
		signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.log.V(1).Info("stopped")
	return nil
}

// signalGroup signals the process group led by pid; errors (the group is gone) are ignored.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// copyFile copies src to dst, creating dst's directory.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// CPUSeconds is the CPU time (user and system) process pid has used, from /proc (0 where there
// is none): read before and after a burst, the difference is what the burst cost it.
func CPUSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	// Fields 14 and 15 of stat (utime, stime), in clock ticks: 100 a second on Linux (USER_HZ).
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// RSSKiB is process pid's resident memory in KiB (VmRSS), from /proc (0 where there is none).
func RSSKiB(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib
		}
	}
	return 0
}
