//go:build unix && !linux

package cluster

import "syscall"

// childSysProcAttr puts a child in its own process group so Stop can signal everything it
// spawned. Only Linux offers a parent-death signal; elsewhere children of a killed test binary
// may outlive it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
