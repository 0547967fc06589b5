package mutatingwebhook

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Environment variables the GPU container of a fractional pod takes from its GPU ConfigMap, which
// the scheduler runtime fills when it binds the pod. NVIDIA_VISIBLE_DEVICES is required: the
// container cannot start until the runtime has chosen the GPU. The MPS limits are optional: the
// runtime writes them only on nodes that run MPS.
const (
	EnvVisibleDevices = fairwayv1.GPUConfigMapVisibleDevicesKey
	EnvMPSMemoryLimit = fairwayv1.GPUConfigMapMPSMemoryLimitKey
	EnvMPSThreads     = fairwayv1.GPUConfigMapMPSThreadsKey
)

// MPSVolumeName and MPSSharedMemoryVolumeName are the volumes that carry the pod's MPS pipe
// directory and its MPS server's shared memory into the GPU container.
const (
	MPSVolumeName             = "fairway-mps-pipe"
	MPSSharedMemoryVolumeName = "fairway-mps-shm"
)

// gpuConfigMapPrefix starts the name of every GPU ConfigMap.
const gpuConfigMapPrefix = "fairway-gpu-"

// gpuShare normalizes the pod's GPU-share annotations and, for a fractional pod, chooses the GPU
// container, names its GPU ConfigMap and wires the GPU environment into the container. Pods that
// ask for whole GPUs (an nvidia.com/gpu limit) and ask for no share are left as they are.
func (d *PodDefaulter) gpuShare(req admission.Request, pod *corev1.Pod, w adapters.Workload) ([]string, error) {
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		return nil, err
	}
	if share.IsZero() {
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
	cm := gpuConfigMapName(req)
	setAnnotation(pod, fairwayv1.GPUConfigMapAnnotation, cm)
	wireGPUEnv(container, cm)
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

// gpuConfigMapName names the GPU ConfigMap of a pod, which may have no name yet. It is derived
// from the admission request's UID, which is unique per creation and the same when the API server
// calls the webhook again for the same request, so re-invocation gives the same name.
func gpuConfigMapName(req admission.Request) string {
	uid := string(req.UID)
	if uid == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		uid = hex.EncodeToString(b)
	}
	sum := sha256.Sum256([]byte(uid))
	return gpuConfigMapPrefix + hex.EncodeToString(sum[:])[:16]
}

// wireGPUEnv makes the container take its GPU environment from the ConfigMap cm. Entries of the
// same names the container already had are replaced in place, others are appended, so user
// variables keep their order.
func wireGPUEnv(c *corev1.Container, cm string) {
	for _, e := range []struct {
		name     string
		optional bool
	}{{EnvVisibleDevices, false}, {EnvMPSMemoryLimit, true}, {EnvMPSThreads, true}} {
		v := corev1.EnvVar{Name: e.name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm},
			Key:                  e.name,
			Optional:             ptr.To(e.optional),
		}}}
		replaced := false
		for i := range c.Env {
			if c.Env[i].Name == e.name {
				c.Env[i] = v
				replaced = true
			}
		}
		if !replaced {
			c.Env = append(c.Env, v)
		}
	}
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
