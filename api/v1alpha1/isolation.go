package v1alpha1

// The gpu-agent serves each fractional pod's MPS endpoint as CSI ephemeral inline volumes of its
// own driver (docs/isolation.md): the webhook puts them in the pod spec, the kubelet asks the agent
// of the pod's node to publish them, and the agent bind-mounts directories of that pod alone. Pod
// Security admission allows csi volumes at every level, where it refuses hostPath at baseline and
// restricted.
const (
	// MPSDriverName is the CSI driver the gpu-agent serves and the chart registers (a CSIDriver
	// object of that name, ephemeral volumes only, with podInfoOnMount).
	MPSDriverName = "mps.fairway.dev"
	// MPSVolumeAttribute is the volumeAttributes key of an MPS volume saying which of the pod's
	// MPS directories it is: MPSVolumePipe or MPSVolumeSharedMemory.
	MPSVolumeAttribute = Prefix + "mps-volume"
	// MPSVolumePipe is the pod's CUDA_MPS_PIPE_DIRECTORY, mounted where CUDA clients look for it.
	MPSVolumePipe = "pipe"
	// MPSVolumeSharedMemory is the pod's /dev/shm, which its MPS server shares with it.
	MPSVolumeSharedMemory = "shm"
	// MPSSharedMemorySizeAttribute, on the shared-memory volume, is the size of the pod's
	// /dev/shm (a resource.Quantity): the sizeLimit of the emptyDir the container mounted at
	// /dev/shm before the webhook gave it the MPS one.
	MPSSharedMemorySizeAttribute = Prefix + "mps-shm-size"
)

// GPUSharingMode says how pods that share a GPU are kept apart on it, which is what a
// fractional request is worth there. `fairway nodes` shows it per GPU; docs/isolation.md says
// what a tenant can and cannot do to a neighbour in each mode.
type GPUSharingMode string

const (
	// GPUSharingSoft: the pods time-slice the GPU; a share's memory and compute limits are
	// the application's to keep (the node runs no MPS).
	GPUSharingSoft GPUSharingMode = "soft"
	// GPUSharingMPS: each fractional pod has an MPS server of its own, started by the
	// gpu-agent with the pod's memory limit and thread percentage set on the server side,
	// which a process in the pod cannot raise.
	GPUSharingMPS GPUSharingMode = "mps"
	// GPUSharingMIG: the GPU is in MIG mode; fairway places no fractions on it (its instances
	// are the device plugin's).
	GPUSharingMIG GPUSharingMode = "mig"
)

// SharingMode is the mode of the inventory's GPU g.
func (inv *GPUInventory) SharingMode(g GPUDevice) GPUSharingMode {
	switch {
	case g.MIGEnabled:
		return GPUSharingMIG
	case inv.MPS:
		return GPUSharingMPS
	}
	return GPUSharingSoft
}
