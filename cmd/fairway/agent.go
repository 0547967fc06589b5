//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fairway-sched/fairway/gpu-agent/agent"
	"github.com/fairway-sched/fairway/gpu-agent/cgrouplimit"
	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
	"github.com/fairway-sched/fairway/gpu-agent/mps"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
	"github.com/fairway-sched/fairway/gpu-agent/swap"
)

func newAgentCommand() *cobra.Command {
	opts := agent.DefaultOptions()
	opts.NodeName = os.Getenv("NODE_NAME")
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		opts.Namespace = ns
	}
	var kubeconfig string
	// GPU and API failures are operating conditions, not bugs: no stack traces below panic.
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}

	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the gpu-agent on a GPU node (a DaemonSet), or on a fake node with --nvml=mock:<system>",
		Long: `The gpu-agent discovers the node's GPUs through NVML and publishes them as node labels and the
fairway.dev/gpu-inventory annotation, tells reservation pods which GPU the kubelet gave them
(kubelet PodResources API), runs the MPS control daemon for shared GPUs (--mps), tracks per-pod GPU
usage and marks idle interactive pods (condition fairway.dev/GPUIdle), and serves fairway_gpu_*
metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := setupLogging(&zapOpts)
			cfg, err := restConfig(kubeconfig, "fairway-gpu-agent")
			if err != nil {
				return err
			}
			return agent.Run(ctrl.SetupSignalHandler(), cfg, opts, log.WithName("gpu-agent"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NodeName, "node-name", opts.NodeName, "Node the agent runs on (default $NODE_NAME).")
	f.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file; in-cluster configuration when empty (and $KUBECONFIG unset).")
	f.StringVar(&opts.Namespace, "namespace", opts.Namespace, "fairway's namespace (default $POD_NAMESPACE, else "+opts.Namespace+"): only pods there can be the scheduler's GPU reservations.")
	addNVMLFlag(cmd, &opts)
	f.StringVar(&opts.PodResourcesSocket, "pod-resources-socket", opts.PodResourcesSocket, "The kubelet's PodResources API socket.")
	f.BoolVar(&opts.MPS, "mps", opts.MPS, "Run an MPS control daemon for each fractional pod, with the pod's memory limit and thread percentage set on the server side; without it (or without the binary) the node runs in soft mode. Needs --csi-endpoint.")
	f.StringVar(&opts.MPSDirectory, "mps-directory", opts.MPSDirectory, "Where each fractional pod's MPS pipe, shared-memory and log directories are made (pods/<uid>/...).")
	f.StringVar(&opts.CSIEndpoint, "csi-endpoint", "", "Serve the fractional pods' MPS volumes (CSI driver mps.fairway.dev) on this unix socket, at the same path in the agent and on the node (/var/lib/kubelet/plugins/mps.fairway.dev/csi.sock); registered with the kubelet through --plugin-registration-directory.")
	f.StringVar(&opts.PluginRegistrationDir, "plugin-registration-directory", opts.PluginRegistrationDir, "The kubelet's plugin registration directory.")
	f.StringVar(&opts.DevicePluginDir, "device-plugin-directory", "", "Serve fairway.dev/gpu-share, the device plugin that gives each fractional pod the GPU the scheduler chose, in the kubelet's device-plugin directory (/var/lib/kubelet/device-plugins); empty serves none.")
	f.IntVar(&opts.GPUShareSlots, "gpu-share-slots", opts.GPUShareSlots, "fairway.dev/gpu-share slots per GPU: the most fractional pods the kubelet admits onto one GPU (keep it at or above the kubelet's maxPods).")
	f.StringVar(&opts.DeviceListStrategy, "device-list-strategy", opts.DeviceListStrategy, "How a share's GPU is named to the container runtime, comma-separated: cdi-cri (CDI devices in the CRI), cdi-annotations (CDI devices in annotations, for runtimes before the CRI field; not with cdi-cri), device-nodes, volume-mounts (the NVIDIA runtime's device list), envvar (NVIDIA_VISIBLE_DEVICES, only for runtimes that honour it from unprivileged containers, which lets any pod pick any GPU).")
	f.StringVar(&opts.CDISpecDirs, "cdi-spec-dirs", opts.CDISpecDirs, "CDI spec directories, comma-separated: NVIDIA's specs are read from all, fairway's (fairway.dev/gpu) written into the last; empty names no CDI device.")
	f.StringVar(&opts.ShareLibraryDir, "share-library-directory", "", "Host directory (at the same path in the agent's container) where the agent installs the share library and each share's configuration, mounted read-only into share containers by the device plugin, so that they see their share as the GPU's memory and cannot allocate past it; empty delivers no library.")
	f.StringVar(&opts.ShareLibrary, "share-library", shim.ImageLibrary, "The share library to install (built into the fairway image).")
	f.BoolVar(&opts.ShareCgroupLimit, "share-cgroup-memory-limit", opts.ShareCgroupLimit, "Where the NVIDIA driver limits a cgroup's GPU memory (r615 and later), set each share's limit on its pod's cgroup (under --cgroup-root) before its containers start, and refuse a container whose limit cannot be set.")
	f.StringVar(&opts.HostDevDir, "host-dev-directory", "", "Where the agent sees the host's /dev, to leave out driver control nodes the host lacks; empty assumes /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia-uvm-tools exist.")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", opts.MetricsBindAddress, "Address of the Prometheus /metrics endpoint; 0 disables it.")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", opts.HealthProbeBindAddress, "Address of /healthz and /readyz; 0 disables them.")
	f.DurationVar(&opts.UsageInterval, "usage-interval", opts.UsageInterval, "GPU usage poll period; an idle pod's condition changes within about one period of the change.")
	f.Float64Var(&opts.IdleThreshold, "idle-threshold", opts.IdleThreshold, "GPU utilization in percent at or below which an interactive pod is not working.")
	f.DurationVar(&opts.IdleAfter, "idle-after", opts.IdleAfter, "How long an interactive pod must not work on its GPU before it is marked idle.")
	f.DurationVar(&opts.RefreshInterval, "refresh-interval", opts.RefreshInterval, "Discovery period, and how often an unchanged inventory is re-confirmed on the node.")
	f.StringVar(&opts.MockControlAddress, "mock-control-address", "", "With --nvml=mock:*, serve the fake node's control endpoint (GPU usage, processes, failures) here.")
	f.StringVar(&opts.ProcRoot, "proc-root", opts.ProcRoot, "The host's /proc (the agent runs with hostPID), to attribute GPU processes to pods.")
	f.BoolVar(&opts.Swap, "swap", opts.Swap, "Move an idle interactive pod's GPU memory to host RAM when the scheduler asks, so that a loan gets the whole GPU (CUDA checkpoint API, driver r550+; needs CAP_SYS_PTRACE).")
	f.Var(byteQuantity{&opts.SwapHostMemoryLimit}, "swap-host-memory-limit", "With --swap: the most host RAM the node's swapped GPU memory may take at once (a quantity, e.g. 256Gi).")
	f.DurationVar(&opts.SwapWakeCPU, "swap-wake-cpu", opts.SwapWakeCPU, "With --swap: CPU a swapped pod's processes may use between two polls without counting as work.")
	f.DurationVar(&opts.SwapLockTimeout, "swap-lock-timeout", opts.SwapLockTimeout, "With --swap: how long to wait for a process's running GPU work before swapping it out; past it the pod is lent only its free memory.")
	f.StringVar(&opts.CgroupRoot, "cgroup-root", opts.CgroupRoot, "The host's cgroup v2 mount as the agent sees it: a pod's memory limit before its GPU memory is swapped into it, and the pods' cgroups that get their GPU shares' limits.")
	bindZap(cmd, &zapOpts)

	cmd.AddCommand(newAgentDiscoverCommand(), newAgentMPSCommand(), newAgentWatchCommand(), newAgentMPSExecCommand(), newAgentSwapCheckCommand(), newAgentMemoryLimitCommand())
	return cmd
}

// byteQuantity is a flag of bytes written as a Kubernetes quantity (256Gi).
type byteQuantity struct{ p *int64 }

func (b byteQuantity) String() string {
	if b.p == nil {
		return "0"
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b byteQuantity) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("a quantity of bytes such as 256Gi: %w", err)
	}
	*b.p = q.Value()
	return nil
}

func (byteQuantity) Type() string { return "quantity" }

func addNVMLFlag(cmd *cobra.Command, opts *agent.Options) {
	cmd.Flags().StringVar(&opts.NVML, "nvml", opts.NVML, "GPU library: real (libnvidia-ml.so.1), or mock:dgxh100|dgxh200|dgxa100|dgxb200|l4|t4 for a fake node.")
}

func newAgentDiscoverCommand() *cobra.Command {
	opts := agent.DefaultOptions()
	opts.NodeName = os.Getenv("NODE_NAME")
	if opts.NodeName == "" {
		opts.NodeName, _ = os.Hostname()
	}
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "Discover this machine's GPUs once and print what the agent would publish, as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := agent.Discover(opts)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		},
	}
	cmd.Flags().StringVar(&opts.NodeName, "node-name", opts.NodeName, "Node name (for mock UUIDs and the NVLink domain).")
	addNVMLFlag(cmd, &opts)
	return cmd
}

func newAgentMPSCommand() *cobra.Command {
	o := mps.Options{Enabled: true, PipeDir: "/run/fairway/mps/pipe", LogDir: "/run/fairway/mps/log"}
	var memMiB int64
	var threads int
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	cmd := &cobra.Command{
		Use:   "mps",
		Short: "Run only the agent's MPS daemon supervision, in the foreground, until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := setupLogging(&zapOpts)
			if _, err := exec.LookPath(mps.DefaultBinary); err != nil {
				return fmt.Errorf("%s not found in PATH: MPS is unavailable here (soft mode)", mps.DefaultBinary)
			}
			o.Log = log.WithName("mps")
			o.Setup = mps.Limits(o.Devices, memMiB, threads)
			if memMiB > 0 && len(o.Devices) == 0 {
				return errors.New("--memory-limit-mib needs --device: server-side limits are per device")
			}
			if o.SharedMemoryDir != "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				o.Launch = mps.SharedMemoryLauncher(self, o.SharedMemoryDir)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return mps.New(o).Start(ctx)
		},
	}
	cmd.Flags().StringVar(&o.PipeDir, "mps-pipe-directory", o.PipeDir, "CUDA_MPS_PIPE_DIRECTORY.")
	cmd.Flags().StringVar(&o.LogDir, "mps-log-directory", o.LogDir, "CUDA_MPS_LOG_DIRECTORY.")
	cmd.Flags().StringVar(&o.SharedMemoryDir, "shared-memory-directory", "", "Run the daemon (and its servers) with this directory as /dev/shm, in a mount namespace of its own: a tenant's own shared memory.")
	cmd.Flags().StringSliceVar(&o.Devices, "device", nil, "GPU UUIDs the daemon's servers may open (CUDA_VISIBLE_DEVICES).")
	cmd.Flags().Int64Var(&memMiB, "memory-limit-mib", 0, "Server-side device pinned memory limit of every client, per --device (set_default_device_pinned_mem_limit).")
	cmd.Flags().IntVar(&threads, "thread-percent", 0, "Server-side active thread percentage of every client (set_default_active_thread_percentage).")
	bindZap(cmd, &zapOpts)
	return cmd
}

// newAgentMPSExecCommand is `fairway agent mps-exec`, hidden: the child side of
// mps.SharedMemoryLauncher, which runs it in a mount namespace of its own.
func newAgentMPSExecCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    mps.ExecCommand + " --shared-memory-directory DIR -- BINARY [ARG...]",
		Short:  "Run BINARY with DIR as /dev/shm (in a mount namespace of its own)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return mps.ExecWithSharedMemory(dir, args[0], args[1:])
		},
	}
	cmd.Flags().StringVar(&dir, "shared-memory-directory", "", "The directory mounted at /dev/shm.")
	_ = cmd.MarkFlagRequired("shared-memory-directory")
	return cmd
}

// newAgentWatchCommand is `fairway agent watch`, hidden: the agent's idleness decision on one
// real GPU without a cluster, for the lending check of test/gpu/run.sh. It treats the GPU's
// processes at start as an idle notebook's and later ones as a loan's, prints "watch: owner
// pids ..." once it watches, and exits 0 at the first poll at which the owner works, printing
// "watch: active reason=... observed_us=... detected_us=...".
func newAgentWatchCommand() *cobra.Command {
	opts := agent.DefaultOptions()
	opts.NodeName, _ = os.Hostname()
	gpuIndex := 0
	timeout := 30 * time.Second
	trace := false
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	cmd := &cobra.Command{
		Use:    "watch",
		Short:  "Watch one GPU's current processes as an idle notebook and exit when they do GPU work (the real-GPU lending check)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := setupLogging(&zapOpts)
			lib, err := agent.OpenLibrary(&opts)
			if err != nil {
				return err
			}
			if err := lib.Init(); err != nil {
				return fmt.Errorf("initialising NVML: %w", agent.Explain(err))
			}
			defer func() { _ = lib.Shutdown() }()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			var traceTo io.Writer
			if trace {
				traceTo = cmd.ErrOrStderr()
			}
			w, err := agent.Watch(ctx, lib, agent.WatchOptions{
				Trace:            traceTo,
				GPU:              gpuIndex,
				Interval:         opts.UsageInterval,
				ThresholdPercent: opts.IdleThreshold,
				Ready: func(owner []uint32) {
					fmt.Fprintf(out, "watch: owner pids %v on GPU %d; polling every %s, threshold %g%%\n", owner, gpuIndex, opts.UsageInterval, opts.IdleThreshold)
				},
				Log: log.WithName("watch"),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "watch: active reason=%s observed_us=%d detected_us=%d message=%q\n",
				w.Reason, w.Observed.UnixMicro(), w.Detected.UnixMicro(), w.Message)
			return nil
		},
	}
	f := cmd.Flags()
	addNVMLFlag(cmd, &opts)
	f.IntVar(&gpuIndex, "gpu", gpuIndex, "Index of the GPU to watch.")
	f.DurationVar(&opts.UsageInterval, "usage-interval", opts.UsageInterval, "GPU usage poll period, as the agent's.")
	f.Float64Var(&opts.IdleThreshold, "idle-threshold", opts.IdleThreshold, "Utilization in percent at or below which the owner is not working, as the agent's.")
	f.DurationVar(&timeout, "timeout", timeout, "Give up (exit 1) when the owner has not worked by then.")
	f.BoolVar(&trace, "trace", trace, "Write every NVML utilization answer to stderr.")
	bindZap(cmd, &zapOpts)
	return cmd
}

// newAgentSwapCheckCommand swaps one process out and in with the agent's own calls, on commands
// from stdin, for the swap step of test/gpu/run.sh (swap.RunCheck).
func newAgentSwapCheckCommand() *cobra.Command {
	o := swap.CheckOptions{WakeCPU: agent.DefaultOptions().SwapWakeCPU, Poll: 100 * time.Millisecond,
		LockTimeout: agent.DefaultOptions().SwapLockTimeout, RestoreTimeout: 30 * time.Second}
	procRoot := "/proc"
	cmd := &cobra.Command{
		Use:    "swap-check",
		Short:  "Swap one CUDA process's GPU memory out and in on commands (out, in, quit) from stdin (the real-GPU swap check)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.PID <= 0 {
				return errors.New("--pid: the owner process is required")
			}
			api, err := checkpoint.Open()
			if err != nil {
				return err
			}
			o.API, o.CPU = api, swap.ProcCPU(procRoot)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return swap.RunCheck(ctx, o, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.PID, "pid", 0, "The owner's process.")
	f.DurationVar(&o.WakeCPU, "wake-cpu", o.WakeCPU, "CPU between two polls that counts as the owner's work (the agent's --swap-wake-cpu).")
	f.DurationVar(&o.Poll, "poll", o.Poll, "How often the owner's CPU is read.")
	f.DurationVar(&o.LockTimeout, "lock-timeout", o.LockTimeout, "cuCheckpointProcessLock's timeout.")
	f.DurationVar(&o.RestoreTimeout, "restore-timeout", o.RestoreTimeout, "How long a restore may wait for GPU memory.")
	f.StringVar(&procRoot, "proc-root", procRoot, "The proc filesystem.")
	return cmd
}

// newAgentMemoryLimitCommand puts a share's GPU memory limit on a cgroup with the agent's own
// calls (cgrouplimit), for test/gpu/run.sh: it prints "memory-limit: kernel ..." where the driver
// took and reads back the limit, "memory-limit: library ..." where the driver has none (a share
// there keeps the share library's limit), and fails otherwise.
func newAgentMemoryLimitCommand() *cobra.Command {
	opts := agent.DefaultOptions()
	opts.NodeName, _ = os.Hostname()
	var uuid, dir string
	var mib uint64
	cmd := &cobra.Command{
		Use:    "memory-limit",
		Short:  "Set a GPU memory limit on a cgroup as the share device plugin does on a pod's (the real-GPU check)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if uuid == "" || dir == "" || mib == 0 {
				return errors.New("--device, --cgroup and --limit-mib are required")
			}
			got, err := agent.SetCgroupMemoryLimit(opts, uuid, dir, mib<<20)
			if errors.Is(err, cgrouplimit.ErrUnsupported) {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "memory-limit: library: %v\n", err)
				return err
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "memory-limit: kernel: GPU %s: hard limit %d MiB on %s (backend %s; reads back hard %d MiB, soft %d MiB, used %d MiB)\n",
				uuid, mib, dir, cgrouplimit.Backend(dir), got.Hard>>20, got.Soft>>20, got.Used>>20)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&uuid, "device", "", "The GPU's UUID.")
	f.StringVar(&dir, "cgroup", "", "The cgroup directory (its full path under the cgroup v2 mount).")
	f.Uint64Var(&mib, "limit-mib", 0, "The hard limit in MiB.")
	f.StringVar(&opts.NodeName, "node-name", opts.NodeName, "Node name (for mock UUIDs).")
	addNVMLFlag(cmd, &opts)
	return cmd
}
