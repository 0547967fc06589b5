package mutatingwebhook

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// EnvVisibleDevices is the NVIDIA container runtime's device-list variable. The webhook takes it
// out of a fractional pod's GPU container: the container's GPU is what the gpu-agent's device
// plugin answers the kubelet, and a runtime that still honours the variable from unprivileged
// containers would otherwise let the pod's author pick another GPU (docs/isolation.md).
const EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// MPSVolumeName and MPSSharedMemoryVolumeName are the volumes that carry the pod's MPS pipe
// directory and its MPS server's shared memory into the GPU container.
const (
	MPSVolumeName             = "fairway-mps-pipe"
	MPSSharedMemoryVolumeName = "fairway-mps-shm"
)

// gpuShare normalizes the pod's GPU-share annotations and, for a fractional pod, chooses the GPU
// container and makes it ask the kubelet for one fairway.dev/gpu-share, which the gpu-agent's
// device plugin answers with the GPU the scheduler chose. Pods that ask for whole GPUs (an
// nvidia.com/gpu limit) and ask for no share are left as they are; a pod that asks for
// fairway.dev/gpu-share itself is refused.
func (d *PodDefaulter) gpuShare(pod *corev1.Pod, w adapters.Workload) ([]string, error) {
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		return nil, err
	}
	if share.IsZero() {
		if c := shareTicket(pod, nil); c != "" {
			return nil, deny("container %q asks for %s, which fairway sets itself: ask for a GPU share with %s or %s",
				c, fairwayv1.ResourceGPUShare, fairwayv1.GPUFractionAnnotation, fairwayv1.GPUMemoryAnnotation)
		}
		return nil, nil
	}
	if w.NoGPU {
		// Workflow-wide metadata reaches helper pods too; they never get a GPU.
		delete(pod.Annotations, fairwayv1.GPUFractionAnnotation)
		delete(pod.Annotations, fairwayv1.GPUMemoryAnnotation)
		return []string{fmt.Sprintf("fairway: %s is ignored on this %s helper pod, which never gets a GPU", share.Key, w.Kind)}, nil
	}
	if c, n := wholeGPUs(pod); c != "" {
		noun := "whole GPUs"
		if n == "1" {
			noun = "whole GPU"
		}
		return nil, deny("%s %q: cannot be combined with container %q asking for %s %s (%s): ask for a GPU share or for whole GPUs, not both",
			share.Key, pod.Annotations[share.Key], c, n, noun, fairwayv1.ResourceGPU)
	}
	var warnings []string
	if share.MemoryMiB > 0 {
		largest := d.state.LargestGPUMemoryMiB()
		switch {
		case largest == 0:
			warnings = append(warnings, fmt.Sprintf("fairway: no node reports %s yet, so %s %q could not be checked against the GPUs of the cluster",
				fairwayv1.GPUMemoryLabel, share.Key, pod.Annotations[share.Key]))
		case share.MemoryMiB > largest:
			return nil, deny("%s %q: must be at most %d MiB, the memory of the largest GPU in the cluster",
				share.Key, pod.Annotations[share.Key], largest)
		}
	}
	container, err := gpuContainer(pod, w.GPUContainer)
	if err != nil {
		return nil, err
	}

	if share.Milli > 0 {
		setAnnotation(pod, fairwayv1.GPUFractionAnnotation, share.Fraction())
	} else {
		setAnnotation(pod, fairwayv1.GPUMemoryAnnotation, share.Memory())
	}
	setAnnotation(pod, fairwayv1.GPUContainerAnnotation, container.Name)
	if c := shareTicket(pod, container); c != "" {
		return nil, deny("container %q asks for %s: only the GPU container (%q) gets the pod's share, and fairway sets it",
			c, fairwayv1.ResourceGPUShare, container.Name)
	}
	askForShare(container)
	if dropEnv(container, EnvVisibleDevices) {
		warnings = append(warnings, fmt.Sprintf("fairway: %s removed from container %q: its GPU is the one the scheduler chose, delivered by the kubelet",
			EnvVisibleDevices, container.Name))
	}
	if d.opts.MPSVolumes {
		size, err := takeOverSharedMemory(pod, container)
		if err != nil {
			return nil, err
		}
		mountMPSVolume(pod, container, MPSVolumeName, fairwayv1.MPSVolumePipe, DefaultMPSPipeDirectory, "")
		mountMPSVolume(pod, container, MPSSharedMemoryVolumeName, fairwayv1.MPSVolumeSharedMemory, mpsSharedMemoryPath, size)
	}
	return warnings, nil
}

// wholeGPUs returns the first container (init containers included) that asks for whole GPUs,
// and how many.
func wholeGPUs(pod *corev1.Pod) (string, string) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
				if q, ok := rl[fairwayv1.ResourceGPU]; ok && q.Cmp(resource.Quantity{}) > 0 {
					return c.Name, q.String()
				}
			}
		}
	}
	return "", ""
}

