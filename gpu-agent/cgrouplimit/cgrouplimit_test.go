//go:build cgo

package cgrouplimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
)

const uid = types.UID("0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c")

// driver plays NVML's per-cgroup memory limits on one GPU with go-nvml's mock: what was set
// per cgroup directory, the answer of the next set, and whether the library has the symbols.
type driver struct {
	mu      sync.Mutex
	limits  map[string]nvml.MemoryLimits_v1
	setRet  nvml.Return
	missing bool
	sets    int
}

func (d *driver) library(t *testing.T) gpu.Library {
	t.Helper()
	d.limits = map[string]nvml.MemoryLimits_v1{}
	dev := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-a", nvml.SUCCESS },
		SetMemoryLimits_v1Func: func(ns string, soft, hard uint64) nvml.Return {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.sets++
			if d.setRet != nvml.SUCCESS {
				return d.setRet
			}
			d.limits[ns] = nvml.MemoryLimits_v1{NameSpace: ns, SoftLimit: soft, HardLimit: hard}
			return nvml.SUCCESS
		},
		GetMemoryLimits_v1Func: func(ns string) (nvml.MemoryLimits_v1, nvml.Return) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.setRet == nvml.ERROR_NOT_SUPPORTED {
				return nvml.MemoryLimits_v1{}, nvml.ERROR_NOT_SUPPORTED
			}
			if l, ok := d.limits[ns]; ok {
				return l, nvml.SUCCESS
			}
			return nvml.MemoryLimits_v1{NameSpace: ns, HardLimit: gpu.NoMemoryLimit}, nvml.SUCCESS
		},
	}
	ext := &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
		if d.missing && strings.Contains(s, "MemoryLimits") {
			return errors.New("undefined symbol " + s)
		}
		return nil
	}}
	lib := nvmllib.New(&mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc:             func() nvml.ExtendedInterface { return ext },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	})
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	return lib
}

func (d *driver) limiter(t *testing.T, root string) *Limiter {
	lib := d.library(t)
	return &Limiter{Root: root, Device: func(uuid string) (gpu.Device, error) {
		if uuid != "GPU-a" {
			return nil, errors.New("no such GPU")
		}
		return lib.Device(0)
	}}
}

func mkdir(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPodDir: the pod's cgroup is found in each layout of the kubelet's two cgroup drivers,
// and neither a missing nor an ambiguous one is guessed.
func TestPodDir(t *testing.T) {
	for name, rel := range map[string]string{
		"systemd guaranteed":  "kubepods.slice/kubepods-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice",
		"systemd burstable":   "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice",
		"systemd besteffort":  "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice",
		"cgroupfs guaranteed": "kubepods/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c",
		"cgroupfs burstable":  "kubepods/burstable/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c",
		"cgroupfs besteffort": "kubepods/besteffort/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c",
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			// A neighbour's pod and the container cgroups under the pod are not the pod.
			mkdir(t, filepath.Join(root, rel, "cri-containerd-1.scope"),
				filepath.Join(root, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice"),
				filepath.Join(root, "kubepods/besteffort/pod11111111-2222-3333-4444-555555555555"))
			got, err := PodDir(root, uid)
			if err != nil || got != filepath.Join(root, rel) {
				t.Errorf("PodDir = %q, %v; want %q", got, err, filepath.Join(root, rel))
			}
		})
	}
	root := t.TempDir()
	if _, err := PodDir(root, uid); err == nil || !strings.Contains(err.Error(), "has no cgroup under") {
		t.Errorf("no pod cgroup: %v", err)
	}
	mkdir(t, filepath.Join(root, "kubepods/pod"+string(uid)), filepath.Join(root, "kubepods/burstable/pod"+string(uid)))
	if _, err := PodDir(root, uid); err == nil || !strings.Contains(err.Error(), "has 2 cgroups") {
		t.Errorf("two pod cgroups: %v", err)
	}
}

// TestSet: the hard limit goes on the pod's cgroup directory, the soft limit stays 0, and it is
// read back; the driver's refusals are told apart: no such function (the library's limit
// stays) from a failure (the limit is not in place).
func TestSet(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice")
	mkdir(t, pod)
	d := &driver{}
	l := d.limiter(t, root)
	if ok, err := l.Supported("GPU-a"); !ok || err != nil {
		t.Errorf("Supported = %v, %v; want true", ok, err)
	}
	dir, err := l.Set(uid, "GPU-a", 20<<30)
	if err != nil || dir != pod {
		t.Fatalf("Set = %q, %v; want %q", dir, err, pod)
	}
	if got := d.limits[pod]; got.HardLimit != 20<<30 || got.SoftLimit != 0 || len(d.limits) != 1 {
		t.Errorf("limits %+v, want only %s with hard 20 GiB, soft 0", d.limits, pod)
	}

	for name, tc := range map[string]struct {
		ret         nvml.Return
		missing     bool
		unsupported bool
		want        string
	}{
		"not supported":      {ret: nvml.ERROR_NOT_SUPPORTED, unsupported: true, want: "ERROR_NOT_SUPPORTED"},
		"no such function":   {missing: true, unsupported: true, want: "ERROR_FUNCTION_NOT_FOUND"},
		"cgroup not opened":  {ret: nvml.ERROR_OPERATING_SYSTEM, want: "setting the GPU memory limit of " + pod + " on GPU GPU-a to 1073741824 bytes"},
		"not root":           {ret: nvml.ERROR_NO_PERMISSION, want: "ERROR_NO_PERMISSION"},
		"no dmem on the pod": {ret: nvml.ERROR_NOT_FOUND, want: "ERROR_NOT_FOUND"},
	} {
		t.Run(name, func(t *testing.T) {
			d := &driver{setRet: tc.ret, missing: tc.missing}
			l := d.limiter(t, root)
			_, err := l.Set(uid, "GPU-a", 1<<30)
			if err == nil || errors.Is(err, ErrUnsupported) != tc.unsupported || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Set: %v; want an error with %q, unsupported %v", err, tc.want, tc.unsupported)
			}
			if tc.missing && d.sets != 0 {
				t.Error("the set function was called although the library lacks it")
			}
			if ok, _ := l.Supported("GPU-a"); ok == tc.unsupported {
				t.Errorf("Supported = %v, want %v", ok, !tc.unsupported)
			}
		})
	}
	if _, err := (&driver{}).limiter(t, t.TempDir()).Set(uid, "GPU-a", 1<<30); err == nil || !strings.Contains(err.Error(), "has no cgroup under") {
		t.Errorf("Set without the pod's cgroup: %v", err)
	}
	// A driver without the limit never needs the pod's cgroup: the real-node tier's kubelet
	// keeps its pods' cgroups where the agent does not look, and its shares must start.
	if _, err := (&driver{setRet: nvml.ERROR_NOT_SUPPORTED}).limiter(t, t.TempDir()).Set(uid, "GPU-a", 1<<30); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Set without the pod's cgroup on a driver without the limit: %v; want ErrUnsupported", err)
	}
	if _, err := (&driver{missing: true}).limiter(t, t.TempDir()).Set(uid, "GPU-a", 1<<30); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Set without the pod's cgroup on a library without the function: %v; want ErrUnsupported", err)
	}
	if _, err := l.Set(uid, "GPU-a", 0); err == nil {
		t.Error("Set of no limit succeeded")
	}
}
