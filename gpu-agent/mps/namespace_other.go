//go:build !linux

package mps

import (
	"errors"
	"os/exec"
)

// ExecCommand is the hidden `fairway agent` subcommand that runs ExecWithSharedMemory.
const ExecCommand = "mps-exec"

// SharedMemoryLauncher needs Linux mount namespaces; elsewhere the daemon cannot start.
func SharedMemoryLauncher(_, _ string) func(bin string, args ...string) *exec.Cmd {
	return func(bin string, args ...string) *exec.Cmd { return exec.Command("/nonexistent/"+bin, args...) }
}

// ExecWithSharedMemory needs Linux mount namespaces.
func ExecWithSharedMemory(_, _ string, _ []string) error {
	return errors.New("MPS with a per-pod /dev/shm needs Linux")
}
