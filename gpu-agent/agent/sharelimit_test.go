//go:build cgo

package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
)

// TestShareLimitOnThePodCgroup drives the share device plugin as the kubelet does (Allocate at
// admission, PreStartContainer before the container starts) on a fake node whose go-nvml mock
// GPUs have the driver's per-cgroup memory limit: the pod's cgroup, found under the agent's
// cgroup root, gets the share's bytes as its hard limit on the pod's GPU, the same number as
// the share library's share.conf; a limit the driver refuses refuses the container; a driver
// without the limit starts it with the library's alone, and discovery reports which is which.
func TestShareLimitOnThePodCgroup(t *testing.T) {
	opts := DefaultOptions()
	opts.NodeName, opts.NVML, opts.DevicePluginDir = "n1", "mock:dgxh100", "unused"
	opts.CgroupRoot, opts.ShareLibraryDir = t.TempDir(), t.TempDir()
	libFile := filepath.Join(t.TempDir(), shim.LibraryName)
	if err := os.WriteFile(libFile, []byte("not really a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := shim.Install(opts.ShareLibraryDir, libFile); err != nil {
		t.Fatal(err)
	}
	lib, err := OpenLibrary(&opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: opts, lib: lib, log: testr.New(t)}

	// GPU 1 has the driver's limit, as r615 and later: what is set per cgroup, the next answer.
	var mu sync.Mutex
	set := map[string][2]uint64{}
	ret := nvml.SUCCESS
	dev := lib.Fake.Device(1)
	dev.SetMemoryLimits_v1Func = func(ns string, soft, hard uint64) nvml.Return {
		mu.Lock()
		defer mu.Unlock()
		if ret == nvml.SUCCESS {
			set[ns] = [2]uint64{soft, hard}
		}
		return ret
	}
	dev.GetMemoryLimits_v1Func = func(ns string) (nvml.MemoryLimits_v1, nvml.Return) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := set[ns]
		if !ok {
			return nvml.MemoryLimits_v1{NameSpace: ns, HardLimit: nvml.DEVICE_MEMORY_LIMIT_MAX}, nvml.SUCCESS
		}
		return nvml.MemoryLimits_v1{NameSpace: ns, SoftLimit: l[0], HardLimit: l[1]}, nvml.SUCCESS
	}
	uuid0, uuid1 := fakegpu.DeviceUUID("n1", 0), fakegpu.DeviceUUID("n1", 1)
	inv := v1alpha1.GPUInventory{GPUs: []v1alpha1.GPUDevice{{UUID: uuid0, MemoryMiB: 81920, Healthy: true}, {UUID: uuid1, MemoryMiB: 81920, Healthy: true}, {UUID: "GPU-mig", MIGEnabled: true, Healthy: true}}}
	a.kernelMemoryLimits(&inv)
	if inv.GPUs[0].KernelMemoryLimit || !inv.GPUs[1].KernelMemoryLimit || inv.GPUs[2].KernelMemoryLimit {
		t.Errorf("kernel memory limits %v %v %v, want only GPU 1's", inv.GPUs[0].KernelMemoryLimit, inv.GPUs[1].KernelMemoryLimit, inv.GPUs[2].KernelMemoryLimit)
	}

	var pods []corev1.Pod
	share := func(name, uuid, frac string, qos string) *corev1.Pod {
		one := corev1.ResourceList{v1alpha1.ResourceGPUShare: resource.MustParse("1")}
		uid := "0c9d1c1a-3c5e-4b51-a1f0-00000000000" + strconv.Itoa(len(pods))
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID(uid),
				Annotations: map[string]string{v1alpha1.GPUUUIDAnnotation: uuid, v1alpha1.GPUFractionAnnotation: frac}},
			Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: one, Requests: one}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		})
		// The kubelet made the pod's cgroup (systemd driver) before the container starts.
		dir := filepath.Join(opts.CgroupRoot, "kubepods.slice", "kubepods-"+qos+".slice", "kubepods-"+qos+"-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return &pods[len(pods)-1]
	}
	gpus := shareGPUs(&inv, []int{0, 1, 2})
	p := shareplugin.New(shareplugin.Options{NodeName: "n1", SlotsPerGPU: 4, GPUs: func() []shareplugin.GPU { return gpus },
		Pods: func(context.Context) ([]corev1.Pod, error) { return pods, nil }, Files: a.shareFiles, Limit: a.shareLimit,
		Wait: 50 * time.Millisecond, Poll: time.Millisecond, Log: testr.New(t)})
	start := func(slot string) (string, error) {
		t.Helper()
		resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{slot}}}})
		if err != nil {
			t.Fatalf("Allocate %s: %v", slot, err)
		}
		conf, err := os.ReadFile(filepath.Join(resp.ContainerResponses[0].Mounts[len(resp.ContainerResponses[0].Mounts)-2].HostPath, shim.ConfigName))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: []string{slot}})
		return string(conf), err
	}

	share("quarter", uuid1, "0.25", "burstable")
	conf, err := start(v1alpha1.ShareSlotID(uuid1, 0))
	if err != nil {
		t.Fatalf("PreStartContainer: %v", err)
	}
	want := uint64(gpus[1].MemoryMiB/4) << 20
	dir := filepath.Join(opts.CgroupRoot, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_000000000000.slice")
	if got := set[dir]; got != [2]uint64{0, want} || len(set) != 1 {
		t.Errorf("limits set %v, want only %s: soft 0, hard %d", set, dir, want)
	}
	if !strings.Contains(conf, "memory_limit_bytes="+strconv.FormatUint(want, 10)+"\n") {
		t.Errorf("share.conf does not carry the cgroup's limit %d:\n%s", want, conf)
	}

	// A driver that has the limit but refuses it: the container does not start.
	ret = nvml.ERROR_NO_PERMISSION
	share("refused", uuid1, "0.5", "besteffort")
	if _, err := start(v1alpha1.ShareSlotID(uuid1, 1)); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "ERROR_NO_PERMISSION") {
		t.Errorf("PreStartContainer with the limit refused: %v, want FailedPrecondition", err)
	}

	// GPU 0's driver has no such limit (NOT_SUPPORTED): the share starts with the library's.
	share("library", uuid0, "0.5", "burstable")
	if _, err := start(v1alpha1.ShareSlotID(uuid0, 0)); err != nil {
		t.Errorf("PreStartContainer on a GPU without the limit: %v, want the container started", err)
	}
	if len(set) != 1 {
		t.Errorf("limits set %v after the refused and the unsupported ones, want the first only", set)
	}
}
