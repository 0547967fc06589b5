//go:build cgo

package fakegpu

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

const mib = 1 << 20

// Device is one fake GPU: a go-nvml mock device, whose identity answers come from the mock (and
// its overridable funcs), with usage and failures from State.
type Device struct {
	*server.Device

	node    *Node
	index   int
	state   State
	failure nvml.Return
}

var _ nvml.Device = (*Device)(nil)

// SetState replaces the device's usage. A process that leaves the node leaves its checkpoint
// state with it.
func (d *Device) SetState(s State) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	d.state = s
	for pid := range d.node.ckpt {
		if _, _, ok := d.node.process(pid); !ok {
			delete(d.node.ckpt, pid)
		}
	}
}

// resident are the device's processes that hold GPU memory and a context: all but those
// checkpointed to the host. The caller holds the node's mu.
func (d *Device) resident() []Process {
	out := make([]Process, 0, len(d.state.Processes))
	for _, p := range d.state.Processes {
		if d.node.ckpt[p.PID] != checkpoint.Checkpointed {
			out = append(out, p)
		}
	}
	return out
}

// usedLocked is the device's used memory as NVML reports it; the caller holds the node's mu.
func (d *Device) usedLocked() uint64 {
	if d.state.MemoryUsedMiB != nil {
		return *d.state.MemoryUsedMiB * mib
	}
	used := uint64(0)
	for _, p := range d.resident() {
		used += p.UsedMiB * mib
	}
	return used
}

// State returns a copy of the device's usage.
func (d *Device) State() State {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	s := d.state
	s.Processes = append([]Process(nil), s.Processes...)
	return s
}

// Fail makes every call on the device return ret (nvml.ERROR_GPU_IS_LOST: it fell off the
// bus); nvml.SUCCESS heals it.
func (d *Device) Fail(ret nvml.Return) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	d.failure = ret
}

// Failure is the injected failure, nvml.SUCCESS when none.
func (d *Device) Failure() nvml.Return {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	return d.failure
}

func (d *Device) failed() nvml.Return {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	return d.failure
}

// Identity: delegate to the mock device, so its overridable funcs still apply.

func (d *Device) GetUUID() (string, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return "", r
	}
	return d.Device.GetUUID()
}

func (d *Device) GetName() (string, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return "", r
	}
	return d.Device.GetName()
}

func (d *Device) GetCudaComputeCapability() (int, int, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return 0, 0, r
	}
	return d.Device.GetCudaComputeCapability()
}

func (d *Device) GetMigMode() (int, int, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return 0, 0, r
	}
	return d.Device.GetMigMode()
}

// Topology: NVLink islands and fabric come from the node.

func (d *Device) GetP2PStatus(peer nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return nvml.P2P_STATUS_UNKNOWN, r
	}
	p, ok := peer.(*Device)
	if !ok || p.node != d.node {
		return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
	}
	if r := p.failed(); r != nvml.SUCCESS {
		return nvml.P2P_STATUS_UNKNOWN, r
	}
	if caps != nvml.P2P_CAPS_INDEX_NVLINK {
		return nvml.P2P_STATUS_OK, nvml.SUCCESS
	}
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.node.nvlinked(d.index, p.index) {
		return nvml.P2P_STATUS_OK, nvml.SUCCESS
	}
	return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
}

func (d *Device) GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return nvml.GpuFabricInfo{}, r
	}
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.node.fabric == nil {
		return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.GpuFabricInfo{
		ClusterUuid: d.node.fabric.ClusterUUID,
		CliqueId:    d.node.fabric.CliqueID,
		State:       nvml.GPU_FABRIC_STATE_COMPLETED,
		Status:      uint32(nvml.SUCCESS),
	}, nvml.SUCCESS
}

// Usage: served from State, without the mock's call recording (the agent polls these several
// times a second for as long as a fake node lives).

func (d *Device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.failure != nvml.SUCCESS {
		return nvml.Memory{}, d.failure
	}
	total := d.Device.MemoryInfo.Total
	used := min(d.usedLocked(), total)
	return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
}

func (d *Device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.failure != nvml.SUCCESS {
		return nvml.Utilization{}, d.failure
	}
	if mig, _, _ := d.Device.GetMigMode(); mig == nvml.DEVICE_MIG_ENABLE {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED // as on real MIG devices
	}
	var u uint32
	if d.state.UtilizationPercent != nil {
		u = *d.state.UtilizationPercent
	} else {
		for _, p := range d.resident() {
			u += p.SMPercent
		}
	}
	return nvml.Utilization{Gpu: min(u, 100)}, nvml.SUCCESS
}

func (d *Device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.failure != nvml.SUCCESS {
		return nil, d.failure
	}
	res := d.resident()
	out := make([]nvml.ProcessInfo, 0, len(res))
	for _, p := range res {
		out = append(out, nvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.UsedMiB * mib})
	}
	return out, nvml.SUCCESS
}

func (d *Device) GetProcessUtilization(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	d.node.mu.Lock()
	defer d.node.mu.Unlock()
	if d.failure != nvml.SUCCESS {
		return nil, d.failure
	}
	now := uint64(time.Now().UnixMicro())
	var out []nvml.ProcessUtilizationSample
	for _, p := range d.resident() {
		if p.SMPercent > 0 {
			out = append(out, nvml.ProcessUtilizationSample{Pid: p.PID, SmUtil: p.SMPercent, TimeStamp: now})
		}
	}
	if len(out) == 0 {
		return nil, nvml.ERROR_NOT_FOUND // what NVML answers when no process ran a kernel
	}
	return out, nvml.SUCCESS
}

// Per-cgroup memory limits (nvmlDeviceSetMemoryLimits_v1): the fake driver predates r615 and
// answers ERROR_NOT_SUPPORTED, unless a test set the mock's SetMemoryLimits_v1Func or
// GetMemoryLimits_v1Func (go-nvml's mock would panic on a call it was not given).

func (d *Device) SetMemoryLimits_v1(cgroup string, soft, hard uint64) nvml.Return {
	if r := d.failed(); r != nvml.SUCCESS {
		return r
	}
	if d.SetMemoryLimits_v1Func == nil {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return d.Device.SetMemoryLimits_v1(cgroup, soft, hard)
}

func (d *Device) GetMemoryLimits_v1(cgroup string) (nvml.MemoryLimits_v1, nvml.Return) {
	if r := d.failed(); r != nvml.SUCCESS {
		return nvml.MemoryLimits_v1{}, r
	}
	if d.GetMemoryLimits_v1Func == nil {
		return nvml.MemoryLimits_v1{}, nvml.ERROR_NOT_SUPPORTED
	}
	return d.Device.GetMemoryLimits_v1(cgroup)
}
