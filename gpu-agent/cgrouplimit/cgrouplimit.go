// Package cgrouplimit puts a GPU share's memory limit on its pod's cgroup through the NVIDIA
// driver's per-cgroup device memory limit (nvmlDeviceSetMemoryLimits_v1, driver r615 and later),
// which the kernel's dmem cgroup controller (Linux 6.14 and later), or the driver's own
// per-cgroup accounting on older kernels, enforces for every CUDA context of the cgroup's
// processes: also for a process that loads neither MPS nor the share library (a static binary,
// its own loader, its own ioctls), which nothing else in a share's container stops
// (docs/isolation.md, "What holds against an unprivileged tenant").
//
// The limit goes on the pod's cgroup, not a container's: the kubelet makes the pod's cgroup
// before any of its containers, so the device plugin can set it in PreStartContainer, before
// the container's processes exist; a container's own cgroup is made by the runtime only after
// that call. The pod's cgroup holds every container of the pod, so the limit is one per pod,
// the way a share is counted. NVIDIA's MPS v3 memory-partitioning page says how the two
// backends nest (<https://docs.nvidia.com/deploy/mps/latest/mpsv3-memory-partitioning.html>):
// the kernel charges a container's allocations to every ancestor, the pod's limit included;
// the driver's fallback applies the nearest limited ancestor's limit.
//
// Only the hard limit is set; the soft limit stays 0. The soft limit is a reservation the driver
// propagates to every ancestor's dmem.min and takes back only when it is lowered through NVML
// before the cgroup goes, which the kubelet's removal of a pod's cgroup does not do, so
// kubepods' reservations would only grow; and the scheduler keeps a GPU's shares within its
// memory, so each share's hard limit is already room its neighbours cannot take. Nothing is
// removed when the pod goes: removing the cgroup clears its limits (nvmlSetMemoryLimits_v1_t).
package cgrouplimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
)

// DefaultRoot is the host's cgroup v2 mount, where NVIDIA documents the limit.
const DefaultRoot = "/sys/fs/cgroup"

// ErrUnsupported: the driver has no per-cgroup memory limit for the GPU (older than r615, a
// MIG device, or a library that cannot say); the share keeps the share library's limit only.
var ErrUnsupported = errors.New("the NVIDIA driver has no per-cgroup GPU memory limit (nvmlDeviceSetMemoryLimits_v1, r615 and later)")

// kubeletParents are the kubelet's pod parents under the cgroup root, for the systemd and the
// cgroupfs cgroup driver: Guaranteed pods sit directly in the first, the others in their QoS
// class's child.
var kubeletParents = []string{"kubepods.slice", "kubepods"}

// PodDirs are the directories the pod uid's cgroup has under root, one per kubelet cgroup
// driver and QoS class: systemd writes the UID with underscores, since "-" separates its
// slice levels.
func PodDirs(root string, uid types.UID) []string {
	u := string(uid)
	s := strings.ReplaceAll(u, "-", "_")
	return []string{
		filepath.Join(root, "kubepods.slice", "kubepods-pod"+s+".slice"),
		filepath.Join(root, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+s+".slice"),
		filepath.Join(root, "kubepods.slice", "kubepods-besteffort.slice", "kubepods-besteffort-pod"+s+".slice"),
		filepath.Join(root, "kubepods", "pod"+u),
		filepath.Join(root, "kubepods", "burstable", "pod"+u),
		filepath.Join(root, "kubepods", "besteffort", "pod"+u),
	}
}

// PodDir is the pod uid's cgroup directory under root, for either kubelet cgroup driver.
func PodDir(root string, uid types.UID) (string, error) {
	var found []string
	for _, d := range PodDirs(root, uid) {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("pod %s has no cgroup under %s (looked for the kubelet's systemd and cgroupfs layouts: kubepods.slice/..., kubepods/...; is --cgroup-root the host's cgroup v2 mount, under the kubelet's own --cgroup-root?)", uid, root)
	}
	return "", fmt.Errorf("pod %s has %d cgroups under %s: %s", uid, len(found), root, strings.Join(found, ", "))
}

// Limiter sets share limits on pods' cgroups.
type Limiter struct {
	// Root is the host's cgroup v2 mount as the agent sees it (DefaultRoot when empty).
	Root string
	// Device returns the node's GPU of that UUID.
	Device func(uuid string) (gpu.Device, error)
}

func (l *Limiter) root() string {
	if l.Root == "" {
		return DefaultRoot
	}
	return l.Root
}

func (l *Limiter) limiter(uuid string) (gpu.MemoryLimiter, error) {
	d, err := l.Device(uuid)
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %w", uuid, err)
	}
	m, ok := d.(gpu.MemoryLimiter)
	if !ok {
		return nil, fmt.Errorf("GPU %s: %w", uuid, ErrUnsupported)
	}
	return m, nil
}

