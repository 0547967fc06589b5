package shareplugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Strategy is one way the plugin tells the container runtime which GPU a container gets; the
// plugin answers with every strategy it is given, so that one answer serves runtimes with and
// without CDI.
type Strategy string

const (
	// StrategyCDI names the GPU's CDI devices in ContainerAllocateResponse.CDIDevices, which the
	// kubelet passes in the CRI (Kubernetes 1.31 and later; containerd 1.7.2 and later, CRI-O):
	// runtimes with CDI enabled, the GPU Operator's hardened default.
	StrategyCDI Strategy = "cdi-cri"
	// StrategyCDIAnnotations names them in the container's cdi.k8s.io annotations instead, for
	// runtimes with CDI that predate the CRI field. Not with StrategyCDI: a runtime reading both
	// would inject the devices twice.
	StrategyCDIAnnotations Strategy = "cdi-annotations"
	// StrategyDeviceNodes lists the GPU's device node and the driver's control nodes
	// (ContainerAllocateResponse.Devices): any runtime creates them in the container and
	// allows them in its device cgroup.
	StrategyDeviceNodes Strategy = "device-nodes"
	// StrategyVolumeMounts mounts /dev/null at /var/run/nvidia-container-devices/<UUID>, the
	// device list the NVIDIA runtime's legacy hook reads with
	// accept-nvidia-visible-devices-as-volume-mounts (it then mounts the driver's libraries).
	StrategyVolumeMounts Strategy = "volume-mounts"
	// StrategyEnvVar sets NVIDIA_VISIBLE_DEVICES=<UUID>, for NVIDIA runtimes configured to read
	// the variable; off by default (see the package documentation).
	StrategyEnvVar Strategy = "envvar"
)

// Strategies are the valid strategies, in the order of the flag's documentation.
var Strategies = []Strategy{StrategyCDI, StrategyCDIAnnotations, StrategyDeviceNodes, StrategyVolumeMounts, StrategyEnvVar}

// DefaultStrategies serve CDI runtimes and classic ones, never through the environment.
var DefaultStrategies = []Strategy{StrategyCDI, StrategyDeviceNodes, StrategyVolumeMounts}

