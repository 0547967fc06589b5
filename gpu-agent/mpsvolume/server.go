package mpsvolume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/mps"
)

// Keys the kubelet adds to an inline volume's context (podInfoOnMount, and every ephemeral one).
const (
	podNameKey      = "csi.storage.k8s.io/pod.name"
	podNamespaceKey = "csi.storage.k8s.io/pod.namespace"
	podUIDKey       = "csi.storage.k8s.io/pod.uid"
	ephemeralKey    = "csi.storage.k8s.io/ephemeral"
)

// Version is the driver's version in GetPluginInfo.
const Version = "v1alpha1"

// Options configure the driver.
type Options struct {
	// NodeName is the node the agent serves (NodeGetInfo's node ID).
	NodeName string
	// Root holds a directory per pod (pods/<uid>/{pipe,shm,log}); made 0700, root's.
	Root string
	// Pods lists the pods bound to this node (the agent's cache).
	Pods func(ctx context.Context) ([]corev1.Pod, error)
	// GPUMemoryMiB returns the memory of the node's GPU of that UUID, 0 when unknown.
	GPUMemoryMiB func(uuid string) int64
	// MPS is the template of every pod's daemon (Enabled, Binary, MaxBackoff); without MPS (or
	// without the binary: see Available) the directories are still served and the node is in
	// soft mode.
	MPS mps.Options
	// Launcher returns the daemon launcher for a pod whose /dev/shm is dir
	// (mps.SharedMemoryLauncher in the agent); nil runs the daemon with the agent's /dev/shm.
	Launcher func(dir string) func(bin string, args ...string) *exec.Cmd
	// Mounter mounts and unmounts; bind mounts of this process when nil.
	Mounter Mounter
	// SharedMemoryBytes is the size of a pod's /dev/shm (a tmpfs of its own) when neither the
	// volume (fairwayv1.MPSSharedMemorySizeAttribute) nor the GPU container's memory limit says;
	// 64 MiB, the container runtime's default, when zero.
	SharedMemoryBytes int64
	// ReadyTimeout bounds how long a publish waits for the pod's daemon; 30s when zero.
	ReadyTimeout time.Duration
	Log          logr.Logger
}

// Driver serves the CSI Identity and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	opts      Options
	available bool

	mu   sync.Mutex
	ctx  context.Context
	pods map[types.UID]*podState
}

// podState is what the driver holds for one pod: its published targets and its daemon.
type podState struct {
	dir     string
	targets map[string]string // target path -> kind
	// resumed counts volumes published before the agent restarted, whose targets it does not
	// know.
	resumed int
	daemon  *mps.Daemon
	stop    context.CancelFunc
	done    chan struct{}
}

// New returns a driver; Serve runs it.
func New(opts Options) *Driver {
	if opts.Mounter == nil {
		opts.Mounter = bindMounter{}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.SharedMemoryBytes == 0 {
		opts.SharedMemoryBytes = 64 << 20
	}
	if opts.MPS.Binary == "" {
		opts.MPS.Binary = mps.DefaultBinary
	}
	_, err := exec.LookPath(opts.MPS.Binary)
	return &Driver{opts: opts, available: opts.MPS.Enabled && err == nil, pods: map[types.UID]*podState{}, ctx: context.Background()}
}

// Available reports whether fractional pods on this node get an MPS server of their own with
// server-side limits (MPS asked for and its control daemon found), and why not.
func (d *Driver) Available() mps.Status {
	switch {
	case d.available:
		return mps.Status{Enabled: true}
	case !d.opts.MPS.Enabled:
		return mps.Status{Reason: "disabled (--mps=false)"}
	}
	return mps.Status{Reason: d.opts.MPS.Binary + " not found"}
}

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: fairwayv1.MPSDriverName, VendorVersion: Version}, nil
}

// GetPluginCapabilities: a node-only driver, no controller service.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe: ready once serving.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// NodeGetInfo names the node.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.opts.NodeName}, nil
}

