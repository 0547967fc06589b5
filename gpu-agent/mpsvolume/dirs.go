package mpsvolume

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Modes of the directories. The ancestors of a pod's directories can be crossed but not listed:
// the pod's MPS server, which runs as the pod's user in the agent's mount namespace, reaches its
// pipe and log directories through them. A pod's /dev/shm and log directory are its user's alone
// when the pod says which user it runs as; otherwise (the image's user, unknown to the kubelet and
// the agent) they are like any container's /dev/shm: anyone inside the pod may write, sticky. The
// pipe directory is always the agent's and sticky: the pod's processes and its server (the pod's
// user) create their entries there, but no process of the pod can remove or replace the control
// pipe the daemon (the agent's user) made, and so none can serve the directory with a daemon of
// its own, without the pod's limits. The directories are mounted into that pod only, so no other
// pod reaches them.
const (
	ancestorMode os.FileMode = 0o711
	ownMode      os.FileMode = 0o700
	ownGroupMode os.FileMode = 0o770
	anyUserMode  os.FileMode = 0o777 | os.ModeSticky
)

// podDirs makes the pod's directories once and returns its state (callers hold d.mu).
func (d *Driver) podDirs(pod *corev1.Pod) (*podState, error) {
	if ps := d.pods[pod.UID]; ps != nil {
		return ps, nil
	}
	dir := filepath.Join(d.opts.Root, "pods", string(pod.UID))
	for _, a := range []string{d.opts.Root, filepath.Join(d.opts.Root, "pods"), dir} {
		if err := os.MkdirAll(a, ancestorMode); err != nil {
			return nil, err
		}
		if err := os.Chmod(a, ancestorMode); err != nil {
			return nil, err
		}
	}
	uid, gid, known := owner(pod)
	ownerMode := anyUserMode
	switch {
	case known && gid > 0:
		ownerMode = ownGroupMode
	case known:
		ownerMode = ownMode
	}
	for _, leaf := range []string{fairwayv1.MPSVolumePipe, fairwayv1.MPSVolumeSharedMemory, "log"} {
		mode, chown := ownerMode, known
		if leaf == fairwayv1.MPSVolumePipe {
			mode, chown = anyUserMode, false
		}
		p := filepath.Join(dir, leaf)
		if err := os.MkdirAll(p, ownMode); err != nil {
			return nil, err
		}
		// The pod's /dev/shm is a tmpfs of its own, of the pod's size: a pod that fills it
		// fills neither the node's /run nor another pod's.
		if leaf == fairwayv1.MPSVolumeSharedMemory {
			if err := d.opts.Mounter.Tmpfs(p, d.sharedMemoryBytes(pod)); err != nil {
				return nil, err
			}
		}
		if chown {
			if err := os.Chown(p, int(uid), int(gid)); err != nil {
				return nil, fmt.Errorf("giving %s to %d:%d: %w", p, uid, gid, err)
			}
		}
		// Chmod after MkdirAll: the umask does not apply, and the sticky bit needs it.
		if err := os.Chmod(p, mode); err != nil {
			return nil, err
		}
	}
	ps := &podState{dir: dir, targets: map[string]string{}}
	d.pods[pod.UID] = ps
	return ps, nil
}

// sharedMemoryBytes is the size of the pod's /dev/shm: the volume's size attribute (the
// emptyDir it replaced), else the GPU container's memory limit, else the driver's default.
func (d *Driver) sharedMemoryBytes(pod *corev1.Pod) int64 {
	for _, v := range pod.Spec.Volumes {
		if v.CSI == nil || v.CSI.Driver != fairwayv1.MPSDriverName || v.CSI.VolumeAttributes[fairwayv1.MPSVolumeAttribute] != fairwayv1.MPSVolumeSharedMemory {
			continue
		}
		if q, err := resource.ParseQuantity(v.CSI.VolumeAttributes[fairwayv1.MPSSharedMemorySizeAttribute]); err == nil && q.Value() > 0 {
			return q.Value()
		}
	}
	if c := gpuContainer(pod); c != nil {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Value() > 0 {
			return q.Value()
		}
	}
	return d.opts.SharedMemoryBytes
}

// gpuContainer is the pod's GPU container (fairway.dev/gpu-container), else its first.
func gpuContainer(pod *corev1.Pod) *corev1.Container {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == pod.Annotations[fairwayv1.GPUContainerAnnotation] || c == nil {
			c = &pod.Spec.Containers[i]
		}
	}
	return c
}

// owner is the user and group the pod's GPU container runs as, from its security context over
// the pod's (the group falls back to the pod's fsGroup, which the kubelet also applies to the
// volume); known is false when neither names a user.
func owner(pod *corev1.Pod) (uid, gid int64, known bool) {
	c := gpuContainer(pod)
	var u, g *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		u, g = psc.RunAsUser, psc.RunAsGroup
		if g == nil {
			g = psc.FSGroup
		}
	}
	if c != nil && c.SecurityContext != nil {
		if c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		}
		if c.SecurityContext.RunAsGroup != nil {
			g = c.SecurityContext.RunAsGroup
		}
	}
	if u == nil {
		return 0, 0, false
	}
	if g != nil {
		gid = *g
	}
	return *u, gid, true
}
