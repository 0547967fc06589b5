package gpu

// Library is the agent's whole use of NVML. Implementations must be safe for concurrent use:
// discovery and usage sampling query devices from different goroutines.
type Library interface {
	// Init loads and initialises the library. It fails with ErrLibraryNotFound when the
	// NVIDIA driver's libnvidia-ml.so.1 is absent and with ErrDriverNotLoaded when the
	// kernel driver is not running.
	Init() error
	// Shutdown releases the library; the agent calls it once, on exit.
	Shutdown() error
	// DriverVersion is the NVIDIA kernel driver version, e.g. "550.54.15".
	DriverVersion() (string, error)
	// DeviceCount is the number of physical GPUs the driver sees, healthy or not.
	DeviceCount() (int, error)
	// Device returns the GPU at NVML index i, 0 <= i < DeviceCount().
	Device(i int) (Device, error)
}

// Device is one physical GPU. Every method may fail on its own: a GPU that falls off the bus
// answers ErrGPULost while its neighbours keep working, and a query the device does not
// support answers ErrNotSupported.
type Device interface {
	// Index is NVML's index of the device, the same number nvidia-smi shows.
	Index() int
	// UUID is the device's stable name, "GPU-<uuid>".
	UUID() (string, error)
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name() (string, error)
	// Memory is the device's frame-buffer memory.
	Memory() (Memory, error)
	// ComputeCapability is the CUDA compute capability, e.g. 9, 0.
	ComputeCapability() (major, minor int, err error)
	// MinorNumber is the device's minor number: the kernel names its node /dev/nvidia<n>, which
	// is what a container needs to reach it.
	MinorNumber() (int, error)
	// MIGEnabled reports whether the device currently runs in MIG mode.
	MIGEnabled() (bool, error)
	// NVLinkTo reports whether this device reaches peer over NVLink (directly or through
	// NVSwitch), which is what NVML's NVLink peer-to-peer status answers.
	NVLinkTo(peer Device) (bool, error)
	// Fabric is the device's multi-node NVLink fabric membership. Devices outside a fabric
	// (most systems) answer ErrNotSupported or a Fabric with Registered false.
	Fabric() (Fabric, error)
	// Utilization is the percentage of the last sample period in which a kernel ran.
	Utilization() (percent uint32, err error)
	// Processes lists the compute processes holding a context on the device.
	Processes() ([]Process, error)
	// ProcessUtilization returns per-process SM utilization samples newer than since
	// (microseconds since the epoch, 0 for all buffered samples). Devices or drivers that do
	// not keep per-process samples answer ErrNotSupported.
	ProcessUtilization(since uint64) ([]ProcessSample, error)
}

// Memory is a device's frame-buffer memory in bytes.
type Memory struct {
	Total uint64
	Used  uint64
}

// Process is one process with a CUDA context on a device.
type Process struct {
	// PID in the host's PID namespace.
	PID uint32
	// UsedBytes is the device memory the process holds, 0 when the driver cannot tell (for
	// example for MPS clients on some drivers).
	UsedBytes uint64
}

// ProcessSample is one process's share of a device over NVML's last sample window.
type ProcessSample struct {
	PID uint32
	// SMPercent is the share of time one of the process's kernels ran on the device.
	SMPercent uint32
	// Timestamp is when the sample was taken, microseconds since the epoch.
	Timestamp uint64
}

// Fabric is a device's place in a multi-node NVLink fabric (NVL72-class systems): devices with
// the same ClusterUUID and CliqueID, on any node, reach each other over NVLink.
type Fabric struct {
	// Registered is true once the fabric manager has finished registering the device; the
	// other fields are meaningful only then.
	Registered bool
	// ClusterUUID identifies the NVLink fabric.
	ClusterUUID string
	// CliqueID identifies the partition of the fabric the device belongs to.
	CliqueID uint32
}

// MemoryLimiter is the driver's device-memory limit per cgroup (NVML's
// nvmlDeviceSetMemoryLimits_v1, NVIDIA driver r615 and later): the kernel's dmem cgroup controller
// (Linux 6.14 and later) or the driver's own per-cgroup accounting enforces it for every context
// of the cgroup's processes, whatever library they load. A Device of the NVML library implements
// it; drivers without it answer ErrNotSupported. Optional: type-assert a Device to it.
type MemoryLimiter interface {
	// SetMemoryLimits sets the soft and hard limits, in bytes, of the cgroup directory cgroup
	// (its full path, e.g. /sys/fs/cgroup/kubepods.slice/...) on this GPU. It needs root.
	SetMemoryLimits(cgroup string, soft, hard uint64) error
	// MemoryLimits reads them back, with the cgroup's current use of the GPU.
	MemoryLimits(cgroup string) (MemoryLimits, error)
}

// MemoryLimits are a cgroup's limits on one GPU, in bytes; Hard is NoMemoryLimit when unlimited.
type MemoryLimits struct {
	Soft, Hard, Used uint64
}

// NoMemoryLimit is NVML's NVML_DEVICE_MEMORY_LIMIT_MAX: no limit.
const NoMemoryLimit = ^uint64(0)
