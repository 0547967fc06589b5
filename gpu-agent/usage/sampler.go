package usage

import (
	"errors"
	"fmt"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
)

// GPUSample is one GPU in one sample.
type GPUSample struct {
	Index int
	// UtilizationPercent is valid when UtilizationKnown; MIG devices, for one, do not report
	// it.
	UtilizationPercent uint32
	UtilizationKnown   bool
	MemoryUsedBytes    uint64
	MemoryTotalBytes   uint64
	Processes          []ProcessSample
	// ProcessSMKnown is true when the driver keeps per-process utilization samples, so
	// ProcessSample.SMPercent is meaningful.
	ProcessSMKnown bool
	// Err is the device's first failure in this sample, nil when it answered everything.
	Err error
}

// ProcessSample is one GPU process in one sample.
type ProcessSample struct {
	PID uint32
	// PodUID is the pod the process runs in, "" for processes outside pods.
	PodUID    string
	UsedBytes uint64
	// SMPercent is the process's utilization since the previous sample.
	SMPercent uint32
}

// Sample is every GPU of the node at one instant.
type Sample struct {
	At time.Time
	// Err is a library-wide failure (the driver went away); GPUs is empty then.
	Err  error
	GPUs []GPUSample
}

// DeviceErrors lists the per-device failures of the sample.
func (s *Sample) DeviceErrors() []error {
	var errs []error
	for _, g := range s.GPUs {
		if g.Err != nil {
			errs = append(errs, g.Err)
		}
	}
	return errs
}

// Sampler reads usage from the GPU library and attributes processes to pods. It remembers
// NVML's per-device sample timestamps and each live process's pod between calls; it is not
// safe for concurrent use.
type Sampler struct {
	lib      gpu.Library
	resolver PodResolver
	// begun is when the sampler was made, in NVML's timestamps (wall-clock microseconds): the
	// first query of a device asks for samples after it. NVML answers a query from 0 with every
	// sample in its buffer, seconds of history in which a process that now idles may have
	// worked (a notebook allocating and loading its kernels just before it went quiet, seen on
	// an H200): that history would wake an idle notebook at the agent's start, or at the start
	// of `fairway agent watch`, and take its lent GPU back for nothing.
	begun    uint64
	lastSeen map[int]uint64
	pidPod   map[uint32]string
}

// NewSampler returns a sampler over lib that attributes processes with resolver. Per-process
// utilization counts from this moment on.
func NewSampler(lib gpu.Library, resolver PodResolver) *Sampler {
	return &Sampler{lib: lib, resolver: resolver, begun: uint64(time.Now().UnixMicro()), lastSeen: map[int]uint64{}, pidPod: map[uint32]string{}}
}

// Sample reads every GPU once. A failing device yields a GPUSample with Err set; the others
// are still read.
func (s *Sampler) Sample(now time.Time) Sample {
	out := Sample{At: now}
	n, err := s.lib.DeviceCount()
	if err != nil {
		out.Err = fmt.Errorf("counting GPUs: %w", err)
		return out
	}
	live := map[uint32]bool{}
	for i := range n {
		g := s.sampleDevice(i)
		for _, p := range g.Processes {
			live[p.PID] = true
		}
		out.GPUs = append(out.GPUs, g)
	}
	for pid := range s.pidPod {
		if !live[pid] {
			delete(s.pidPod, pid) // the process ended; its PID may be reused
		}
	}
	return out
}

func (s *Sampler) sampleDevice(i int) GPUSample {
	g := GPUSample{Index: i}
	fail := func(what string, err error) {
		if g.Err == nil {
			g.Err = fmt.Errorf("GPU %d: %s: %w", i, what, err)
		}
	}
	d, err := s.lib.Device(i)
	if err != nil {
		fail("getting handle", err)
		return g
	}
	if u, err := d.Utilization(); err == nil {
		g.UtilizationPercent, g.UtilizationKnown = u, true
	} else if !errors.Is(err, gpu.ErrNotSupported) {
		fail("reading utilization", err)
	}
	if m, err := d.Memory(); err == nil {
		g.MemoryUsedBytes, g.MemoryTotalBytes = m.Used, m.Total
	} else {
		fail("reading memory", err)
	}
	procs, err := d.Processes()
	if err != nil && !errors.Is(err, gpu.ErrNotSupported) {
		fail("listing processes", err)
	}
	sm := map[uint32]uint32{}
	if _, ok := s.lastSeen[i]; !ok {
		s.lastSeen[i] = s.begun
	}
	samples, err := d.ProcessUtilization(s.lastSeen[i])
	switch {
	case err == nil:
		g.ProcessSMKnown = true
		for _, ps := range samples {
			sm[ps.PID] = max(sm[ps.PID], ps.SMPercent)
			s.lastSeen[i] = max(s.lastSeen[i], ps.Timestamp)
		}
	case !errors.Is(err, gpu.ErrNotSupported):
		fail("reading process utilization", err)
	}
	for _, p := range procs {
		g.Processes = append(g.Processes, ProcessSample{
			PID:       p.PID,
			PodUID:    s.podOf(p.PID),
			UsedBytes: p.UsedBytes,
			SMPercent: sm[p.PID],
		})
	}
	return g
}

// podOf resolves a PID once per process lifetime; a process does not change pods.
func (s *Sampler) podOf(pid uint32) string {
	if uid, ok := s.pidPod[pid]; ok {
		return uid
	}
	uid, _ := s.resolver.PodUID(pid)
	s.pidPod[pid] = uid
	return uid
}