// ParseStrategies reads a comma-separated list of strategies.
func ParseStrategies(s string) ([]Strategy, error) {
	var out []Strategy
	for f := range strings.SplitSeq(s, ",") {
		st := Strategy(strings.TrimSpace(f))
		if !slices.Contains(Strategies, st) {
			return nil, fmt.Errorf("device list strategy %q: want a comma-separated list of %v", f, Strategies)
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	if slices.Contains(out, StrategyCDI) && slices.Contains(out, StrategyCDIAnnotations) {
		return nil, fmt.Errorf("device list strategies %q: %s or %s, not both (a runtime that reads both injects the devices twice)", s, StrategyCDI, StrategyCDIAnnotations)
	}
	return out, nil
}

// VolumeMountsRoot is where the NVIDIA runtime's hook looks for device-list volume mounts.
const VolumeMountsRoot = "/var/run/nvidia-container-devices"

// visibleDevicesEnv is the NVIDIA runtime's device-list variable (StrategyEnvVar only).
const visibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// DefaultControlDevices are the NVIDIA driver's device nodes every CUDA process opens besides its
// GPU's /dev/nvidia<minor>.
var DefaultControlDevices = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

// GPU is one physical GPU of the node as the plugin serves it.
type GPU struct {
	UUID string
	// Minor is the device's minor number: its node is /dev/nvidia<Minor>.
	Minor   int
	Healthy bool
	// MemoryMiB is the device's memory (a fraction's share of it is the share's limit).
	MemoryMiB int64
}

// DeviceNode is the GPU's device node on the host.
func (g GPU) DeviceNode() string { return "/dev/nvidia" + strconv.Itoa(g.Minor) }

// Options configure a Plugin.
type Options struct {
	// NodeName is the agent's node: the plugin serves only pods bound to it.
	NodeName string
	// SlotsPerGPU is how many share slots each GPU offers the kubelet
	// (v1alpha1.DefaultShareSlotsPerGPU when 0).
	SlotsPerGPU int
	// Strategies say how the GPU is named to the runtime (DefaultStrategies when nil).
	Strategies []Strategy
	// ControlDevices are the driver's device nodes every share gets (DefaultControlDevices when
	// nil); Exists, when set, leaves out those the host lacks.
	ControlDevices []string
	// Exists reports whether a host path exists (nil: assume every device node does).
	Exists func(path string) bool
	// CDI resolves and writes CDI devices; nil answers no CDI devices.
	CDI *CDI
	// GPUs returns the node's GPUs now (the agent's latest discovery).
	GPUs func() []GPU
	// Pods lists the pods bound to the node (the agent's informer cache).
	Pods func(ctx context.Context) ([]corev1.Pod, error)
	// Admitted returns the share slots the kubelet gave each pod it admitted (its PodResources
	// API, assign.Client.List of v1alpha1.ResourceGPUShare); such pods never take a new
	// allocation. Nil when the kubelet cannot be asked.
	Admitted func(ctx context.Context) (map[types.NamespacedName][]string, error)
	// Files, when set, gives a share's container its files: the share library and its
	// configuration (gpu-agent/shim), as mounts of host paths the kubelet makes (no hostPath
	// in the pod). An error refuses the allocation: a share never starts without its limit.
	Files func(pod *corev1.Pod, g GPU) ([]*pluginapi.Mount, error)
	// Limit, when set, puts the share's memory limit on its pod's cgroup before each of the
	// pod's share containers starts: the plugin asks the kubelet for PreStartContainer calls,
	// which come after the kubelet made the pod's cgroup and before the container's processes
	// exist (Allocate comes at admission, when the cgroup may not exist yet). kernel false with
	// no error: the driver has no such limit, and the share keeps the library's. An error
	// refuses the container: a share never starts without its limit where the driver has one.
	Limit func(pod *corev1.Pod, g GPU) (kernel bool, err error)
	// Wait bounds how long a call waits for the pod being admitted to reach the cache (the
	// kubelet's watch may be ahead of the agent's). Poll is how often it looks meanwhile.
	Wait, Poll time.Duration
	Log        logr.Logger
}

// Plugin serves fairway.dev/gpu-share. Its gRPC methods are the kubelet's device-plugin API.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	opts Options

	// admit serialises the kubelet's calls: choosing the pod and recording the choice are one
	// step, so two concurrent admissions never take the same pod.
	admit sync.Mutex

	mu sync.Mutex
	// order is when the plugin first saw each pod bound to its node: the kubelet admits pods in
	// the order their bindings reach it, which is the order they reach the agent.
	order map[types.UID]uint64
	next  uint64
	// allocated are the pods the plugin answered an Allocate for, and their GPU; slots are
	// the share slots it answered, and their pod (PreStartContainer names slots only).
	allocated map[types.UID]string
	slots     map[string]types.UID
	// devices is what ListAndWatch last sent; changed is closed and replaced when it changes.
	devices []*pluginapi.Device
	changed chan struct{}
}

// New returns a plugin; Refresh gives it its devices.
func New(opts Options) *Plugin {
	if opts.SlotsPerGPU <= 0 {
		opts.SlotsPerGPU = fairwayv1alpha1.DefaultShareSlotsPerGPU
	}
	if opts.Strategies == nil {
		opts.Strategies = DefaultStrategies
	}
	if opts.ControlDevices == nil {
		opts.ControlDevices = DefaultControlDevices
	}
	if opts.Poll <= 0 {
		opts.Poll = 20 * time.Millisecond
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.GPUs == nil {
		opts.GPUs = func() []GPU { return nil }
	}
	p := &Plugin{opts: opts, order: map[types.UID]uint64{}, allocated: map[types.UID]string{}, slots: map[string]types.UID{}, changed: make(chan struct{})}
	p.Refresh()
	return p
}

// Refresh re-reads the GPUs and, when the devices changed, sends them to the kubelet (and writes
// the CDI spec). The agent calls it after every discovery.
func (p *Plugin) Refresh() {
	gpus := p.opts.GPUs()
	var devs []*pluginapi.Device
	for _, g := range gpus {
		h := pluginapi.Unhealthy
		if g.Healthy {
			h = pluginapi.Healthy
		}
		for k := range p.opts.SlotsPerGPU {
			devs = append(devs, &pluginapi.Device{ID: fairwayv1alpha1.ShareSlotID(g.UUID, k), Health: h})
		}
	}
	p.mu.Lock()
	same := slices.EqualFunc(devs, p.devices, func(a, b *pluginapi.Device) bool { return a.ID == b.ID && a.Health == b.Health })
	if !same {
		p.devices = devs
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
	if !same && p.opts.CDI != nil {
		if err := p.opts.CDI.WriteSpec(gpus, p.controlDevices()); err != nil {
			p.opts.Log.Error(err, "Writing the CDI spec of the node's GPUs; shares get their device nodes only")
		}
	}
}

// GetDevicePluginOptions asks the kubelet for GetPreferredAllocation calls, by which the plugin
// steers it to a slot of the GPU the scheduler chose, and, with Options.Limit, for
// PreStartContainer calls, in which it sets the share's limit on the pod's cgroup.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.pluginOptions(), nil
}

func (p *Plugin) pluginOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: p.opts.Limit != nil}
}

