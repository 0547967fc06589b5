package usage

import (
	"testing"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
)

// historyDevice answers like NVML on an H200: a query from before the sampler began returns
// the samples still buffered from then, when the process (now idle) allocated its memory.
type historyDevice struct {
	gpu.Device
	pid     uint32
	stale   uint64 // timestamp of the buffered sample
	queried []uint64
}

func (d *historyDevice) Index() int                   { return 0 }
func (d *historyDevice) Utilization() (uint32, error) { return 0, nil }
func (d *historyDevice) Memory() (gpu.Memory, error) {
	return gpu.Memory{Total: 80 << 30, Used: 2 << 30}, nil
}
func (d *historyDevice) Processes() ([]gpu.Process, error) {
	return []gpu.Process{{PID: d.pid, UsedBytes: 2 << 30}}, nil
}
func (d *historyDevice) ProcessUtilization(since uint64) ([]gpu.ProcessSample, error) {
	d.queried = append(d.queried, since)
	if since < d.stale {
		return []gpu.ProcessSample{{PID: d.pid, SMPercent: 84, Timestamp: d.stale}}, nil
	}
	return nil, nil
}

type oneDevice struct {
	gpu.Library
	d *historyDevice
}

func (l oneDevice) DeviceCount() (int, error)      { return 1, nil }
func (l oneDevice) Device(int) (gpu.Device, error) { return l.d, nil }

func TestSamplerIgnoresSamplesFromBeforeItBegan(t *testing.T) {
	dev := &historyDevice{pid: 934, stale: uint64(time.Now().Add(-time.Second).UnixMicro())}
	s := NewSampler(oneDevice{d: dev}, PodResolverFunc(func(uint32) (string, bool) { return "notebook", true }))
	got := s.Sample(time.Now())
	if len(got.GPUs) != 1 || len(got.GPUs[0].Processes) != 1 {
		t.Fatalf("sample = %+v, want one GPU with one process", got)
	}
	if p := got.GPUs[0].Processes[0]; p.SMPercent != 0 {
		t.Errorf("the idle process shows %d%% from NVML's buffer of before the sampler began (queried since %v); want 0", p.SMPercent, dev.queried)
	}
	if !got.GPUs[0].ProcessSMKnown {
		t.Error("ProcessSMKnown = false, want true")
	}
}
