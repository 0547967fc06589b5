//go:build cgo

package nvmllib

import (
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
)

// Optional NVML symbols: older drivers lack them, and calling a missing symbol through go-nvml
// would crash the process, so the adapter looks them up once after Init.
const (
	symFabricInfo         = "nvmlDeviceGetGpuFabricInfo"
	symProcessUtilization = "nvmlDeviceGetProcessUtilization"
	symSetMemoryLimits    = "nvmlDeviceSetMemoryLimits_v1"
	symGetMemoryLimits    = "nvmlDeviceGetMemoryLimits_v1"
)

// Open returns the real NVML library. Nothing is loaded until Init, which fails with
// gpu.ErrLibraryNotFound on a machine without the NVIDIA driver.
func Open() gpu.Library {
	return New(nvml.New())
}

// New adapts any go-nvml Interface: the real library or a mock server
// (github.com/NVIDIA/go-nvml/pkg/nvml/mock/...).
func New(lib nvml.Interface) gpu.Library {
	return &library{lib: lib}
}

type library struct {
	lib nvml.Interface

	mu       sync.RWMutex
	optional map[string]bool
}

var _ gpu.Library = (*library)(nil)

func (l *library) Init() error {
	if err := wrap("nvmlInit", -1, l.lib.Init()); err != nil {
		return err
	}
	optional := map[string]bool{}
	for _, sym := range []string{symFabricInfo, symProcessUtilization, symSetMemoryLimits, symGetMemoryLimits} {
		optional[sym] = l.lookup(sym)
	}
	l.mu.Lock()
	l.optional = optional
	l.mu.Unlock()
	return nil
}

// lookup reports whether the loaded library has symbol. Libraries that cannot say (no
// extensions) are trusted to have it.
func (l *library) lookup(symbol string) (found bool) {
	defer func() {
		// A mock server without a LookupSymbol implementation panics; treat it as present.
		if recover() != nil {
			found = true
		}
	}()
	ext := l.lib.Extensions()
	if ext == nil {
		return true
	}
	return ext.LookupSymbol(symbol) == nil
}

func (l *library) has(symbol string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.optional[symbol]
}

func (l *library) Shutdown() error {
	return wrap("nvmlShutdown", -1, l.lib.Shutdown())
}

func (l *library) DriverVersion() (string, error) {
	v, ret := l.lib.SystemGetDriverVersion()
	return v, wrap("nvmlSystemGetDriverVersion", -1, ret)
}

func (l *library) DeviceCount() (int, error) {
	n, ret := l.lib.DeviceGetCount()
	return n, wrap("nvmlDeviceGetCount", -1, ret)
}

func (l *library) Device(i int) (gpu.Device, error) {
	d, ret := l.lib.DeviceGetHandleByIndex(i)
	if err := wrap("nvmlDeviceGetHandleByIndex", i, ret); err != nil {
		return nil, err
	}
	return &device{lib: l, dev: d, index: i}, nil
}

type device struct {
	lib   *library
	dev   nvml.Device
	index int
}

var (
	_ gpu.Device        = (*device)(nil)
	_ gpu.MemoryLimiter = (*device)(nil)
)

func (d *device) Index() int { return d.index }

func (d *device) UUID() (string, error) {
	v, ret := d.dev.GetUUID()
	return v, d.wrap("nvmlDeviceGetUUID", ret)
}

func (d *device) Name() (string, error) {
	v, ret := d.dev.GetName()
	return v, d.wrap("nvmlDeviceGetName", ret)
}

func (d *device) Memory() (gpu.Memory, error) {
	m, ret := d.dev.GetMemoryInfo()
	if err := d.wrap("nvmlDeviceGetMemoryInfo", ret); err != nil {
		return gpu.Memory{}, err
	}
	return gpu.Memory{Total: m.Total, Used: m.Used}, nil
}

func (d *device) ComputeCapability() (int, int, error) {
	major, minor, ret := d.dev.GetCudaComputeCapability()
	return major, minor, d.wrap("nvmlDeviceGetCudaComputeCapability", ret)
}

func (d *device) MinorNumber() (int, error) {
	n, ret := d.dev.GetMinorNumber()
	return n, d.wrap("nvmlDeviceGetMinorNumber", ret)
}

func (d *device) MIGEnabled() (bool, error) {
	current, _, ret := d.dev.GetMigMode()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		// Devices without MIG support (anything before Ampere) are simply not in MIG mode.
		return false, nil
	}
	return current == nvml.DEVICE_MIG_ENABLE, d.wrap("nvmlDeviceGetMigMode", ret)
}

func (d *device) NVLinkTo(peer gpu.Device) (bool, error) {
	p, ok := peer.(*device)
	if !ok {
		return false, fmt.Errorf("NVLinkTo: peer %T is not from this library", peer)
	}
	status, ret := d.dev.GetP2PStatus(p.dev, nvml.P2P_CAPS_INDEX_NVLINK)
	if err := d.wrap("nvmlDeviceGetP2PStatus", ret); err != nil {
		return false, err
	}
	return status == nvml.P2P_STATUS_OK, nil
}