// gpuContainer picks the container that gets the share: the one the user names with
// fairway.dev/gpu-container (or KAI's gpu-fraction-container-name), else the adapter's choice,
// else the first container.
func gpuContainer(pod *corev1.Pod, adapterChoice string) (*corev1.Container, error) {
	for _, key := range []string{fairwayv1.GPUContainerAnnotation, fairwayv1.GPUContainerAliasAnnotation} {
		name, ok := pod.Annotations[key]
		if !ok {
			continue
		}
		if c := containerNamed(pod, name); c != nil {
			return c, nil
		}
		names := make([]string, len(pod.Spec.Containers))
		for i, c := range pod.Spec.Containers {
			names[i] = c.Name
		}
		return nil, deny("%s %q: must name one of the pod's containers (%s)", key, name, strings.Join(names, ", "))
	}
	if c := containerNamed(pod, adapterChoice); c != nil {
		return c, nil
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, deny("the pod asks for a GPU share but has no containers")
	}
	return &pod.Spec.Containers[0], nil
}

func containerNamed(pod *corev1.Pod, name string) *corev1.Container {
	if name == "" {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// shareTicket returns the first container other than gpu (init containers included) that asks
// for fairway.dev/gpu-share, "" when none does.
func shareTicket(pod *corev1.Pod, gpu *corev1.Container) string {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if gpu != nil && c.Name == gpu.Name {
				continue
			}
			for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
				if _, ok := rl[fairwayv1.ResourceGPUShare]; ok {
					return c.Name
				}
			}
		}
	}
	return ""
}

// askForShare makes the container ask for exactly one fairway.dev/gpu-share, whatever it asked
// before: the kubelet then calls the gpu-agent's device plugin for it, and admits no more shares
// onto a GPU than the plugin has slots.
func askForShare(c *corev1.Container) {
	one := resource.MustParse("1")
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[fairwayv1.ResourceGPUShare] = one
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[fairwayv1.ResourceGPUShare] = one
}

// dropEnv removes every entry of the variable name from the container and reports whether there
// was one.
func dropEnv(c *corev1.Container, name string) bool {
	n := len(c.Env)
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if len(c.Env) == n {
		return false
	}
	if len(c.Env) == 0 {
		c.Env = nil
	}
	return true
}

// takeOverSharedMemory makes room for the MPS /dev/shm in the GPU container: a container that
// mounts an emptyDir at /dev/shm (the usual way to get more than the runtime's 64 MiB) gets the
// MPS one there instead, of the emptyDir's sizeLimit, which it returns ("" when none); the
// emptyDir volume stays for the pod's other containers. Anything else at /dev/shm is refused:
// the container's /dev/shm must be the one its MPS server shares.
func takeOverSharedMemory(pod *corev1.Pod, c *corev1.Container) (string, error) {
	size := ""
	mounts := c.VolumeMounts[:0:0]
	for _, m := range c.VolumeMounts {
		if m.Name == MPSSharedMemoryVolumeName || path.Clean(m.MountPath) != mpsSharedMemoryPath {
			mounts = append(mounts, m)
			continue
		}
		var src *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == m.Name {
				src = &pod.Spec.Volumes[i]
			}
		}
		if src == nil || src.EmptyDir == nil {
			return "", deny("container %q mounts volume %q at %s: with MPS its %s is the one its MPS server shares; mount nothing there, or an emptyDir (its sizeLimit then sizes it)",
				c.Name, m.Name, mpsSharedMemoryPath, mpsSharedMemoryPath)
		}
		if src.EmptyDir.SizeLimit != nil {
			size = src.EmptyDir.SizeLimit.String()
		}
	}
	c.VolumeMounts = mounts
	return size, nil
}

// mountMPSVolume mounts one of the pod's MPS directories (kind: fairwayv1.MPSVolumePipe or
// MPSVolumeSharedMemory) into the container at mountPath, once: the webhook may be called again on
// the pod it rewrote. The volume is a CSI ephemeral inline volume of the gpu-agent's driver, which
// Pod Security admission allows at every level; the agent decides which directory it is from the
// pod the kubelet names (podInfoOnMount), never from anything in the pod spec, so a pod cannot ask
// for another pod's endpoint.
func mountMPSVolume(pod *corev1.Pod, c *corev1.Container, volume, kind, mountPath, size string) {
	hasVolume := false
	for _, v := range pod.Spec.Volumes {
		hasVolume = hasVolume || v.Name == volume
	}
	if !hasVolume {
		attrs := map[string]string{fairwayv1.MPSVolumeAttribute: kind}
		if size != "" {
			attrs[fairwayv1.MPSSharedMemorySizeAttribute] = size
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			CSI: &corev1.CSIVolumeSource{Driver: fairwayv1.MPSDriverName, VolumeAttributes: attrs},
		}})
	}
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: mountPath})
}
