package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
)

// VisibleDevicesEnv is what the device plugin sets in a container it was allocated devices
// for, as NVIDIA's device plugin does: the devices' IDs (GPU UUIDs), comma-separated.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// pluginSocket is the plugin's socket name in the kubelet's device-plugin directory.
const pluginSocket = "fairway-fake-gpu.sock"

// DevicePlugin advertises a node's fake GPUs to its kubelet under nvidia.com/gpu. The kubelet
// allocates them (the device manager's own bookkeeping, checkpoint and PodResources API) and
// calls Allocate for each container, which answers with NVIDIA_VISIBLE_DEVICES.
type DevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer

	node   string
	dir    string // the host directory the node sees as /var/lib/kubelet/device-plugins
	server *grpc.Server

	mu        sync.Mutex
	devices   []*pluginapi.Device
	changed   chan struct{} // closed and replaced on every change
	allocated [][]string    // device IDs of every Allocate container request, in order
}

func newDevicePlugin(node, dir string, gpus int) *DevicePlugin {
	p := &DevicePlugin{node: node, dir: dir, changed: make(chan struct{})}
	for i := range gpus {
		p.devices = append(p.devices, &pluginapi.Device{ID: fakegpu.DeviceUUID(node, i), Health: pluginapi.Healthy})
	}
	return p
}

// DeviceIDs returns the node's device IDs in index order.
func (p *DevicePlugin) DeviceIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, len(p.devices))
	for i, d := range p.devices {
		ids[i] = d.ID
	}
	return ids
}

// Allocations returns the device IDs of every container the kubelet allocated devices to so
// far, in order.
func (p *DevicePlugin) Allocations() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocated)
}

// SetHealthy marks devices healthy or not; the kubelet drops unhealthy devices from the node's
// allocatable and admits no new pod onto them, which is how a GPU disappears behind the
// scheduler's back.
func (p *DevicePlugin) SetHealthy(healthy bool, ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := pluginapi.Unhealthy
	if healthy {
		h = pluginapi.Healthy
	}
	for _, d := range p.devices {
		if slices.Contains(ids, d.ID) {
			d.Health = h
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// start serves the plugin's socket and registers it with the kubelet, whose registration socket
// must exist (the kubelet empties the directory when it starts, before it listens).
func (p *DevicePlugin) start(ctx context.Context) error {
	sock := filepath.Join(p.dir, pluginSocket)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin of %s: %w", p.node, err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(lis) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return fmt.Errorf("device plugin of %s: dialing the kubelet: %w", p.node, err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     pluginSocket,
		ResourceName: string(fairwayv1.ResourceGPU),
	}); err != nil {
		p.stop()
		return fmt.Errorf("device plugin of %s: registering with the kubelet: %w", p.node, err)
	}
	return nil
}

func (p *DevicePlugin) stop() {
	if p.server != nil {
		p.server.Stop()
	}
}

// GetDevicePluginOptions asks for no PreStartContainer or GetPreferredAllocation calls: the
// kubelet's own choice of devices is what the tests observe.
func (p *DevicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices, and again on every health change, until the kubelet hangs up.
func (p *DevicePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		resp := &pluginapi.ListAndWatchResponse{}
		for _, d := range p.devices {
			resp.Devices = append(resp.Devices, &pluginapi.Device{ID: d.ID, Health: d.Health})
		}
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

// Allocate answers each container's request with the devices' UUIDs in NVIDIA_VISIBLE_DEVICES.
func (p *DevicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids := cr.GetDevicesIds()
		for _, id := range ids {
			if !slices.ContainsFunc(p.devices, func(d *pluginapi.Device) bool { return d.ID == id }) {
				return nil, errors.New("device plugin: unknown device " + id)
			}
		}
		p.allocated = append(p.allocated, slices.Clone(ids))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")},
		})
	}
	return resp, nil
}
