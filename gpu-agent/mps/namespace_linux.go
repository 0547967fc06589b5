package mps

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// ExecCommand is the hidden `fairway agent` subcommand that runs ExecWithSharedMemory.
const ExecCommand = "mps-exec"

// SharedMemoryLauncher is an Options.Launch that runs the daemon through self (the fairway
// binary) `agent mps-exec`, in a mount namespace of its own in which dir is /dev/shm: the MPS
// servers it starts then share memory with their clients in the client pod's /dev/shm, which no
// other pod sees.
func SharedMemoryLauncher(self, dir string) func(bin string, args ...string) *exec.Cmd {
	return func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(self, append([]string{"agent", ExecCommand, "--shared-memory-directory", dir, "--", bin}, args...)...)
		// Go makes the new namespace's mounts private before running the child.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return cmd
	}
}

// ExecWithSharedMemory is the child's side of SharedMemoryLauncher: in a mount namespace of its
// own (made here too, so that it never mounts over the caller's /dev/shm, whoever runs it) it
// bind-mounts dir over /dev/shm and replaces itself with bin.
func ExecWithSharedMemory(dir, bin string, args []string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return err
	}
	// The namespace is the thread's until execve, which takes it to the whole new process.
	runtime.LockOSThread()
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace of its own: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making its mounts private: %w", err)
	}
	if err := syscall.Mount(dir, "/dev/shm", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s at /dev/shm: %w", dir, err)
	}
	return syscall.Exec(path, append([]string{bin}, args...), os.Environ())
}
