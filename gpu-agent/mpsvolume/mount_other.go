//go:build !linux

package mpsvolume

import "errors"

type bindMounter struct{}

func (bindMounter) Bind(string, string, bool) error {
	return errors.New("bind mounts need Linux")
}

func (bindMounter) Unmount(string) error { return nil }

func (bindMounter) Tmpfs(string, int64) error { return errors.New("tmpfs mounts need Linux") }
