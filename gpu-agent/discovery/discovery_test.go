//go:build cgo

package discovery_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
)

const node = "gpu-node-1"

func newNode(t *testing.T, system string) (*fakegpu.Node, gpu.Library) {
	t.Helper()
	n, err := fakegpu.New(system, node)
	if err != nil {
		t.Fatal(err)
	}
	lib := nvmllib.New(n)
	if err := lib.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return n, lib
}

// allPeers is the NVLink peer list of GPU i on an all-to-all (NVSwitch) node of n GPUs.
func allPeers(i, n int) []int32 {
	var p []int32
	for j := range n {
		if j != i {
			p = append(p, int32(j))
		}
	}
	return p
}

func TestDiscoverDGX(t *testing.T) {
	cases := map[string]struct {
		product, gpuType, cc string
		memoryMiB            int64
	}{
		"dgxh100": {product: "NVIDIA H100 80GB HBM3", gpuType: "H100", cc: "9.0", memoryMiB: 81920},
		"dgxh200": {product: "NVIDIA H200 141GB HBM3e", gpuType: "H200", cc: "9.0", memoryMiB: 144384},
		"dgxa100": {product: "Mock NVIDIA A100-SXM4-40GB", gpuType: "A100", cc: "8.0", memoryMiB: 40960},
	}
	for system, tc := range cases {
		t.Run(system, func(t *testing.T) {
			_, lib := newNode(t, system)
			res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if len(res.DeviceErrors) != 0 {
				t.Errorf("unexpected device errors: %v", res.DeviceErrors)
			}
			// The device nodes the share device plugin hands out: go-nvml's mock numbers them
			// by index.
			if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(res.Minors, want) {
				t.Errorf("minors %v, want %v", res.Minors, want)
			}
			want := fairwayv1alpha1.GPUInventory{Driver: "550.54.15"}
			for i := range 8 {
				want.GPUs = append(want.GPUs, fairwayv1alpha1.GPUDevice{
					Index:             int32(i),
					UUID:              fakegpu.DeviceUUID(node, i),
					Product:           tc.product,
					MemoryMiB:         tc.memoryMiB,
					ComputeCapability: tc.cc,
					NVLinkPeers:       allPeers(i, 8),
					Healthy:           true,
				})
			}
			if diff := cmp.Diff(want, res.Inventory); diff != "" {
				t.Errorf("inventory (-want +got):\n%s", diff)
			}
			if res.NVLinkDomain != "node."+node {
				t.Errorf("NVLinkDomain = %q, want node.%s", res.NVLinkDomain, node)
			}
			wantLabels := map[string]string{
				fairwayv1alpha1.GPUCountLabel:     "8",
				fairwayv1alpha1.GPUTypeLabel:      tc.gpuType,
				fairwayv1alpha1.GPUProductLabel:   discoveryProductLabel(tc.product),
				fairwayv1alpha1.GPUMemoryLabel:    fmt.Sprint(tc.memoryMiB),
				fairwayv1alpha1.NVLinkDomainLabel: "node." + node,
			}
			if diff := cmp.Diff(wantLabels, discovery.Labels(&res.Inventory, res.NVLinkDomain)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

func discoveryProductLabel(p string) string {
	out := []byte(p)
	for i := range out {
		if out[i] == ' ' {
			out[i] = '-'
		}
	}
	return string(out)
}

func TestDistinctUUIDsPerNode(t *testing.T) {
	a, _ := fakegpu.New("dgxh100", "node-a")
	b, _ := fakegpu.New("dgxh100", "node-b")
	seen := map[string]bool{}
	for _, n := range []*fakegpu.Node{a, b} {
		for i := range n.Len() {
			u, _ := n.Device(i).GetUUID()
			if seen[u] {
				t.Fatalf("UUID %s used twice", u)
			}
			seen[u] = true
		}
	}
	again, _ := fakegpu.New("dgxh100", "node-a")
	if u1, u2 := a.Device(3).UUID, again.Device(3).UUID; u1 != u2 {
		t.Errorf("UUIDs not stable across restarts: %s vs %s", u1, u2)
	}
}

func TestDiscoverNVLinkGrouping(t *testing.T) {
	cases := map[string]struct {
		groups     [][]int
		fabric     *fakegpu.Fabric
		wantPeers  map[int][]int32
		wantDomain string
	}{
		"NVSwitch all-to-all": {
			wantPeers:  map[int][]int32{0: allPeers(0, 8), 7: allPeers(7, 8)},
			wantDomain: "node." + node,
		},
		"two islands of four": {
			groups:     [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}},
			wantPeers:  map[int][]int32{0: {1, 2, 3}, 5: {4, 6, 7}},
			wantDomain: "",
		},
		"pairs (PCIe cards with NVLink bridges)": {
			groups:     [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}},
			wantPeers:  map[int][]int32{0: {1}, 3: {2}},
			wantDomain: "",
		},
		"no NVLink": {
			groups:     [][]int{},
			wantPeers:  map[int][]int32{0: nil, 4: nil},
			wantDomain: "",
		},
		"multi-node fabric clique": {
			fabric: &fakegpu.Fabric{
				ClusterUUID: [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8},
				CliqueID:    7,
			},
			wantPeers:  map[int][]int32{2: allPeers(2, 8)},
			wantDomain: "12345678-9abc-def0-0102-030405060708.7",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, lib := newNode(t, "dgxh100")
			n.SetNVLinkGroups(tc.groups)
			n.SetFabric(tc.fabric)
			res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.wantPeers {
				if diff := cmp.Diff(want, res.Inventory.GPUs[i].NVLinkPeers); diff != "" {
					t.Errorf("GPU %d peers (-want +got):\n%s", i, diff)
				}
			}
			if res.NVLinkDomain != tc.wantDomain {
				t.Errorf("NVLinkDomain = %q, want %q", res.NVLinkDomain, tc.wantDomain)
			}
			_, labelled := discovery.Labels(&res.Inventory, res.NVLinkDomain)[fairwayv1alpha1.NVLinkDomainLabel]
			if labelled != (tc.wantDomain != "") {
				t.Errorf("nvlink-domain label present = %v, want %v", labelled, tc.wantDomain != "")
			}
		})
	}
}

func TestDiscoverMIG(t *testing.T) {
	n, lib := newNode(t, "dgxa100")
	// Put GPUs 0 and 1 in MIG mode and carve GPU 0 into 1g instances, as an admin would.
	for _, i := range []int{0, 1} {
		if ret, _ := n.Device(i).SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
			t.Fatalf("SetMigMode: %v", ret)
		}
	}
	prof, ret := n.Device(0).GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetGpuInstanceProfileInfo: %v", ret)
	}
	if _, ret := n.Device(0).CreateGpuInstance(&prof); ret != nvml.SUCCESS {
		t.Fatalf("CreateGpuInstance: %v", ret)
	}
	res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range res.Inventory.GPUs {
		if want := i < 2; g.MIGEnabled != want {
			t.Errorf("GPU %d MIGEnabled = %v, want %v", i, g.MIGEnabled, want)
		}
		if !g.Healthy {
			t.Errorf("GPU %d unhealthy", i)
		}
	}
	if len(res.DeviceErrors) != 0 {
		t.Errorf("device errors: %v", res.DeviceErrors)
	}
	// MIG devices are still the node's GPUs; the scheduler skips them for fractions.
	if got := discovery.Labels(&res.Inventory, res.NVLinkDomain)[fairwayv1alpha1.GPUCountLabel]; got != "8" {
		t.Errorf("count label = %s, want 8", got)
	}
}

