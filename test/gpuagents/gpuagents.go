// Package gpuagents runs one fairway gpu-agent per fake GPU node of a local cluster
// (test/cluster), each on a go-nvml mock server (--nvml=mock:<system>), with the kubelet's
// PodResources API played by the in-process stand-in of test/podresources. The demo and the e2e
// tests use it so that they exercise the agent's real discovery, publishing, assignment and
// usage paths; the fake nodes' GPUs are then driven through each agent's control endpoint.
//
// It is cheap by design: one agent process per node (a few tens of MiB each) and one pod watch
// for all the stand-ins, in the caller's process.
package gpuagents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/nodepool"
	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/podresources"
)

// Node is a fake node to run an agent for.
type Node struct {
	Name string
	// System is the go-nvml mock server: dgxh100, dgxh200, dgxa100 or dgxb200; SystemFor
	// picks it from the node's labels.
	System string
	// GPUs is the node's nvidia.com/gpu count, the devices the stand-in hands out; 8 (a DGX)
	// when zero.
	GPUs int
	// PodResourcesSocket is a real kubelet's PodResources socket (test/nodes): the agent reads
	// it and no stand-in is served for the node.
	PodResourcesSocket string
}

// Options configure the agents. Zero durations take the agent's defaults, except
// UsageInterval and RefreshInterval, which default to test-friendly 250ms and 5s.
type Options struct {
	Nodes []Node
	// Binary is the fairway binary; "fairway" in the cluster's BinDir (make build) when empty.
	Binary          string
	UsageInterval   time.Duration
	RefreshInterval time.Duration
	IdleAfter       time.Duration
	IdleThreshold   float64
	// Args are extra agent flags.
	Args []string
	// NodeArgs, when set, gives more flags for the agent of one node (after Args): its own
	// kubeconfig, say, when each agent's identity carries its node's name as a pod-bound token's
	// does.
	NodeArgs func(node string) ([]string, error)
	// ReadyTimeout bounds the wait for every agent to be ready; 60s when zero.
	ReadyTimeout time.Duration
	Log          logr.Logger
}

// Agent is one running agent.
type Agent struct {
	Node   string
	System string
	// Socket is the node's PodResources socket.
	Socket string
	// MetricsURL is the agent's /metrics.
	MetricsURL string
	// ReadyURL is the agent's /readyz.
	ReadyURL string
	// ControlURL is the fake node's control endpoint (see fakegpu.Node.Handler).
	ControlURL string
	Process    *cluster.Process
}

// Fleet is the running agents and their PodResources stand-ins.
type Fleet struct {
	agents   map[string]*Agent
	standins *podresources.Fleet
}

// SystemFor picks the mock system whose GPUs match a node's labels: by its GPU type (H200,
// A100, B200, L4, T4), else by a product name containing H200, A100 or B200; H100 otherwise.
func SystemFor(n *corev1.Node) string {
	switch n.Labels[fairwayv1alpha1.GPUTypeLabel] {
	case "H200", "A100", "B200":
		return "dgx" + strings.ToLower(n.Labels[fairwayv1alpha1.GPUTypeLabel])
	case "L4":
		return "l4"
	case "T4":
		return "t4"
	}
	product := strings.ToUpper(n.Labels[nodepool.NVIDIAGPUProductLabel] + " " + n.Labels[fairwayv1alpha1.GPUTypeLabel] + " " + n.Labels[fairwayv1alpha1.GPUProductLabel])
	for _, s := range []string{"H200", "A100", "B200"} {
		if strings.Contains(product, s) {
			return "dgx" + strings.ToLower(s)
		}
	}
	return "dgxh100"
}

// GPUNodes returns every node of the cluster with nvidia.com/gpu capacity, as agent Nodes.
func GPUNodes(ctx context.Context, c *cluster.Cluster) ([]Node, error) {
	var list corev1.NodeList
	if err := c.Client().List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []Node
	for i := range list.Items {
		n := &list.Items[i]
		q := n.Status.Capacity[fairwayv1alpha1.ResourceGPU]
		if q.Value() > 0 {
			out = append(out, Node{Name: n.Name, System: SystemFor(n), GPUs: int(q.Value())})
		}
	}
	return out, nil
}

