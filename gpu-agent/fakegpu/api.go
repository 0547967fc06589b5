package fakegpu

// The types of the fake node's state and of its HTTP control endpoint. They need no cgo, so
// test infrastructure that drives fake nodes from outside the agent builds without it.

// Fabric is a multi-node NVLink fabric membership to report for every GPU of a node.
type Fabric struct {
	ClusterUUID [16]byte `json:"-"`
	// ClusterUUIDString is ClusterUUID in its usual text form, for the control endpoint.
	ClusterUUIDString string `json:"clusterUUID"`
	CliqueID          uint32 `json:"cliqueID"`
}

// Process is a fake GPU process and the pod it belongs to.
type Process struct {
	PID uint32 `json:"pid"`
	// PodUID is the pod the process runs in; the agent attributes the process to it.
	PodUID string `json:"podUID,omitempty"`
	// UsedMiB is the device memory the process holds.
	UsedMiB uint64 `json:"usedMiB,omitempty"`
	// SMPercent is the process's kernel time share, reported through per-process
	// utilization samples.
	SMPercent uint32 `json:"smPercent,omitempty"`
	// CPUMillis is the CPU time the process has used so far, which the agent reads of a
	// swapped-out process (as /proc/<pid>/stat on a real node): a test raises it to show the
	// notebook's next cell.
	CPUMillis uint64 `json:"cpuMillis,omitempty"`
	// NotCheckpointable, when set, is why the fake driver refuses to checkpoint the process
	// (as the real one refuses an MPS client, IPC memory or UVM).
	NotCheckpointable string `json:"notCheckpointable,omitempty"`
}

// State is what a test sets on a fake GPU. Zero values mean an idle, healthy GPU.
type State struct {
	// UtilizationPercent overrides the device utilization; nil sums the processes' SMPercent.
	UtilizationPercent *uint32 `json:"utilizationPercent,omitempty"`
	// MemoryUsedMiB overrides the used memory; nil sums the processes' UsedMiB.
	MemoryUsedMiB *uint64 `json:"memoryUsedMiB,omitempty"`
	// Processes run on the device.
	Processes []Process `json:"processes,omitempty"`
}

// DeviceStatus is one fake GPU as the control endpoint reports it.
type DeviceStatus struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	State
	// Failure is the injected NVML failure ("ERROR_GPU_IS_LOST", ...), empty when healthy.
	Failure string `json:"failure,omitempty"`
	// Checkpoint is the checkpoint state (locked, checkpointed, failed) of the processes the
	// fake driver's checkpoint API does not leave running, by PID. A checkpointed process's
	// memory is on the host: the GPU shows neither it nor its memory.
	Checkpoint map[uint32]string `json:"checkpoint,omitempty"`
}

// DeviceUpdate changes some of a fake GPU's state; absent fields keep their value.
type DeviceUpdate struct {
	UtilizationPercent *uint32 `json:"utilizationPercent,omitempty"`
	MemoryUsedMiB      *uint64 `json:"memoryUsedMiB,omitempty"`
	// Processes replaces the process list when present ([] clears it).
	Processes *[]Process `json:"processes,omitempty"`
	// ClearOverrides drops UtilizationPercent and MemoryUsedMiB overrides, so both follow the
	// processes again.
	ClearOverrides bool `json:"clearOverrides,omitempty"`
	// Failure injects an NVML failure by name ("ERROR_GPU_IS_LOST", "ERROR_UNKNOWN"); ""
	// heals the device.
	Failure *string `json:"failure,omitempty"`
}

// LibraryUpdate injects a library-wide failure (driver gone) or clears it ("").
type LibraryUpdate struct {
	Failure string `json:"failure"`
}

// TopologyUpdate sets NVLink islands and the fabric clique of the node.
type TopologyUpdate struct {
	// NVLinkGroups partitions GPU indexes into NVLink islands; null means all-to-all.
	NVLinkGroups [][]int `json:"nvlinkGroups"`
	// Fabric puts the node's GPUs in a multi-node clique; null removes it.
	Fabric *Fabric `json:"fabric"`
}