// Supported reports whether the driver offers the limit on the GPU uuid, by reading the limits
// of the kubelet's pods cgroup (of the root where the node has none): a driver without the
// function answers ErrUnsupported. Any other failure says the driver has it (a share is then
// refused rather than started without its limit) and is returned for the log.
func (l *Limiter) Supported(uuid string) (bool, error) {
	ok, _, err := l.probe(uuid)
	return ok, err
}

// probe is Supported, with the driver's answer (wrapping ErrUnsupported) when it has no limit.
func (l *Limiter) probe(uuid string) (ok bool, unsupported, err error) {
	m, err := l.limiter(uuid)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return false, err, nil
		}
		return false, nil, err
	}
	dir := l.root()
	for _, p := range kubeletParents {
		if st, err := os.Stat(filepath.Join(dir, p)); err == nil && st.IsDir() {
			dir = filepath.Join(dir, p)
			break
		}
	}
	if _, err := m.MemoryLimits(dir); err != nil {
		if errors.Is(err, gpu.ErrNotSupported) {
			return false, fmt.Errorf("GPU %s: %w: %w", uuid, ErrUnsupported, err), nil
		}
		return true, nil, fmt.Errorf("reading the GPU memory limits of %s: %w", dir, err)
	}
	return true, nil, nil
}

// Set puts the hard limit of hard bytes on the GPU uuid on the cgroup of pod uid and reads it
// back; it returns the cgroup's directory. Where the driver has no such limit it fails with
// ErrUnsupported; every other failure means the limit is not in place.
func (l *Limiter) Set(uid types.UID, uuid string, hard uint64) (string, error) {
	if hard == 0 || hard == gpu.NoMemoryLimit {
		return "", fmt.Errorf("pod %s: no GPU memory limit to set on GPU %s (%d bytes)", uid, uuid, hard)
	}
	// The driver first: where it has no per-cgroup limit the pod's cgroup is never needed, and
	// an agent that cannot see the kubelet's cgroups (a node whose kubelet runs in a container
	// of its own, an agent without the host's cgroup mount) must not refuse the share for it.
	if ok, unsupported, err := l.probe(uuid); !ok {
		if err != nil {
			return "", err
		}
		return "", unsupported
	}
	dir, err := PodDir(l.root(), uid)
	if err != nil {
		return "", err
	}
	_, err = l.SetDir(dir, uuid, hard)
	return dir, err
}

// SetDir puts the hard limit of hard bytes on the GPU uuid on the cgroup directory dir and
// returns what reads back; ErrUnsupported as Set.
func (l *Limiter) SetDir(dir, uuid string, hard uint64) (gpu.MemoryLimits, error) {
	if hard == 0 || hard == gpu.NoMemoryLimit {
		return gpu.MemoryLimits{}, fmt.Errorf("no GPU memory limit to set on %s on GPU %s (%d bytes)", dir, uuid, hard)
	}
	m, err := l.limiter(uuid)
	if err != nil {
		return gpu.MemoryLimits{}, err
	}
	if err := m.SetMemoryLimits(dir, 0, hard); err != nil {
		if errors.Is(err, gpu.ErrNotSupported) {
			return gpu.MemoryLimits{}, fmt.Errorf("GPU %s: %w: %w", uuid, ErrUnsupported, err)
		}
		return gpu.MemoryLimits{}, fmt.Errorf("setting the GPU memory limit of %s on GPU %s to %d bytes%s: %w", dir, uuid, hard, hint(dir), err)
	}
	got, err := m.MemoryLimits(dir)
	if err != nil {
		return got, fmt.Errorf("reading back the GPU memory limit of %s on GPU %s: %w", dir, uuid, err)
	}
	if got.Hard == 0 || got.Hard > hard {
		return got, fmt.Errorf("the GPU memory limit of %s on GPU %s reads back as %d bytes, not %d", dir, uuid, got.Hard, hard)
	}
	return got, nil
}

// Backend names what enforces a limit set on dir: the kernel's dmem controller where the cgroup
// has its files, else the driver's own per-cgroup accounting (NVIDIA's "misc" backend).
func Backend(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "dmem.max")); err == nil {
		return "dmem"
	}
	return "misc"
}

// hint says what a cgroup without dmem files lacks: under the kernel's dmem controller NVML can
// set limits only on a cgroup whose parent enabled the controller for its children.
func hint(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "dmem.max")); err == nil {
		return ""
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil && !slices.Contains(strings.Fields(string(b)), "dmem") {
		return " (it has no dmem.max: where the kernel has the dmem controller, every ancestor down to the pod's cgroup must list dmem in cgroup.subtree_control)"
	}
	return ""
}
