package mpsvolume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// bindMounter bind-mounts in the agent's mount namespace; the chart shares the kubelet's pods
// directory with it (mountPropagation: Bidirectional), so the kubelet and the container runtime
// see the mounts.
type bindMounter struct{}

func (bindMounter) Bind(src, target string, readOnly bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	if same(src, target) {
		return nil
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount: %w", err)
	}
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("", target, "", flags, ""); err != nil {
		_ = syscall.Unmount(target, syscall.MNT_DETACH)
		return fmt.Errorf("remounting nosuid,nodev,noexec: %w", err)
	}
	return nil
}

func (bindMounter) Unmount(target string) error {
	err := syscall.Unmount(target, 0)
	if errors.Is(err, syscall.EBUSY) {
		// Still open somewhere (a daemon's last file): detach it, the kernel frees it when
		// the last user goes.
		err = syscall.Unmount(target, syscall.MNT_DETACH)
	}
	if err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// same reports whether target already shows src (the same directory: a publish repeated).
func same(src, target string) bool {
	a, err1 := os.Stat(src)
	b, err2 := os.Stat(target)
	if err1 != nil || err2 != nil {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func (bindMounter) Tmpfs(dir string, sizeBytes int64) error {
	if mountPoint(dir) {
		return nil
	}
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if err := syscall.Mount("fairway-mps-shm", dir, "tmpfs", flags, fmt.Sprintf("size=%d", sizeBytes)); err != nil {
		return fmt.Errorf("mounting a tmpfs of %d bytes at %s: %w", sizeBytes, dir, err)
	}
	return nil
}

// mountPoint reports whether dir is on another device than its parent.
func mountPoint(dir string) bool {
	a, err1 := os.Stat(dir)
	b, err2 := os.Stat(filepath.Dir(dir))
	if err1 != nil || err2 != nil {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev != sb.Dev
}