// ListAndWatch sends the share slots, and again whenever they change, until the kubelet hangs up.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		resp := &pluginapi.ListAndWatchResponse{Devices: p.devices}
		changed := p.changed
		p.mu.Unlock()
		if err := s.Send(resp); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// GetPreferredAllocation prefers slots of the GPU the scheduler chose for the pod being admitted.
// When it cannot tell the pod, it prefers nothing, and Allocate refuses what the kubelet picks
// unless a pod waits for that GPU.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.admit.Lock()
	defer p.admit.Unlock()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids := []string{}
		if c, err := p.waitFor(ctx, ""); err == nil && c.uuid != "" {
			ids = preferSlots(c.uuid, cr.GetMustIncludeDeviceIDs(), cr.GetAvailableDeviceIDs(), int(cr.GetAllocationSize()))
		} else if err != nil {
			p.opts.Log.V(1).Info("No preferred share slot", "reason", err.Error())
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// preferSlots returns size slots of the GPU uuid, the must-include ones first; none when the
// GPU has too few available.
func preferSlots(uuid string, must, available []string, size int) []string {
	out := slices.Clone(must)
	for _, id := range available {
		if len(out) >= size {
			break
		}
		if g, err := fairwayv1alpha1.ParseShareSlotID(id); err == nil && g == uuid && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) < size {
		return nil
	}
	return out
}

// Allocate answers each container's slots with the GPU they belong to, for the pod that waits
// for a share of that GPU; it refuses slots of several GPUs, slots of no GPU of the node, and
// slots no waiting pod was placed on.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.admit.Lock()
	defer p.admit.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		g, err := p.gpuOf(cr.GetDevicesIds())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		c, err := p.waitFor(ctx, g.UUID)
		if err != nil {
			p.opts.Log.Error(err, "Refused a GPU share", "gpu", g.UUID, "devices", cr.GetDevicesIds())
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		r := p.response(g)
		if p.opts.Files != nil {
			mounts, err := p.opts.Files(c.pod, g)
			if err != nil {
				p.opts.Log.Error(err, "Refused a GPU share: its files could not be prepared", "pod", klog.KObj(c.pod), "gpu", g.UUID)
				return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf("pod %s: preparing the share's files: %v", klog.KObj(c.pod), err))
			}
			r.Mounts = append(r.Mounts, mounts...)
		}
		p.mu.Lock()
		p.allocated[c.pod.UID] = g.UUID
		for _, id := range cr.GetDevicesIds() {
			p.slots[id] = c.pod.UID
		}
		p.mu.Unlock()
		p.opts.Log.Info("Gave a GPU share its device", "pod", klog.KObj(c.pod), "gpu", g.UUID, "devices", cr.GetDevicesIds())
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// gpuOf is the one GPU of the node the slots belong to.
func (p *Plugin) gpuOf(ids []string) (GPU, error) {
	if len(ids) == 0 {
		return GPU{}, fmt.Errorf("the kubelet asked for no %s slot", fairwayv1alpha1.ResourceGPUShare)
	}
	uuid := ""
	for _, id := range ids {
		g, err := fairwayv1alpha1.ParseShareSlotID(id)
		if err != nil {
			return GPU{}, err
		}
		if uuid != "" && g != uuid {
			return GPU{}, fmt.Errorf("the kubelet asked for %s slots of two GPUs (%s and %s): a share is on one GPU", fairwayv1alpha1.ResourceGPUShare, uuid, g)
		}
		uuid = g
	}
	for _, g := range p.opts.GPUs() {
		if g.UUID == uuid {
			return g, nil
		}
	}
	return GPU{}, fmt.Errorf("%s slot %s: GPU %s is not a GPU of node %s", fairwayv1alpha1.ResourceGPUShare, ids[0], uuid, p.opts.NodeName)
}

// response is the container's answer for GPU g, by every configured strategy.
func (p *Plugin) response(g GPU) *pluginapi.ContainerAllocateResponse {
	r := &pluginapi.ContainerAllocateResponse{}
	for _, st := range p.opts.Strategies {
		switch st {
		case StrategyCDI:
			if p.opts.CDI == nil {
				continue
			}
			for _, name := range p.opts.CDI.Devices(g) {
				r.CdiDevices = append(r.CdiDevices, &pluginapi.CDIDevice{Name: name})
			}
		case StrategyCDIAnnotations:
			if p.opts.CDI == nil {
				continue
			}
			ann, err := cdiAnnotations(g.UUID, p.opts.CDI.Devices(g))
			if err != nil {
				p.opts.Log.Error(err, "Naming the CDI devices in annotations", "gpu", g.UUID)
				continue
			}
			r.Annotations = ann
		case StrategyDeviceNodes:
			for _, path := range append([]string{g.DeviceNode()}, p.controlDevices()...) {
				r.Devices = append(r.Devices, &pluginapi.DeviceSpec{ContainerPath: path, HostPath: path, Permissions: "rw"})
			}
		case StrategyVolumeMounts:
			r.Mounts = append(r.Mounts, &pluginapi.Mount{ContainerPath: VolumeMountsRoot + "/" + g.UUID, HostPath: "/dev/null", ReadOnly: true})
		case StrategyEnvVar:
			r.Envs = map[string]string{visibleDevicesEnv: g.UUID}
		}
	}
	return r
}

// controlDevices are the driver's control nodes the host has.
func (p *Plugin) controlDevices() []string {
	if p.opts.Exists == nil {
		return p.opts.ControlDevices
	}
	var out []string
	for _, d := range p.opts.ControlDevices {
		if p.opts.Exists(d) {
			out = append(out, d)
		}
	}
	return out
}

// candidate is a pod bound to the node that waits for its share's device.
type candidate struct {
	pod *corev1.Pod
	// uuid is the GPU the scheduler chose for it, "" when none is recorded.
	uuid string
	seq  uint64
}

// errNoDecision: no pod waiting on the node fits the kubelet's call.
var errNoDecision = errors.New("no pod fits")

// waitFor returns the first waiting pod placed on the GPU uuid (any waiting pod when uuid is ""),
// waiting up to Options.Wait for it to reach the cache.
func (p *Plugin) waitFor(ctx context.Context, uuid string) (candidate, error) {
	deadline := time.Now().Add(p.opts.Wait)
	for {
		cands, err := p.waiting(ctx)
		if err != nil {
			return candidate{}, err
		}
		for _, c := range cands {
			if uuid == "" || c.uuid == uuid {
				return c, nil
			}
		}
		if !time.Now().Before(deadline) {
			return candidate{}, p.explain(uuid, cands)
		}
		select {
		case <-ctx.Done():
			return candidate{}, fmt.Errorf("waiting for the pod being admitted: %w", ctx.Err())
		case <-time.After(p.opts.Poll):
		}
	}
}

// explain says why no waiting pod fits.
func (p *Plugin) explain(uuid string, cands []candidate) error {
	if len(cands) == 0 {
		return fmt.Errorf("%w: no pod bound to node %s waits for a %s (none that the kubelet has not admitted yet)",
			errNoDecision, p.opts.NodeName, fairwayv1alpha1.ResourceGPUShare)
	}
	var seen []string
	for _, c := range cands {
		gpu := c.uuid
		if gpu == "" {
			gpu = "no GPU recorded (" + fairwayv1alpha1.GPUUUIDAnnotation + " unset: not placed by fairway's scheduler)"
		}
		seen = append(seen, klog.KObj(c.pod).String()+" on "+gpu)
	}
	if uuid == "" {
		return fmt.Errorf("%w: the pods waiting for a %s on node %s have no GPU recorded: %s",
			errNoDecision, fairwayv1alpha1.ResourceGPUShare, p.opts.NodeName, strings.Join(seen, "; "))
	}
	return fmt.Errorf("%w: the kubelet chose a %s slot of GPU %s, but no pod waiting on node %s was placed there by the scheduler; waiting: %s",
		errNoDecision, fairwayv1alpha1.ResourceGPUShare, uuid, p.opts.NodeName, strings.Join(seen, "; "))
}

// waiting lists the pods bound to the node that ask for a share and have not been given one,
// in the order their bindings reached the plugin.
func (p *Plugin) waiting(ctx context.Context) ([]candidate, error) {
	pods, err := p.opts.Pods(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", p.opts.NodeName, err)
	}
	var admitted map[types.NamespacedName][]string
	if p.opts.Admitted != nil {
		if admitted, err = p.opts.Admitted(ctx); err != nil {
			p.opts.Log.V(1).Info("The kubelet's PodResources API did not answer; judging admission by the pods' status", "error", err.Error())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var fresh []*corev1.Pod
	present := make(map[types.UID]bool, len(pods))
	var out []candidate
	for i := range pods {
		pod := &pods[i]
		present[pod.UID] = true
		if pod.Spec.NodeName != p.opts.NodeName || fairwayv1alpha1.ShareRequest(pod) == 0 {
			continue
		}
		if _, ok := p.order[pod.UID]; !ok {
			fresh = append(fresh, pod)
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) > 0 ||
			len(admitted[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]) > 0 || p.allocated[pod.UID] != "" {
			continue
		}
		out = append(out, candidate{pod: pod, uuid: pod.Annotations[fairwayv1alpha1.GPUUUIDAnnotation]})
	}
	// Pods first seen in one listing are ordered as the kubelet orders a batch: by creation.
	slices.SortStableFunc(fresh, func(a, b *corev1.Pod) int {
		if c := scheduledAt(a).Compare(scheduledAt(b)); c != 0 {
			return c
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, pod := range fresh {
		p.order[pod.UID] = p.next
		p.next++
	}
	for uid := range p.order {
		if !present[uid] {
			delete(p.order, uid)
			delete(p.allocated, uid)
		}
	}
	for id, uid := range p.slots {
		if !present[uid] {
			delete(p.slots, id)
		}
	}
	for i := range out {
		out[i].seq = p.order[out[i].pod.UID]
	}
	slices.SortFunc(out, func(a, b candidate) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// Observe records that the pod was seen bound to the node, in the order the agent's informer
// delivers bindings (the order the kubelet receives them). Optional: pods never observed are
// ordered when first listed.
func (p *Plugin) Observe(pod *corev1.Pod) {
	if pod == nil || pod.Spec.NodeName != p.opts.NodeName || fairwayv1alpha1.ShareRequest(pod) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.order[pod.UID]; !ok {
		p.order[pod.UID] = p.next
		p.next++
	}
}

func scheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// PreStartContainer puts the share's memory limit on the cgroup of the pod that holds the slots
// (Options.Limit), before the container starts; it refuses the container when the limit cannot
// be set where the driver has one.
func (p *Plugin) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if p.opts.Limit == nil {
		return &pluginapi.PreStartContainerResponse{}, nil
	}
	ids := req.GetDevicesIds()
	g, err := p.gpuOf(ids)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	pod, err := p.holder(ctx, ids)
	if err != nil {
		p.opts.Log.Error(err, "Refused to start a GPU share's container: its pod is unknown", "gpu", g.UUID, "devices", ids)
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	kernel, err := p.opts.Limit(pod, g)
	if err != nil {
		p.opts.Log.Error(err, "Refused to start a GPU share's container: its memory limit could not be set on its pod's cgroup", "pod", klog.KObj(pod), "gpu", g.UUID)
		return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf("pod %s: setting the GPU share's memory limit on its cgroup: %v", klog.KObj(pod), err))
	}
	if kernel {
		p.opts.Log.Info("Set a GPU share's memory limit on its pod's cgroup (kernel-enforced)", "pod", klog.KObj(pod), "gpu", g.UUID)
	} else {
		p.opts.Log.V(1).Info("The driver has no per-cgroup memory limit; the share keeps the share library's", "pod", klog.KObj(pod), "gpu", g.UUID)
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}

// holder is the pod that holds the slots: the one the plugin gave them to, or, after an agent
// restart, the one the kubelet's record (PodResources) shows with them.
func (p *Plugin) holder(ctx context.Context, ids []string) (*corev1.Pod, error) {
	p.mu.Lock()
	uid := p.slots[ids[0]]
	p.mu.Unlock()
	var owner types.NamespacedName
	if uid == "" && p.opts.Admitted != nil {
		admitted, err := p.opts.Admitted(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s slot %s: the kubelet's PodResources API: %w", fairwayv1alpha1.ResourceGPUShare, ids[0], err)
		}
		for key, slots := range admitted {
			if slices.Contains(slots, ids[0]) {
				owner = key
			}
		}
	}
	if uid == "" && owner.Name == "" {
		return nil, fmt.Errorf("%s slot %s: no pod holds it", fairwayv1alpha1.ResourceGPUShare, ids[0])
	}
	pods, err := p.opts.Pods(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", p.opts.NodeName, err)
	}
	for i := range pods {
		pod := &pods[i]
		if (uid != "" && pod.UID == uid) || (uid == "" && pod.Namespace == owner.Namespace && pod.Name == owner.Name) {
			return pod, nil
		}
	}
	who := string(uid)
	if who == "" {
		who = owner.String()
	}
	return nil, fmt.Errorf("%s slot %s: its pod (%s) is not among the pods of node %s", fairwayv1alpha1.ResourceGPUShare, ids[0], who, p.opts.NodeName)
}

// Mismatch is a pod whose share slots, in the kubelet's record, are on another GPU than the one
// the scheduler chose for it: the plugin gave it the GPU of its slots. Only two share pods
// admitted by the kubelet in another order than their bindings reached the agent can end so.
type Mismatch struct {
	Pod types.NamespacedName
	// Decided is the pod's GPU as the scheduler recorded it, Delivered the GPU of its slots.
	Decided, Delivered string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("pod %s was placed on GPU %s but holds a share slot of GPU %s", m.Pod, m.Decided, m.Delivered)
}

// Mismatches compares the kubelet's record of share slots with the pods' decisions.
func (p *Plugin) Mismatches(ctx context.Context) ([]Mismatch, error) {
	if p.opts.Admitted == nil {
		return nil, nil
	}
	admitted, err := p.opts.Admitted(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := p.opts.Pods(ctx)
	if err != nil {
		return nil, err
	}
	var out []Mismatch
	for i := range pods {
		pod := &pods[i]
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		ids := admitted[key]
		if len(ids) == 0 {
			continue
		}
		decided := pod.Annotations[fairwayv1alpha1.GPUUUIDAnnotation]
		for _, id := range ids {
			if g, err := fairwayv1alpha1.ParseShareSlotID(id); err == nil && g != decided {
				out = append(out, Mismatch{Pod: key, Decided: decided, Delivered: g})
				break
			}
		}
	}
	return out, nil
}
