package mps

import (
	"fmt"
	"os"
	"os/exec"
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

// ExecWithSharedMemory is the child's side of SharedMemoryLauncher: in its own mount namespace
// it bind-mounts dir over /dev/shm and replaces itself with bin.
func ExecWithSharedMemory(dir, bin string, args []string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return err
	}
	if err := syscall.Mount(dir, "/dev/shm", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s at /dev/shm: %w", dir, err)
	}
	return syscall.Exec(path, append([]string{bin}, args...), os.Environ())
}
