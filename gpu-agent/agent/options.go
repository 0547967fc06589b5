//go:build cgo

package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
)

// Options are the agent's settings, one per command-line flag.
type Options struct {
	// NodeName is the node the agent runs on (the downward API's spec.nodeName).
	NodeName string
	// NVML is "real" for libnvidia-ml.so, or "mock:<system>" (a key of fakegpu.Systems:
	// dgxh100, dgxh200, dgxa100, dgxb200, l4, t4) for a fake node backed by go-nvml's mock server.
	NVML string
	// PodResourcesSocket is the kubelet's PodResources API socket.
	PodResourcesSocket string
	// MPS runs an MPS control daemon for each fractional pod, with the pod's limits set on the
	// server side; without it (or without the binary) the node is in soft mode. Either way the
	// agent serves the pods' MPS volumes (CSI driver mps.fairway.dev) when CSIEndpoint is set.
	MPS bool
	// MPSDirectory holds each pod's MPS directories (pods/<uid>/{pipe,shm,log}).
	MPSDirectory string
	// CSIEndpoint is the unix socket of the agent's CSI driver, the same path in the agent and on
	// the node; empty serves no MPS volumes.
	CSIEndpoint string
	// PluginRegistrationDir is the kubelet's plugin registration directory.
	PluginRegistrationDir string
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// UsageInterval is the usage poll period; idleness changes reach the API within about one.
	UsageInterval time.Duration
	// IdleThreshold is the utilization (percent) at or below which a pod is not working.
	IdleThreshold float64
	// IdleAfter is how long an interactive pod must not work before it is marked idle.
	IdleAfter time.Duration
	// RefreshInterval is the discovery period, and how often an unchanged inventory is
	// re-confirmed on the Node.
	RefreshInterval time.Duration
	// MockControlAddress serves the fake node's control endpoint; mock mode only.
	MockControlAddress string
	// ProcRoot is the host's /proc (the agent runs with hostPID), for process -> pod.
	ProcRoot string
	// DevicePluginDir is the kubelet's device-plugin directory, where the agent serves
	// fairway.dev/gpu-share (package shareplugin): the device plugin that gives each fractional
	// pod the GPU the scheduler chose. Empty serves none (fractional pods then cannot start).
	DevicePluginDir string
	// GPUShareSlots is how many fairway.dev/gpu-share slots each GPU offers the kubelet: the
	// most fractional pods the kubelet admits onto one GPU.
	GPUShareSlots int
	// DeviceListStrategy says how a share's GPU is named to the container runtime, a
	// comma-separated list of shareplugin.Strategies.
	DeviceListStrategy string
	// CDISpecDirs are the CDI spec directories, comma-separated: NVIDIA's specs are read from
	// all, fairway's is written into the last. Empty writes none and names no CDI device.
	CDISpecDirs string
	// HostDevDir is where the agent sees the host's /dev, to leave out control device nodes
	// the host lacks; empty assumes the driver's usual ones exist.
	HostDevDir string
	// ShareLibraryDir is the host directory (seen at the same path in the agent's container)
	// where the agent installs the share library (package shim) and each share's
	// configuration, which the device plugin mounts read-only into share containers so that
	// they see their share as the GPU's memory and cannot allocate past it. Empty delivers no
	// library (shares then see the whole GPU's memory). ShareLibrary is the library to install.
	ShareLibraryDir, ShareLibrary string
	// ShareCgroupLimit sets each share's memory limit on its pod's cgroup (under CgroupRoot)
	// where the driver has a per-cgroup GPU memory limit (r615 and later), before the pod's
	// share containers start, and refuses a container whose limit cannot be set (package
	// cgrouplimit). Drivers without it keep the share library's limit only.
	ShareCgroupLimit bool
	// Namespace is fairway's own namespace: only pods there can be the scheduler's reservation
	// pods (v1alpha1.IsReservationPod). Default v1alpha1.DefaultNamespace.
	Namespace string

	// Swap moves an idle interactive pod's GPU memory to host RAM when the scheduler asks
	// (docs/idle-lending.md#swap), with the CUDA driver's checkpoint API; it needs ptrace-level
	// rights over the pods' processes (CAP_SYS_PTRACE) and driver r550 or later.
	Swap bool
	// SwapHostMemoryLimit is the most bytes of GPU memory swapped out on the node at once (the
	// chart's per-node cap), on top of the node's allocatable memory less its pods' requests.
	SwapHostMemoryLimit int64
	// SwapWakeCPU is the CPU a swapped pod's processes may use between two polls without it
	// counting as work.
	SwapWakeCPU time.Duration
	// SwapLockTimeout bounds the wait for a process's running GPU work before its swap-out.
	SwapLockTimeout time.Duration
	// CgroupRoot is the host's cgroup v2 mount, for a pod's memory limit and usage, and where
	// share limits are set on pods' cgroups (ShareCgroupLimit).
	CgroupRoot string
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		NVML:                   "real",
		PodResourcesSocket:     assign.DefaultSocket,
		MPSDirectory:           "/run/fairway/mps",
		PluginRegistrationDir:  "/var/lib/kubelet/plugins_registry",
		MetricsBindAddress:     ":9400",
		HealthProbeBindAddress: ":9401",
		UsageInterval:          500 * time.Millisecond,
		IdleThreshold:          5,
		IdleAfter:              5 * time.Minute,
		RefreshInterval:        30 * time.Second,
		ProcRoot:               "/proc",
		GPUShareSlots:          fairwayv1alpha1.DefaultShareSlotsPerGPU,
		DeviceListStrategy:     "cdi-cri,device-nodes,volume-mounts",
		CDISpecDirs:            strings.Join(shareplugin.DefaultCDISpecDirs, ","),
		Namespace:              fairwayv1alpha1.DefaultNamespace,
		SwapWakeCPU:            20 * time.Millisecond,
		SwapLockTimeout:        5 * time.Second,
		CgroupRoot:             "/sys/fs/cgroup",
		ShareCgroupLimit:       true,
	}
}