// Start serves the PodResources stand-ins and starts one agent per node, and returns once every
// agent is ready (NVML initialised). The agents stop with the cluster, or with Stop.
func Start(ctx context.Context, c *cluster.Cluster, opts Options) (*Fleet, error) {
	if opts.Binary == "" {
		opts.Binary = "fairway"
	}
	if opts.UsageInterval == 0 {
		opts.UsageInterval = 250 * time.Millisecond
	}
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = 5 * time.Second
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	sockDir := filepath.Join(c.WorkDir(), "podresources")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		return nil, err
	}
	f := &Fleet{agents: map[string]*Agent{}}
	var specs []podresources.NodeSpec
	for _, n := range opts.Nodes {
		if n.GPUs == 0 {
			n.GPUs = 8
		}
		devices := make([]string, n.GPUs)
		for i := range devices {
			devices[i] = fakegpu.DeviceUUID(n.Name, i)
		}
		a := &Agent{Node: n.Name, System: n.System, Socket: filepath.Join(sockDir, n.Name+".sock")}
		f.agents[n.Name] = a
		if n.PodResourcesSocket != "" {
			a.Socket = n.PodResourcesSocket
			continue
		}
		specs = append(specs, podresources.NodeSpec{Name: n.Name, Socket: a.Socket, Devices: devices})
	}
	standins, err := podresources.StartFleet(ctx, c.Clientset(), specs, opts.Log.WithName("podresources"))
	if err != nil {
		return nil, err
	}
	f.standins = standins

	// Every agent's ports come from one FreePorts call: ports taken in separate calls can repeat
	// one just released by the call before (CI saw two agents' control endpoints collide).
	all, err := cluster.FreePorts(3 * len(opts.Nodes))
	if err != nil {
		f.Stop()
		return nil, err
	}
	for i, n := range opts.Nodes {
		a := f.agents[n.Name]
		ports := all[3*i : 3*i+3]
		addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
		a.MetricsURL = "http://" + addr(ports[0]) + "/metrics"
		a.ReadyURL = "http://" + addr(ports[1]) + "/readyz"
		a.ControlURL = "http://" + addr(ports[2])
		args := []string{
			"agent",
			"--node-name=" + n.Name,
			"--nvml=mock:" + n.System,
			"--pod-resources-socket=" + a.Socket,
			"--metrics-bind-address=" + addr(ports[0]),
			"--health-probe-bind-address=" + addr(ports[1]),
			"--mock-control-address=" + addr(ports[2]),
			"--usage-interval=" + opts.UsageInterval.String(),
			"--refresh-interval=" + opts.RefreshInterval.String(),
		}
		if opts.IdleAfter > 0 {
			args = append(args, "--idle-after="+opts.IdleAfter.String())
		}
		if opts.IdleThreshold > 0 {
			args = append(args, "--idle-threshold="+strconv.FormatFloat(opts.IdleThreshold, 'g', -1, 64))
		}
		args = append(args, opts.Args...)
		if opts.NodeArgs != nil {
			more, err := opts.NodeArgs(n.Name)
			if err != nil {
				f.Stop()
				return nil, fmt.Errorf("the flags of the agent of %s: %w", n.Name, err)
			}
			args = append(args, more...)
		}
		p, err := c.StartProcess(cluster.ProcessSpec{Name: "gpu-agent-" + n.Name, Path: opts.Binary, Args: args, StopTimeout: 5 * time.Second})
		if err != nil {
			f.Stop()
			return nil, fmt.Errorf("starting the agent of %s: %w", n.Name, err)
		}
		a.Process = p
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(opts.Nodes))
	for i, n := range opts.Nodes {
		wg.Go(func() { errs[i] = f.agents[n.Name].waitReady(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

func (a *Agent) waitReady(ctx context.Context) error {
	for {
		if exited, err := a.Process.Exited(); exited {
			return fmt.Errorf("agent of %s exited (%w):\n%s", a.Node, err, a.Process.Tail(20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.ReadyURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of %s not ready: %w; last log lines:\n%s", a.Node, ctx.Err(), a.Process.Tail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Agent returns the agent of node, nil if none runs there.
func (f *Fleet) Agent(node string) *Agent { return f.agents[node] }

// Assigned returns the device IDs the PodResources stand-in of node gave a pod, as the kubelet
// would report them.
func (f *Fleet) Assigned(node string, uid types.UID) []string {
	if s := f.standins.Server(node); s != nil {
		return s.Assigned(uid)
	}
	return nil
}

// Stop stops the agents and the stand-ins.
func (f *Fleet) Stop() {
	for _, a := range f.agents {
		if a.Process != nil {
			_ = a.Process.Stop()
		}
	}
	if f.standins != nil {
		f.standins.Stop()
	}
}

// SetGPU changes a fake GPU of the agent's node through its control endpoint.
func (a *Agent) SetGPU(ctx context.Context, index int, u fakegpu.DeviceUpdate) (*fakegpu.DeviceStatus, error) {
	var out fakegpu.DeviceStatus
	if err := a.put(ctx, "/gpus/"+strconv.Itoa(index), u, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailLibrary makes every NVML library call of the agent's node fail with the named error
// ("ERROR_DRIVER_NOT_LOADED", ...), as when the driver goes away; "" heals it.
func (a *Agent) FailLibrary(ctx context.Context, failure string) error {
	return a.put(ctx, "/library", fakegpu.LibraryUpdate{Failure: failure}, nil)
}

// GPUs returns the state of the node's fake GPUs.
func (a *Agent) GPUs(ctx context.Context) ([]fakegpu.DeviceStatus, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.ControlURL+"/gpus", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []fakegpu.DeviceStatus
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func (a *Agent) put(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, a.ControlURL+path, bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT %s on %s: %w", path, a.Node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		return fmt.Errorf("PUT %s on %s: %s: %s", path, a.Node, resp.Status, strings.TrimSpace(msg.String()))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// BuildBinary returns the fairway binary the agents run (see fairwayproc.Build).
func BuildBinary(ctx context.Context, dir string) (string, error) {
	return fairwayproc.Build(ctx, dir)
}