// NodeGetCapabilities: none; ephemeral volumes need no staging, and the kubelet applies the pod's
// fsGroup itself (the CSIDriver's fsGroupPolicy File).
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume mounts the pod's own MPS directory of the volume's kind at the target, and
// for the pipe directory makes sure the pod's daemon runs with its limits before the kubelet
// starts the pod's containers.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	vc := req.GetVolumeContext()
	target := req.GetTargetPath()
	if target == "" || req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	if vc[ephemeralKey] != "true" {
		return nil, status.Errorf(codes.InvalidArgument, "%s serves CSI ephemeral inline volumes only (volumeLifecycleModes: [Ephemeral])", fairwayv1.MPSDriverName)
	}
	kind := vc[fairwayv1.MPSVolumeAttribute]
	if kind != fairwayv1.MPSVolumePipe && kind != fairwayv1.MPSVolumeSharedMemory {
		return nil, status.Errorf(codes.InvalidArgument, "volumeAttributes[%s] = %q: want %q or %q",
			fairwayv1.MPSVolumeAttribute, kind, fairwayv1.MPSVolumePipe, fairwayv1.MPSVolumeSharedMemory)
	}
	pod, err := d.pod(ctx, vc[podNamespaceKey], vc[podNameKey])
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reading pod %s/%s: %v", vc[podNamespaceKey], vc[podNameKey], err)
	}
	if pod == nil || string(pod.UID) != vc[podUIDKey] || vc[podUIDKey] == "" {
		return nil, status.Errorf(codes.Unavailable, "pod %s/%s (uid %q) is not bound to node %s in the agent's cache yet",
			vc[podNamespaceKey], vc[podNameKey], vc[podUIDKey], d.opts.NodeName)
	}
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil || share.IsZero() {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s asks for no GPU share: %s volumes are only for fairway's fractional pods, which the webhook gives them",
			pod.Namespace, pod.Name, fairwayv1.MPSDriverName)
	}
	uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
	if uuid == "" {
		return nil, status.Errorf(codes.Unavailable, "pod %s/%s has no %s yet: the scheduler records the GPU before it binds the pod",
			pod.Namespace, pod.Name, fairwayv1.GPUUUIDAnnotation)
	}

	d.mu.Lock()
	ps, err := d.podDirs(pod)
	if err != nil {
		d.mu.Unlock()
		return nil, status.Errorf(codes.Internal, "pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	if err := d.opts.Mounter.Bind(filepath.Join(ps.dir, kind), target, req.GetReadonly()); err != nil {
		d.mu.Unlock()
		return nil, status.Errorf(codes.Internal, "mounting the %s directory of pod %s/%s at %s: %v", kind, pod.Namespace, pod.Name, target, err)
	}
	ps.targets[target] = kind
	var daemon *mps.Daemon
	if kind == fairwayv1.MPSVolumePipe && d.available {
		daemon = d.startDaemon(pod, ps, uuid, share)
	}
	d.mu.Unlock()

	if daemon != nil {
		wctx, cancel := context.WithTimeout(ctx, d.opts.ReadyTimeout)
		defer cancel()
		if err := daemon.WaitReady(wctx); err != nil {
			// The kubelet retries; the daemon keeps trying meanwhile.
			return nil, status.Errorf(codes.Unavailable, "the MPS control daemon of pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	d.opts.Log.V(1).Info("Published", "pod", pod.Namespace+"/"+pod.Name, "kind", kind, "target", target)
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target; the pod's last volume stops its daemon and removes
// its directories.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" || req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	if err := d.opts.Mounter.Unmount(target); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	uid := podUIDOfTarget(target)
	d.mu.Lock()
	ps := d.pods[uid]
	if ps != nil {
		if _, ok := ps.targets[target]; ok {
			delete(ps.targets, target)
		} else if ps.resumed > 0 {
			ps.resumed--
		}
	}
	last := ps != nil && len(ps.targets) == 0 && ps.resumed == 0
	if last {
		delete(d.pods, uid)
	}
	d.mu.Unlock()
	if last {
		d.release(ps)
	} else if ps == nil && uid != "" {
		// Published before the agent restarted: nothing in memory, the directory may remain.
		d.removeIfUnmounted(uid)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// release stops the pod's daemon and removes its directories.
func (d *Driver) release(ps *podState) {
	if ps.stop != nil {
		ps.stop()
		<-ps.done
	}
	if err := d.opts.Mounter.Unmount(filepath.Join(ps.dir, fairwayv1.MPSVolumeSharedMemory)); err != nil {
		d.opts.Log.Error(err, "Unmounting a pod's /dev/shm", "dir", ps.dir)
	}
	if err := os.RemoveAll(ps.dir); err != nil {
		d.opts.Log.Error(err, "Removing a pod's MPS directories", "dir", ps.dir)
	}
}

// removeIfUnmounted removes the directories of a pod the driver holds no state of.
func (d *Driver) removeIfUnmounted(uid types.UID) {
	if err := os.RemoveAll(filepath.Join(d.opts.Root, "pods", string(uid))); err != nil {
		d.opts.Log.Error(err, "Removing a pod's MPS directories", "podUID", uid)
	}
}

// podUIDOfTarget finds the pod UID in the kubelet's target path
// (<kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount).
func podUIDOfTarget(target string) types.UID {
	dir := target
	for range 4 {
		dir = filepath.Dir(dir)
	}
	if filepath.Base(filepath.Dir(dir)) != "pods" {
		return ""
	}
	return types.UID(filepath.Base(dir))
}

// startDaemon starts the pod's MPS control daemon once (callers hold d.mu).
func (d *Driver) startDaemon(pod *corev1.Pod, ps *podState, uuid string, share gpurequest.Request) *mps.Daemon {
	if ps.daemon != nil {
		return ps.daemon
	}
	memMiB := share.MemoryMiB
	if d.opts.GPUMemoryMiB != nil {
		memMiB = share.MemoryOn(d.opts.GPUMemoryMiB(uuid))
	}
	threads := 0
	if share.Milli > 0 {
		threads = int(min((share.Milli+9)/10, 100))
	}
	o := d.opts.MPS
	o.Enabled = true
	o.PipeDir = filepath.Join(ps.dir, fairwayv1.MPSVolumePipe)
	o.LogDir = filepath.Join(ps.dir, "log")
	o.SharedMemoryDir = filepath.Join(ps.dir, fairwayv1.MPSVolumeSharedMemory)
	o.Devices = []string{uuid}
	o.Setup = mps.Limits(o.Devices, memMiB, threads)
	if d.opts.Launcher != nil {
		o.Launch = d.opts.Launcher(o.SharedMemoryDir)
	}
	o.Log = d.opts.Log.WithValues("pod", pod.Namespace+"/"+pod.Name)
	ps.daemon = mps.New(o)
	ctx, cancel := context.WithCancel(d.ctx)
	ps.stop, ps.done = cancel, make(chan struct{})
	go func() {
		defer close(ps.done)
		if err := ps.daemon.Start(ctx); err != nil {
			o.Log.Error(err, "MPS control daemon of the pod")
		}
	}()
	o.Log.Info("Started the pod's MPS control daemon", "gpu", uuid, "memoryLimitMiB", memMiB, "threadPercent", threads)
	return ps.daemon
}

// pod finds the pod of that namespace and name on this node, nil when there is none.
func (d *Driver) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pods, err := d.opts.Pods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Namespace == namespace && pods[i].Name == name {
			return &pods[i], nil
		}
	}
	return nil, nil
}