func TestDiscoverLostGPU(t *testing.T) {
	n, lib := newNode(t, "dgxh100")
	before, err := discovery.Discover(lib, discovery.Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	n.Device(3).Fail(nvml.ERROR_GPU_IS_LOST)
	res, err := discovery.Discover(lib, discovery.Options{NodeName: node, Previous: &before.Inventory})
	if err != nil {
		t.Fatalf("a lost GPU must not fail discovery: %v", err)
	}
	lost := res.Inventory.GPUs[3]
	if lost.Healthy {
		t.Error("lost GPU reported healthy")
	}
	if lost.UUID != fakegpu.DeviceUUID(node, 3) {
		t.Errorf("lost GPU UUID = %q, want the previous %q", lost.UUID, fakegpu.DeviceUUID(node, 3))
	}
	if !anyIs(res.DeviceErrors, gpu.ErrGPULost) {
		t.Errorf("device errors %v do not report the lost GPU", res.DeviceErrors)
	}
	if got := gpu.Code(res.DeviceErrors[0]); got != "ERROR_GPU_IS_LOST" {
		t.Errorf("error code = %s", got)
	}
	for i, g := range res.Inventory.GPUs {
		if i != 3 && (!g.Healthy || len(g.NVLinkPeers) != 6) {
			t.Errorf("GPU %d: healthy=%v peers=%v, want healthy with 6 peers", i, g.Healthy, g.NVLinkPeers)
		}
	}
	labels := discovery.Labels(&res.Inventory, res.NVLinkDomain)
	if labels[fairwayv1alpha1.GPUCountLabel] != "7" {
		t.Errorf("count label = %s, want 7", labels[fairwayv1alpha1.GPUCountLabel])
	}
	if res.NVLinkDomain != "node."+node {
		t.Errorf("the 7 healthy GPUs are still one NVLink domain, got %q", res.NVLinkDomain)
	}

	// The GPU comes back after a reset.
	n.Device(3).Fail(nvml.SUCCESS)
	res, _ = discovery.Discover(lib, discovery.Options{NodeName: node, Previous: &res.Inventory})
	if !res.Inventory.GPUs[3].Healthy || len(res.DeviceErrors) != 0 {
		t.Errorf("healed GPU: healthy=%v errors=%v", res.Inventory.GPUs[3].Healthy, res.DeviceErrors)
	}
}

func TestDiscoverDriverErrors(t *testing.T) {
	t.Run("on init", func(t *testing.T) {
		n, _ := fakegpu.New("dgxh100", node)
		n.FailLibrary(nvml.ERROR_DRIVER_NOT_LOADED)
		err := nvmllib.New(n).Init()
		if !errors.Is(err, gpu.ErrDriverNotLoaded) {
			t.Fatalf("Init error = %v, want ErrDriverNotLoaded", err)
		}
	})
	t.Run("library call", func(t *testing.T) {
		n, lib := newNode(t, "dgxh100")
		n.FailLibrary(nvml.ERROR_UNKNOWN)
		_, err := discovery.Discover(lib, discovery.Options{NodeName: node})
		if !errors.Is(err, gpu.ErrUnknown) {
			t.Fatalf("Discover error = %v, want ErrUnknown", err)
		}
	})
	t.Run("device call", func(t *testing.T) {
		n, lib := newNode(t, "dgxh100")
		// The mock device's funcs are overridable: the name query fails with a driver error.
		n.Device(5).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
		// And GPU 6 fails every call.
		n.Device(6).Fail(nvml.ERROR_UNKNOWN)
		res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
		if err != nil {
			t.Fatal(err)
		}
		if g := res.Inventory.GPUs[5]; !g.Healthy || g.UUID == "" || g.Product != "" {
			t.Errorf("GPU 5 (name unreadable) = %+v, want healthy with UUID and no product", g)
		}
		if g := res.Inventory.GPUs[6]; g.Healthy {
			t.Errorf("GPU 6 (every call fails) reported healthy")
		}
		if len(res.DeviceErrors) < 2 || !anyIs(res.DeviceErrors, gpu.ErrUnknown) {
			t.Errorf("device errors = %v", res.DeviceErrors)
		}
	})
}

func anyIs(errs []error, target error) bool {
	for _, err := range errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// TestDiscoverPCIe: fakegpu's 4-card PCIe servers (no NVLink) are found with their own product,
// so the agents of a heterogeneous test cluster label each node with its type.
func TestDiscoverPCIe(t *testing.T) {
	cases := map[string]struct {
		product, gpuType, cc string
		memoryMiB            int64
	}{
		"l4": {product: "NVIDIA L4", gpuType: "L4", cc: "8.9", memoryMiB: 23034},
		"t4": {product: "Tesla T4", gpuType: "T4", cc: "7.5", memoryMiB: 15360},
	}
	for system, tc := range cases {
		t.Run(system, func(t *testing.T) {
			_, lib := newNode(t, system)
			res, err := discovery.Discover(lib, discovery.Options{NodeName: node})
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			want := fairwayv1alpha1.GPUInventory{Driver: "550.54.15"}
			for i := range 4 {
				want.GPUs = append(want.GPUs, fairwayv1alpha1.GPUDevice{Index: int32(i), UUID: fakegpu.DeviceUUID(node, i),
					Product: tc.product, MemoryMiB: tc.memoryMiB, ComputeCapability: tc.cc, Healthy: true})
			}
			if diff := cmp.Diff(want, res.Inventory); diff != "" {
				t.Errorf("inventory (-want +got):\n%s", diff)
			}
			labels := discovery.Labels(&res.Inventory, res.NVLinkDomain)
			if labels[fairwayv1alpha1.GPUTypeLabel] != tc.gpuType || labels[fairwayv1alpha1.GPUCountLabel] != "4" ||
				labels[fairwayv1alpha1.GPUMemoryLabel] != fmt.Sprint(tc.memoryMiB) {
				t.Errorf("labels %v, want type %s, count 4, memory %d", labels, tc.gpuType, tc.memoryMiB)
			}
		})
	}
}
