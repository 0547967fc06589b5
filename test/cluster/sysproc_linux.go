package cluster

import "syscall"

// childSysProcAttr puts a child in its own process group (so Stop can signal everything it
// spawned) and asks the kernel to SIGKILL it when the test binary dies, so an interrupted or
// crashed test leaves no control plane behind.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
