package snapshot

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MilliPerGPU is one whole GPU in milli-GPU.
const MilliPerGPU = 1000

// Queue accounting dimensions. Every queue vector (Amounts) holds milli-GPU, milli-CPU and memory
// bytes first, then one milli-GPU entry per GPU type known to the snapshot (see GPUTypes).
const (
	DimGPU      = 0
	DimCPU      = 1
	DimMemory   = 2
	NumBaseDims = 3
)

// DimName is the human name of a dimension, as used in queue status and reasons: gpu, cpu,
// memory, or gpu/<type>.
func (s *Snapshot) DimName(d int) string {
	switch d {
	case DimGPU:
		return "gpu"
	case DimCPU:
		return "cpu"
	case DimMemory:
		return "memory"
	}
	if t := d - NumBaseDims; t >= 0 && t < len(s.gpuTypes) {
		return "gpu/" + s.gpuTypes[t]
	}
	return fmt.Sprintf("dim%d", d)
}

// FormatAmount prints an amount of dimension d in its natural unit: GPUs with up to three
// decimals, CPU cores, memory in Gi/Mi.
func FormatAmount(d int, v int64) string {
	switch d {
	case DimCPU:
		return trimDecimal(v, 1000)
	case DimMemory:
		switch {
		case v%(1<<30) == 0:
			return fmt.Sprintf("%dGi", v>>30)
		case v%(1<<20) == 0:
			return fmt.Sprintf("%dMi", v>>20)
		}
		return strconv.FormatInt(v, 10)
	default:
		return trimDecimal(v, MilliPerGPU)
	}
}

func trimDecimal(v, unit int64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatInt(v/unit, 10)
	if r := v % unit; r != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%03d", r), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Amounts is a queue accounting vector indexed by dimension. A short vector reads as zeros
// beyond its length, so vectors made before a GPU type appeared stay valid.
type Amounts []int64

// At returns dimension d, zero beyond the vector's length.
func (a Amounts) At(d int) int64 {
	if d < len(a) {
		return a[d]
	}
	return 0
}

func (a *Amounts) add(d int, v int64) {
	if v == 0 {
		return
	}
	if d >= len(*a) {
		grown := make(Amounts, d+1)
		copy(grown, *a)
		*a = grown
	}
	(*a)[d] += v
}

// Clone returns a copy.
func (a Amounts) Clone() Amounts { return append(Amounts(nil), a...) }

// Request is what one pod asks of a node.
type Request struct {
	// MilliCPU and Memory (bytes) are the pod's effective requests, overhead included.
	MilliCPU int64
	Memory   int64
	// WholeGPUs is the number of whole GPUs (nvidia.com/gpu).
	WholeGPUs int64
	// FractionMilli is a share of one GPU in milli-GPU (1..999), or 0.
	FractionMilli int64
	// GPUMemoryMiB is an amount of memory of one GPU, or 0.
	GPUMemoryMiB int64
	// Scalars are the other extended resources (and ephemeral storage, hugepages), sorted by name.
	Scalars []Scalar
	// HostPorts the pod binds on its node.
	HostPorts []HostPort
	// Reservation is true for a reservation pod (label fairway.dev/reservation=true): it holds
	// one GPU for the kubelet on behalf of the fractional pods that share it, and takes no GPU in
	// the snapshot's accounting beyond marking its slot (see GPUSlot.Reserved).
	Reservation bool
	// DRA is true for a pod with ResourceClaims: its WholeGPUs are the GPU devices its claims ask
	// for (dra.go), which only DRA nodes have.
	DRA bool
}

// Scalar is an amount of a resource counted by a node's allocatable, other than CPU, memory, pods
// and GPUs.
type Scalar struct {
	Name  corev1.ResourceName
	Value int64
}

// HostPort is a port a pod binds on its node's network.
type HostPort struct {
	Protocol corev1.Protocol
	IP       string
	Port     int32
}

// Shared reports whether the pod asks for a part of one GPU (a fraction or GPU memory).
func (r *Request) Shared() bool { return r.FractionMilli > 0 || r.GPUMemoryMiB > 0 }

// GPU reports whether the pod asks for any GPU at all.
func (r *Request) GPU() bool { return r.WholeGPUs > 0 || r.Shared() }

// SharedMilli is the milli-GPU a shared request takes on a GPU with memMiB of memory: the
// fraction itself, or the memory's share of the GPU rounded up. It returns -1 when the request
// is by memory and the GPU's memory is unknown or too small.
func (r *Request) SharedMilli(memMiB int64) int64 {
	if r.FractionMilli > 0 {
		return r.FractionMilli
	}
	if memMiB <= 0 || r.GPUMemoryMiB > memMiB {
		return -1
	}
	return (r.GPUMemoryMiB*MilliPerGPU + memMiB - 1) / memMiB
}

// SharedMemMiB is the GPU memory a shared request takes on a GPU with memMiB of memory.
func (r *Request) SharedMemMiB(memMiB int64) int64 {
	if r.GPUMemoryMiB > 0 {
		return r.GPUMemoryMiB
	}
	return r.FractionMilli * max(memMiB, 0) / MilliPerGPU
}

// String prints the request compactly for reasons: "2 GPU, 1 CPU, 1Gi".
func (r *Request) String() string {
	var parts []string
	switch {
	case r.WholeGPUs > 0:
		parts = append(parts, fmt.Sprintf("%d GPU", r.WholeGPUs))
	case r.FractionMilli > 0:
		parts = append(parts, trimDecimal(r.FractionMilli, MilliPerGPU)+" GPU")
	case r.GPUMemoryMiB > 0:
		parts = append(parts, fmt.Sprintf("%dMiB GPU memory", r.GPUMemoryMiB))
	}
	parts = append(parts, trimDecimal(r.MilliCPU, 1000)+" CPU", FormatAmount(DimMemory, r.Memory)+" memory")
	for _, s := range r.Scalars {
		parts = append(parts, fmt.Sprintf("%d %s", s.Value, s.Name))
	}
	return strings.Join(parts, ", ")
}
