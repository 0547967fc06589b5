//go:build cgo

package fakegpu

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// Systems are the mock servers a fake node can be, by the name --nvml=mock:<name> takes: go-nvml's
// DGX systems (8 NVSwitch-connected GPUs), and 4-GPU PCIe servers of the inference and notebook
// cards go-nvml has no mock of (l4, t4), so that a heterogeneous test cluster's agents label
// every node with its own type.
var Systems = map[string]func() *server.Server{
	"dgxa100": dgxa100.New,
	"dgxb200": dgxb200.New,
	"dgxh100": dgxh100.New,
	"dgxh200": dgxh200.New,
	"l4":      func() *server.Server { return pcieServer(l4) },
	"t4":      func() *server.Server { return pcieServer(t4) },
}

// pcieSystems are the Systems whose GPUs have no NVLink between them.
var pcieSystems = map[string]bool{"l4": true, "t4": true}

// The PCIe cards, as NVML names and sizes them (product name, memory in MiB, compute
// capability, PCI device ID); they have no MIG.
var (
	l4 = gpus.Config{Name: "NVIDIA L4", Architecture: nvml.DEVICE_ARCH_ADA, Brand: nvml.BRAND_NVIDIA,
		MemoryMB: 23034, CudaMajor: 8, CudaMinor: 9, PciDeviceId: 0x27B810DE}
	t4 = gpus.Config{Name: "Tesla T4", Architecture: nvml.DEVICE_ARCH_TURING, Brand: nvml.BRAND_TESLA,
		MemoryMB: 15360, CudaMajor: 7, CudaMinor: 5, PciDeviceId: 0x1EB810DE}
)

// pcieServer is a server with four cards of one model.
func pcieServer(card gpus.Config) *server.Server {
	s, err := server.New(server.WithGPUs(gpus.Multiple(4, card)...), server.WithDriverVersion("550.54.15"),
		server.WithNVMLVersion("12.550.54.15"), server.WithCUDADriverVersion(12040))
	if err != nil {
		panic(fmt.Sprintf("fakegpu: building a %s server: %v", card.Name, err)) // static configuration
	}
	return s
}

// SystemNames lists the keys of Systems, sorted, for flag help and errors.
func SystemNames() []string {
	names := make([]string, 0, len(Systems))
	for n := range Systems {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Node is one fake GPU node: a go-nvml mock server (it is an nvml.Interface) plus the state
// tests drive.
type Node struct {
	*server.Server

	name    string
	mu      sync.Mutex
	devices []*Device
	// libErr, when set, fails every library-level call (Init, DeviceGetCount, ...): the
	// driver went away.
	libErr nvml.Return
	// nvlinkGroups partitions device indexes into NVLink islands; nil means all-to-all
	// (NVSwitch), as on a DGX.
	nvlinkGroups [][]int
	fabric       *Fabric
	// ckpt is the checkpoint state of the processes the fake driver's checkpoint API does not
	// leave running (Checkpoints), by PID; absent means running.
	ckpt map[uint32]checkpoint.State
}

var _ nvml.Interface = (*Node)(nil)

// New makes fake node nodeName out of the mock server system (a key of Systems).
func New(system, nodeName string) (*Node, error) {
	mk, ok := Systems[system]
	if !ok {
		return nil, fmt.Errorf("unknown mock system %q (have %v)", system, SystemNames())
	}
	srv := mk()
	n := &Node{Server: srv, name: nodeName, libErr: nvml.SUCCESS, ckpt: map[uint32]checkpoint.State{}}
	for i, d := range srv.Devices {
		md := d.(*server.Device)
		md.UUID = DeviceUUID(nodeName, i)
		md.MemoryInfo.Free = md.MemoryInfo.Total
		n.devices = append(n.devices, &Device{Device: md, node: n, index: i, failure: nvml.SUCCESS})
		if pcieSystems[system] {
			n.nvlinkGroups = append(n.nvlinkGroups, []int{i})
		}
	}
	return n, nil
}

// Name is the node name the UUIDs derive from.
func (n *Node) Name() string { return n.name }

// Device returns fake GPU i, for tests that drive it directly (its embedded mock funcs can
// be overridden too). It panics on a bad index, like a slice.
func (n *Node) Device(i int) *Device { return n.devices[i] }

// Len is the number of GPUs the mock server was built with.
func (n *Node) Len() int { return len(n.devices) }

// FailLibrary makes every library-level call fail with ret (nvml.SUCCESS clears it): a driver
// error on init or a driver that went away.
func (n *Node) FailLibrary(ret nvml.Return) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.libErr = ret
}

// SetNVLinkGroups partitions the GPUs into NVLink islands (nil: all-to-all).
func (n *Node) SetNVLinkGroups(groups [][]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nvlinkGroups = groups
}

// SetFabric puts every GPU of the node in a multi-node NVLink fabric clique (nil: none).
func (n *Node) SetFabric(f *Fabric) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fabric = f
}

// PodUID returns the pod a fake process belongs to, as /proc/<pid>/cgroup would tell on a
// real node. ok is false for a PID no fake GPU runs.
func (n *Node) PodUID(pid uint32) (uid string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.devices {
		for _, p := range d.state.Processes {
			if p.PID == pid {
				return p.PodUID, p.PodUID != ""
			}
		}
	}
	return "", false
}

func (n *Node) Init() nvml.Return {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.libErr
}

func (n *Node) Shutdown() nvml.Return { return nvml.SUCCESS }

func (n *Node) SystemGetDriverVersion() (string, nvml.Return) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.libErr != nvml.SUCCESS {
		return "", n.libErr
	}
	return n.Server.DriverVersion, nvml.SUCCESS
}

func (n *Node) DeviceGetCount() (int, nvml.Return) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.libErr != nvml.SUCCESS {
		return 0, n.libErr
	}
	return len(n.devices), nvml.SUCCESS
}

func (n *Node) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.libErr != nvml.SUCCESS {
		return nil, n.libErr
	}
	if i < 0 || i >= len(n.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return n.devices[i], nvml.SUCCESS
}

func (n *Node) nvlinked(a, b int) bool {
	if n.nvlinkGroups == nil {
		return true
	}
	for _, g := range n.nvlinkGroups {
		if slices.Contains(g, a) && slices.Contains(g, b) {
			return true
		}
	}
	return false
}