func (d *device) Fabric() (gpu.Fabric, error) {
	if !d.lib.has(symFabricInfo) {
		return gpu.Fabric{}, d.wrap("nvmlDeviceGetGpuFabricInfo", nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	info, ret := d.dev.GetGpuFabricInfo()
	if err := d.wrap("nvmlDeviceGetGpuFabricInfo", ret); err != nil {
		return gpu.Fabric{}, err
	}
	f := gpu.Fabric{
		Registered: info.State == nvml.GPU_FABRIC_STATE_COMPLETED && nvml.Return(info.Status) == nvml.SUCCESS,
		CliqueID:   info.CliqueId,
	}
	if f.Registered {
		f.ClusterUUID = formatUUID(info.ClusterUuid)
	}
	return f, nil
}

func (d *device) Utilization() (uint32, error) {
	u, ret := d.dev.GetUtilizationRates()
	return u.Gpu, d.wrap("nvmlDeviceGetUtilizationRates", ret)
}

func (d *device) Processes() ([]gpu.Process, error) {
	infos, ret := d.dev.GetComputeRunningProcesses()
	if err := d.wrap("nvmlDeviceGetComputeRunningProcesses", ret); err != nil {
		return nil, err
	}
	out := make([]gpu.Process, 0, len(infos))
	for _, p := range infos {
		used := p.UsedGpuMemory
		if used == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE
			used = 0
		}
		out = append(out, gpu.Process{PID: p.Pid, UsedBytes: used})
	}
	return out, nil
}

func (d *device) ProcessUtilization(since uint64) ([]gpu.ProcessSample, error) {
	if !d.lib.has(symProcessUtilization) {
		return nil, d.wrap("nvmlDeviceGetProcessUtilization", nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	samples, ret := d.dev.GetProcessUtilization(since)
	if ret == nvml.ERROR_NOT_FOUND {
		// No process ran a kernel since the timestamp: no samples, not a failure.
		return nil, nil
	}
	if err := d.wrap("nvmlDeviceGetProcessUtilization", ret); err != nil {
		return nil, err
	}
	out := make([]gpu.ProcessSample, 0, len(samples))
	for _, s := range samples {
		out = append(out, gpu.ProcessSample{PID: s.Pid, SMPercent: s.SmUtil, Timestamp: s.TimeStamp})
	}
	return out, nil
}

func (d *device) SetMemoryLimits(cgroup string, soft, hard uint64) error {
	if !d.lib.has(symSetMemoryLimits) {
		return d.wrap(symSetMemoryLimits, nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	return d.wrap(symSetMemoryLimits, d.dev.SetMemoryLimits_v1(cgroup, soft, hard))
}

func (d *device) MemoryLimits(cgroup string) (gpu.MemoryLimits, error) {
	if !d.lib.has(symGetMemoryLimits) {
		return gpu.MemoryLimits{}, d.wrap(symGetMemoryLimits, nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	l, ret := d.dev.GetMemoryLimits_v1(cgroup)
	if err := d.wrap(symGetMemoryLimits, ret); err != nil {
		return gpu.MemoryLimits{}, err
	}
	return gpu.MemoryLimits{Soft: l.SoftLimit, Hard: l.HardLimit, Used: l.CurrentUsed}, nil
}

func (d *device) wrap(op string, ret nvml.Return) error { return wrap(op, d.index, ret) }

// wrap turns an NVML return code into nil or a *gpu.Error.
func wrap(op string, device int, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return &gpu.Error{Op: op, Device: device, Code: codeName(ret), Message: ret.Error(), Kind: kind(ret)}
}

func kind(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return gpu.ErrLibraryNotFound
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return gpu.ErrDriverNotLoaded
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_RESET_REQUIRED:
		return gpu.ErrGPULost
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return gpu.ErrNotSupported
	case nvml.ERROR_NOT_FOUND:
		return gpu.ErrNotFound
	default:
		return gpu.ErrUnknown
	}
}

// codeName is the NVML constant's name, stable across drivers (ret.Error() is the driver's
// prose once the real library is loaded), for log keys and metric labels.
func codeName(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_UNINITIALIZED:
		return "ERROR_UNINITIALIZED"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "ERROR_INVALID_ARGUMENT"
	case nvml.ERROR_NOT_SUPPORTED:
		return "ERROR_NOT_SUPPORTED"
	case nvml.ERROR_NO_PERMISSION:
		return "ERROR_NO_PERMISSION"
	case nvml.ERROR_NOT_FOUND:
		return "ERROR_NOT_FOUND"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "ERROR_DRIVER_NOT_LOADED"
	case nvml.ERROR_TIMEOUT:
		return "ERROR_TIMEOUT"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "ERROR_LIBRARY_NOT_FOUND"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "ERROR_FUNCTION_NOT_FOUND"
	case nvml.ERROR_GPU_IS_LOST:
		return "ERROR_GPU_IS_LOST"
	case nvml.ERROR_RESET_REQUIRED:
		return "ERROR_RESET_REQUIRED"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "ERROR_LIB_RM_VERSION_MISMATCH"
	case nvml.ERROR_GPU_NOT_FOUND:
		return "ERROR_GPU_NOT_FOUND"
	case nvml.ERROR_OPERATING_SYSTEM:
		return "ERROR_OPERATING_SYSTEM"
	case nvml.ERROR_UNKNOWN:
		return "ERROR_UNKNOWN"
	default:
		return fmt.Sprintf("NVML_RETURN_%d", int32(ret))
	}
}

func formatUUID(b [16]uint8) string {
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}