// MockSystem returns the mock system named by NVML ("mock:dgxh100" -> "dgxh100"), or "" in
// real mode.
func (o *Options) MockSystem() string {
	s, ok := strings.CutPrefix(o.NVML, "mock:")
	if !ok {
		return ""
	}
	return s
}

// Validate reports every invalid setting at once.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name (or NODE_NAME) is required"))
	}
	switch sys := o.MockSystem(); {
	case o.NVML == "real":
	case sys != "":
		if _, ok := fakegpu.Systems[sys]; !ok {
			errs = append(errs, fmt.Errorf("--nvml=mock:%s: unknown mock system (have %v)", sys, fakegpu.SystemNames()))
		}
	default:
		errs = append(errs, fmt.Errorf("--nvml=%q: want real or mock:<%s>", o.NVML, strings.Join(fakegpu.SystemNames(), "|")))
	}
	if o.MockControlAddress != "" && o.MockSystem() == "" {
		errs = append(errs, errors.New("--mock-control-address needs --nvml=mock:<system>"))
	}
	if o.MPS && o.CSIEndpoint == "" {
		errs = append(errs, errors.New("--mps needs --csi-endpoint: fractional pods reach their MPS servers through the agent's CSI volumes"))
	}
	if o.UsageInterval < 50*time.Millisecond {
		errs = append(errs, fmt.Errorf("--usage-interval=%s: at least 50ms", o.UsageInterval))
	}
	if o.RefreshInterval < time.Second {
		errs = append(errs, fmt.Errorf("--refresh-interval=%s: at least 1s", o.RefreshInterval))
	}
	if o.IdleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--idle-after=%s: must be positive", o.IdleAfter))
	}
	if _, err := shareplugin.ParseStrategies(o.DeviceListStrategy); err != nil {
		errs = append(errs, fmt.Errorf("--device-list-strategy: %w", err))
	}
	if o.GPUShareSlots < 1 {
		errs = append(errs, fmt.Errorf("--gpu-share-slots=%d: at least 1", o.GPUShareSlots))
	}
	if o.IdleThreshold < 0 || o.IdleThreshold >= 100 {
		errs = append(errs, fmt.Errorf("--idle-threshold=%g: a percentage in [0, 100)", o.IdleThreshold))
	}
	if o.Swap && o.SwapHostMemoryLimit <= 0 {
		errs = append(errs, fmt.Errorf("--swap needs --swap-host-memory-limit: the most host RAM the node's swapped GPU memory may take (e.g. 256Gi), got %d bytes", o.SwapHostMemoryLimit))
	}
	if o.SwapWakeCPU <= 0 {
		errs = append(errs, fmt.Errorf("--swap-wake-cpu=%s: must be positive", o.SwapWakeCPU))
	}
	if o.SwapLockTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("--swap-lock-timeout=%s: at least 10ms", o.SwapLockTimeout))
	}
	return errors.Join(errs...)
}
