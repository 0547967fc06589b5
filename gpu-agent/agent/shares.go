//go:build cgo

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/cgrouplimit"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
)

// auditEvery is how often the agent compares the kubelet's record of share slots with the pods'
// decisions (shareplugin.Mismatches).
const auditEvery = 10 * time.Second

// shareGPUs are the GPUs of inv a share can be given: healthy or not, with a known minor
// number, not in MIG mode (the scheduler places no fractions there).
func shareGPUs(inv *fairwayv1alpha1.GPUInventory, minors []int) []shareplugin.GPU {
	var out []shareplugin.GPU
	for i, g := range inv.GPUs {
		if i >= len(minors) || minors[i] < 0 || g.MIGEnabled || g.UUID == "" {
			continue
		}
		out = append(out, shareplugin.GPU{UUID: g.UUID, Minor: minors[i], Healthy: g.Healthy, MemoryMiB: g.MemoryMiB})
	}
	return out
}

func (a *Agent) currentShareGPUs() []shareplugin.GPU {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.shareGPUs)
}

// refreshShares hands the share device plugin the GPUs of the latest discovery.
func (a *Agent) refreshShares() {
	if a.share != nil {
		a.share.Refresh()
	}
}

// sharePlugin makes the share device plugin and the runnable that serves it: it sees the
// node's pods in the order the agent's informer delivers them, and every auditEvery compares
// the kubelet's record with the pods' decisions.
func (a *Agent) sharePlugin(mgr manager.Manager, pods func(context.Context) ([]corev1.Pod, error), lister *assign.Client) (manager.Runnable, error) {
	strategies, err := shareplugin.ParseStrategies(a.opts.DeviceListStrategy)
	if err != nil {
		return nil, err
	}
	opts := shareplugin.Options{
		NodeName:    a.opts.NodeName,
		SlotsPerGPU: a.opts.GPUShareSlots,
		Strategies:  strategies,
		GPUs:        a.currentShareGPUs,
		Pods:        pods,
		Admitted: func(ctx context.Context) (map[types.NamespacedName][]string, error) {
			return lister.List(ctx, string(fairwayv1alpha1.ResourceGPUShare))
		},
		Wait: 10 * time.Second,
		Log:  a.log.WithName("gpu-share"),
	}
	if dir := a.opts.HostDevDir; dir != "" {
		opts.Exists = func(path string) bool {
			_, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(path, "/dev/")))
			return err == nil
		}
	}
	if dirs := a.opts.CDISpecDirs; dirs != "" {
		if opts.CDI, err = shareplugin.NewCDI(strings.Split(dirs, ",")); err != nil {
			return nil, fmt.Errorf("--cdi-spec-dirs: %w", err)
		}
	}
	if dir := a.opts.ShareLibraryDir; dir != "" {
		if err := shim.Install(dir, a.opts.ShareLibrary); err != nil {
			return nil, fmt.Errorf("--share-library-directory: %w", err)
		}
		opts.Files = a.shareFiles
	}
	if a.opts.ShareCgroupLimit {
		opts.Limit = a.shareLimit
	}
	a.share = shareplugin.New(opts)
	p := a.share
	return manager.RunnableFunc(func(ctx context.Context) error {
		inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("pod informer: %w", err)
		}
		observe := func(o any) {
			if pod, ok := o.(*corev1.Pod); ok {
				p.Observe(pod)
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }, DeleteFunc: a.forgetShareFiles,
		}); err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		p.Refresh()
		go a.auditShares(ctx, p)
		return p.Serve(ctx, a.opts.DevicePluginDir)
	}), nil
}

// shareFiles prepares pod's share library configuration for GPU g: the share's memory (its
// gpu-memory, else its fraction of g's memory) as the limit, and the MPS pipe directory when
// the node runs MPS. Keyed by the pod's UID; forgetShareFiles removes it with the pod.
func (a *Agent) shareFiles(pod *corev1.Pod, g shareplugin.GPU) ([]*pluginapi.Mount, error) {
	bytes, err := shareBytes(pod, g)
	if err != nil {
		return nil, err
	}
	c := shim.Config{MemoryLimitBytes: bytes}
	if a.opts.MPS {
		c.MPSPipeDirectory = shim.DefaultPipeDirectory
	}
	return shim.Prepare(a.opts.ShareLibraryDir, string(pod.UID), c)
}

// shareBytes is the share's memory on GPU g: its gpu-memory, else its fraction of g's memory.
// The share library's limit (share.conf) and the pod's cgroup limit are both this number.
func shareBytes(pod *corev1.Pod, g shareplugin.GPU) (int64, error) {
	req, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		return 0, err
	}
	mib := req.MemoryOn(g.MemoryMiB)
	if mib <= 0 {
		return 0, fmt.Errorf("pod %s asks for no GPU share (%s, %s) of GPU %s (%d MiB)", klog.KObj(pod), req.Fraction(), req.Memory(), g.UUID, g.MemoryMiB)
	}
	return mib << 20, nil
}

