package mpsvolume

// Mounter puts a pod's directory at the kubelet's target path and takes it away.
type Mounter interface {
	// Bind mounts src at target (made when missing), nosuid, nodev and noexec, read-only when
	// readOnly; a target that already shows src is left as it is.
	Bind(src, target string, readOnly bool) error
	// Unmount unmounts target; a target that is not mounted (or gone) is not an error.
	Unmount(target string) error
	// Tmpfs mounts a tmpfs of sizeBytes at dir (nosuid, nodev, noexec), unless dir is a mount
	// point already (an earlier agent's).
	Tmpfs(dir string, sizeBytes int64) error
}