// shareLimit puts the share's memory limit on GPU g on its pod's cgroup (package cgrouplimit).
// kernel is false where the driver has no such limit: the share keeps the library's.
func (a *Agent) shareLimit(pod *corev1.Pod, g shareplugin.GPU) (kernel bool, err error) {
	bytes, err := shareBytes(pod, g)
	if err != nil {
		return false, err
	}
	dir, err := a.limiter().Set(pod.UID, g.UUID, uint64(bytes))
	if errors.Is(err, cgrouplimit.ErrUnsupported) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.log.V(1).Info("GPU share limit on the pod's cgroup", "pod", klog.KObj(pod), "gpu", g.UUID, "bytes", bytes, "cgroup", dir)
	return true, nil
}

// limiter sets share limits on pods' cgroups under the agent's cgroup root.
func (a *Agent) limiter() *cgrouplimit.Limiter {
	return &cgrouplimit.Limiter{Root: a.opts.CgroupRoot, Device: a.deviceByUUID}
}

// deviceByUUID is the node's GPU of that UUID.
func (a *Agent) deviceByUUID(uuid string) (gpu.Device, error) {
	n, err := a.lib.DeviceCount()
	if err != nil {
		return nil, err
	}
	for i := range n {
		d, err := a.lib.Device(i)
		if err != nil {
			continue
		}
		if u, err := d.UUID(); err == nil && u == uuid {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no such GPU on node %s", a.opts.NodeName)
}

// SetCgroupMemoryLimit opens the library opts names and puts a hard limit of bytes on the GPU
// uuid on the cgroup directory dir, as the share device plugin does on a pod's cgroup (for
// test/gpu/run.sh: `fairway agent memory-limit`); it returns what reads back. Where the driver
// has no per-cgroup limit it fails with cgrouplimit.ErrUnsupported.
func SetCgroupMemoryLimit(opts Options, uuid, dir string, bytes uint64) (gpu.MemoryLimits, error) {
	lib, err := OpenLibrary(&opts)
	if err != nil {
		return gpu.MemoryLimits{}, err
	}
	if err := lib.Init(); err != nil {
		return gpu.MemoryLimits{}, Explain(err)
	}
	defer func() { _ = lib.Shutdown() }()
	a := &Agent{opts: opts, lib: lib}
	return a.limiter().SetDir(dir, uuid, bytes)
}

// kernelMemoryLimits marks the GPUs of inv whose driver limits a cgroup's memory, where the
// agent sets share limits on pods' cgroups; it logs each GPU whose answer changed.
func (a *Agent) kernelMemoryLimits(inv *fairwayv1alpha1.GPUInventory) {
	if !a.opts.ShareCgroupLimit || a.opts.DevicePluginDir == "" {
		return
	}
	if a.kernelLimits == nil {
		a.kernelLimits = map[string]bool{}
	}
	l := a.limiter()
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if g.MIGEnabled || !g.Healthy || g.UUID == "" {
			continue
		}
		ok, err := l.Supported(g.UUID)
		g.KernelMemoryLimit = ok
		if err != nil {
			a.log.V(1).Info("Reading a GPU's per-cgroup memory limits", "gpu", g.UUID, "error", err.Error())
		}
		if was, seen := a.kernelLimits[g.UUID]; !seen || was != ok {
			a.kernelLimits[g.UUID] = ok
			if ok {
				a.log.Info("GPU shares get a kernel-enforced memory limit on their pod's cgroup", "gpu", g.UUID, "driver", inv.Driver)
			} else {
				a.log.Info("The driver has no per-cgroup memory limit; GPU shares keep the share library's limit, which a process that does not load it escapes", "gpu", g.UUID, "driver", inv.Driver)
			}
		}
	}
}

// forgetShareFiles removes a deleted pod's share files.
func (a *Agent) forgetShareFiles(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok || a.opts.ShareLibraryDir == "" || pod.Spec.NodeName != a.opts.NodeName {
		return
	}
	if err := shim.Remove(a.opts.ShareLibraryDir, string(pod.UID)); err != nil {
		a.log.Error(err, "Removing a share's files", "pod", klog.KObj(pod))
	}
}

// auditShares logs, once per pod, a share whose slot in the kubelet's record is on another GPU
// than the scheduler chose for it.
func (a *Agent) auditShares(ctx context.Context, p *shareplugin.Plugin) {
	reported := map[string]bool{}
	t := time.NewTicker(auditEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ms, err := p.Mismatches(ctx)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if !reported[m.String()] {
				reported[m.String()] = true
				a.log.Error(nil, "A GPU share runs on another GPU than the scheduler chose; delete the pod to place it again", "mismatch", m.String())
			}
		}
	}
}
