package nodes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// DefaultImage is the node image `make images` builds; NODE_IMAGE overrides it.
const DefaultImage = "fairway.local/node:dev"

// CDIImage is the node image `make images` builds with containerd 2.x in place of Debian 12's
// containerd 1.6: its CRI applies the CDI devices a device plugin names (containerd 1.6 drops
// them). NODE_CDI_IMAGE overrides it. See docs/real-nodes.md, CDI.
func CDIImage() string {
	if img := os.Getenv("NODE_CDI_IMAGE"); img != "" {
		return img
	}
	return DefaultCDIImage
}

// DefaultCDIImage is CDIImage's default.
const DefaultCDIImage = "fairway.local/node-containerd2:dev"

// WorkloadImage is the busybox image preloaded into every node's containerd (never pulled:
// pods using it need imagePullPolicy IfNotPresent or Never).
const WorkloadImage = "fairway.local/busybox:1"

// Config says which nodes Start brings up.
type Config struct {
	// Count is the number of nodes; 2 when zero.
	Count int
	// GPUs is the number of fake nvidia.com/gpu devices per node, each with a fake device node
	// (GPUDeviceNode) beside the driver's control nodes; 8 (a DGX, as go-nvml's mock systems
	// have) when zero, none when negative.
	GPUs int
	// Labels are set on every Node once it registered (by the admin, so any key is allowed).
	Labels map[string]string
	// Image is the node image; NODE_IMAGE or DefaultImage when empty.
	Image string
	// ExtraImages are Docker images of this host loaded into every node's containerd at start
	// (docker save, then ctr import), e.g. fairway's own image for the chart.
	ExtraImages []string
	// Kubelet is merged over the KubeletConfiguration Start writes (a YAML fragment's fields),
	// e.g. {"nodeStatusUpdateFrequency": "1m"}.
	Kubelet map[string]any
	// KubernetesService routes the default/kubernetes Service (its ClusterIP, port 443) from the
	// nodes' pods to the API server on the host's loopback, as kube-proxy routes it to the API
	// server's endpoints, so in-cluster clients (fairway's chart, Argo's executor) reach the API
	// server. Off, pods reach nothing of the control plane, as before.
	KubernetesService bool
	// ReadyTimeout bounds the wait for every node to be Ready; 3 minutes when zero.
	ReadyTimeout time.Duration
	Log          logr.Logger
}

// Nodes is a set of running node containers.
type Nodes struct {
	Nodes []*Node

	c       *cluster.Cluster
	dir     string
	log     logr.Logger
	stopped sync.Once
}

// Node is one real node.
type Node struct {
	// Name is the Node's name: rn-<suffix>-<index>, the suffix random per Start.
	Name string
	// Container is the Docker container's name, fairway-node-<suffix>-<index>.
	Container string
	// Dir is the host directory of the node's config, logs and bind-mounted kubelet sockets.
	Dir string
	// PodCIDR is the node's pod subnet on its CNI bridge Bridge.
	PodCIDR, Bridge string
	// IP is the node's InternalIP, where its kubelet serves (on KubeletPort): a /32 on a link of
	// its own (Link, a bridge without ports) in the host's network namespace, reachable from this
	// host only, since the kubelet refuses a loopback node IP and the API server must reach it.
	IP, Link string
	// KubeletPort is the kubelet's serving port.
	KubeletPort int
	// PodResourcesSocket is the host path of the kubelet's PodResources API socket.
	PodResourcesSocket string
	// Plugin is the node's fake GPU device plugin (nil without GPUs).
	Plugin *DevicePlugin
}

// RequireDocker returns an error that says what is missing when no Docker engine answers:
// the real-node tier never skips silently.
func RequireDocker() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("the real-node tier needs a Docker engine: no docker command on PATH")
	}
	out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("the real-node tier needs a Docker engine: docker info: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Start runs cfg.Count node containers against c and returns once every Node is Ready, labelled,
// and (with GPUs) advertises its devices in allocatable. On error everything started is removed.
func Start(ctx context.Context, c *cluster.Cluster, cfg Config) (_ *Nodes, err error) {
	if err := RequireDocker(); err != nil {
		return nil, err
	}
	if cfg.Count == 0 {
		cfg.Count = 2
	}
	if cfg.GPUs == 0 {
		cfg.GPUs = 8
	}
	if cfg.Image == "" {
		if cfg.Image = os.Getenv("NODE_IMAGE"); cfg.Image == "" {
			cfg.Image = DefaultImage
		}
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 3 * time.Minute
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", cfg.Image).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("node image %s: %s (build it with `make images`)", cfg.Image, bytes.TrimSpace(out))
	}
	if _, err := reapOrphans(ctx, cfg.Log); err != nil {
		return nil, err
	}
	suffix, subnet, err := randomNames()
	if err != nil {
		return nil, err
	}
	ns := &Nodes{c: c, log: cfg.Log}
	// Short: unix socket paths under it must stay below 108 bytes.
	if ns.dir, err = os.MkdirTemp("", "fwn-"+suffix+"-"); err != nil {
		return nil, fmt.Errorf("creating the nodes' directory: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ns.Stop())
		}
	}()
	if len(cfg.ExtraImages) > 0 {
		if err := saveImages(ctx, filepath.Join(ns.dir, "images"), cfg.ExtraImages); err != nil {
			return nil, err
		}
	}
	ports, err := cluster.FreePorts(2 * cfg.Count)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Count {
		n := &Node{
			Name:        fmt.Sprintf("rn-%s-%d", suffix, i),
			Container:   fmt.Sprintf("fairway-node-%s-%d", suffix, i),
			Dir:         filepath.Join(ns.dir, strconv.Itoa(i)),
			PodCIDR:     fmt.Sprintf("10.%d.%d.0/24", subnet, i),
			Bridge:      fmt.Sprintf("fw%s%d", suffix, i),
			IP:          fmt.Sprintf("10.%d.250.%d", subnet, i+1),
			Link:        fmt.Sprintf("fwn%s%d", suffix, i),
			KubeletPort: ports[2*i],
		}
		n.PodResourcesSocket = filepath.Join(n.Dir, "pod-resources", "kubelet.sock")
		ns.Nodes = append(ns.Nodes, n)
		if err := ns.run(ctx, n, ports[2*i+1], cfg); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	for _, n := range ns.Nodes {
		if err := ns.waitReady(rctx, n, cfg); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// randomNames picks the per-Start suffix of node, container and bridge names, and the second
// octet of the nodes' pod subnets (10.200-249.<node>.0/24: outside the cluster's service and
// kwok ranges and Docker's defaults), so that leftovers of a killed run never collide.
func randomNames() (string, int, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", 0, err
	}
	o, err := rand.Int(rand.Reader, big.NewInt(50))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(b), 200 + int(o.Int64()), nil
}

// run writes the node's config and credentials and starts its container.
func (ns *Nodes) run(ctx context.Context, n *Node, healthzPort int, cfg Config) error {
	conf := filepath.Join(n.Dir, "config")
	for _, d := range []string{conf, filepath.Join(n.Dir, "logs"), filepath.Join(n.Dir, "device-plugins"), filepath.Join(n.Dir, "pod-resources")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	certPEM, keyPEM, err := ns.c.ClientCertificate("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(ns.c.CAFile())
	if err != nil {
		return fmt.Errorf("reading the cluster CA: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fairway"] = &clientcmdapi.Cluster{Server: ns.c.RESTConfig().Host, CertificateAuthorityData: ca}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["fairway"] = &clientcmdapi.Context{Cluster: "fairway", AuthInfo: "kubelet"}
	kc.CurrentContext = "fairway"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(conf, "kubeconfig")); err != nil {
		return fmt.Errorf("node %s: writing the kubeconfig: %w", n.Name, err)
	}
	files := map[string][]byte{"ca.crt": ca, "cni.conflist": cniConfig(n), "node-ip": fmt.Appendf(nil, "%s %s\n", n.Link, n.IP)}
	if cfg.KubernetesService {
		files["kubernetes-service"] = fmt.Appendf(nil, "%s %s %s 443 %d\n", n.Name, n.Bridge, ns.c.KubernetesServiceIP(), ns.c.APIPort())
	}
	if files["kubelet.yaml"], err = kubeletConfig(n, healthzPort, cfg.Kubelet); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(conf, name), data, 0o644); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	args := []string{"run", "-d", "--name", n.Container}
	args = append(args, n.labels(ns.dir)...)
	args = append(args,
		// The kubelet and containerd manage cgroups, mounts, devices and the pods' network
		// namespaces: a node needs what a privileged container gets. Not --privileged itself:
		// it asks for every capability, and where the Docker daemon's own bounding set lacks
		// one (CAP_SYS_RESOURCE on the development machines) runc fails with "unable to apply
		// caps". The entrypoint remounts /sys and the cgroups read-write.
		"--cap-add", "ALL",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--security-opt", "systempaths=unconfined", "--security-opt", "label=disable",
		"--device-cgroup-rule", "a *:* rwm", "--device", "/dev/kmsg",
		// See the package doc: the control plane is on the host's loopback.
		"--network", "host",
		// Its own cgroup namespace, so the kubelet's /kubepods hierarchy lives under the
		// container's cgroup, apart from the other nodes', and goes with it.
		"--cgroupns", "private",
		"--hostname", n.Name,
		// The kubelet's and containerd's state on the host's file system rather than Docker's
		// fuse-overlayfs: cAdvisor finds the device for the node's file system stats. Anonymous
		// volumes: removed with the container (docker rm -v).
		"-v", "/var/lib/kubelet", "-v", "/var/lib/containerd",
		"-v", conf+":/etc/fairway-node:ro",
		"-v", filepath.Join(n.Dir, "logs")+":/var/log/fairway-node",
		"-v", filepath.Join(n.Dir, "device-plugins")+":/var/lib/kubelet/device-plugins",
		"-v", filepath.Join(n.Dir, "pod-resources")+":/var/lib/kubelet/pod-resources",
	)
	for _, c := range missingCapabilities() {
		args = append(args, "--cap-drop", c)
	}
	if len(cfg.ExtraImages) > 0 {
		args = append(args, "-v", filepath.Join(ns.dir, "images")+":/var/lib/fairway-node/extra-images:ro")
	}
	args = append(args, cfg.Image,
		"--config=/etc/fairway-node/kubelet.yaml",
		"--kubeconfig=/etc/fairway-node/kubeconfig",
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP,
		"--v=2",
	)
	if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("starting node %s: docker run: %w: %s", n.Name, err, bytes.TrimSpace(out))
	}
	ns.log.Info("node container started", "node", n.Name, "container", n.Container, "podCIDR", n.PodCIDR, "kubeletPort", n.KubeletPort)
	return nil
}

// cniConfig is the node's pod network: a bridge of its own in the host's network namespace, an
// address per pod from its /24, and the firewall plugin, which accepts the pods' traffic in the
// FORWARD chain (Docker's policy there is DROP).
func cniConfig(n *Node) []byte {
	return fmt.Appendf(nil, `{
  "cniVersion": "1.0.0",
  "name": "fairway",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall"}
  ]
}
`, n.Bridge, n.PodCIDR)
}

// kubeletConfig is the node's KubeletConfiguration, with extra merged over it.
func kubeletConfig(n *Node, healthzPort int, extra map[string]any) ([]byte, error) {
	kc := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// Its own host-local address and ports of its own: every node shares the host's network.
		"address":            n.IP,
		"port":               n.KubeletPort,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        healthzPort,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": "/etc/fairway-node/ca.crt"},
		},
		"authorization":            map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		// Docker here runs cgroup v1 with the cgroupfs driver; since 1.35 the kubelet refuses
		// v1 unless told otherwise.
		"cgroupDriver": "cgroupfs",
		"failCgroupV1": false,
		"failSwapOn":   false,
		// A test host's disk and memory are whatever they are: never evict or collect images
		// (the preloaded ones cannot be pulled back).
		"evictionHard":                map[string]any{"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%", "nodefs.inodesFree": "0%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"serializeImagePulls":         false,
		"maxPods":                     60,
		// Faster than the defaults (10s) so tests see status changes soon.
		"nodeStatusUpdateFrequency": "2s",
		"syncFrequency":             "5s",
		"resolvConf":                "",
		// Not the host's: the kubelet would set kernel tunables of the host anyway, but it
		// need not insist.
		"protectKernelDefaults": false,
	}
	for k, v := range extra {
		kc[k] = v
	}
	out, err := yaml.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("node %s: encoding the kubelet config: %w", n.Name, err)
	}
	return out, nil
}

// waitReady waits for the Node to register and turn Ready, starts its device plugin, labels it,
// and waits for its GPUs in allocatable.
func (ns *Nodes) waitReady(ctx context.Context, n *Node, cfg Config) error {
	cs := ns.c.Clientset()
	begin := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited, msg := ns.containerExited(ctx, n); exited {
			return false, fmt.Errorf("node container %s exited: %s\n%s", n.Container, msg, n.LogTail(30))
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s to be Ready (last: %s): %w\n%s", n.Name, last, err, n.LogTail(30))
	}
	ns.log.Info("node Ready", "node", n.Name, "after", time.Since(begin).Round(time.Millisecond))
	if cfg.GPUs > 0 {
		if err := makeDeviceNodes(ctx, n, cfg.GPUs); err != nil {
			return err
		}
		n.Plugin = newDevicePlugin(n.Name, filepath.Join(n.Dir, "device-plugins"), cfg.GPUs)
		if err := n.Plugin.start(ctx); err != nil {
			return err
		}
	}
	if len(cfg.Labels) > 0 {
		patch, err := jsonMergeLabels(cfg.Labels)
		if err != nil {
			return err
		}
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("labelling node %s: %w", n.Name, err)
		}
	}
	if cfg.GPUs > 0 {
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			q := node.Status.Allocatable[fairwayv1.ResourceGPU]
			return q.Value() == int64(cfg.GPUs), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for node %s to advertise %d %s: %w\n%s", n.Name, cfg.GPUs, fairwayv1.ResourceGPU, err, n.LogTail(30))
		}
	}
	return nil
}

func jsonMergeLabels(labels map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
}

// containerExited reports whether the node's container stopped, with its state.
func (ns *Nodes) containerExited(ctx context.Context, n *Node) (bool, string) {
	out, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Status}} exit={{.State.ExitCode}} {{.State.Error}}", n.Container).CombinedOutput()
	if err != nil {
		return false, ""
	}
	s := strings.TrimSpace(string(out))
	return !strings.HasPrefix(s, "running") && !strings.HasPrefix(s, "created"), s
}

// LogTail returns the last lines of the node's kubelet and containerd logs and of the
// container's own output, for error messages.
func (n *Node) LogTail(lines int) string {
	var b strings.Builder
	for _, f := range []string{"kubelet.log", "containerd.log"} {
		data, err := os.ReadFile(filepath.Join(n.Dir, "logs", f))
		if err != nil {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		ls = ls[max(0, len(ls)-lines):]
		fmt.Fprintf(&b, "--- %s %s (last %d lines)\n%s\n", n.Name, f, len(ls), strings.Join(ls, "\n"))
	}
	if out, err := exec.Command("docker", "logs", "--tail", strconv.Itoa(lines), n.Container).CombinedOutput(); err == nil && len(out) > 0 {
		fmt.Fprintf(&b, "--- %s container output\n%s", n.Name, out)
	}
	return b.String()
}

// Exec runs a command in the node's container and returns its combined output.
func (n *Node) Exec(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", n.Container}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker exec %s %s: %w: %s", n.Container, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Node returns the node named name, or nil.
func (ns *Nodes) Node(name string) *Node {
	for _, n := range ns.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Dir returns the directory of every node's config and logs (removed by Stop).
func (ns *Nodes) Dir() string { return ns.dir }

// SaveLogs copies every node's kubelet and containerd logs into dst/<node>-<file>.
func (ns *Nodes) SaveLogs(dst string) error {
	var errs []error
	for _, n := range ns.Nodes {
		entries, _ := os.ReadDir(filepath.Join(n.Dir, "logs"))
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(n.Dir, "logs", e.Name()))
			if err == nil {
				err = os.MkdirAll(dst, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, n.Name+"-"+e.Name()), data, 0o644)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop removes every node: the containers with their volumes (the kubelets, containerd and all
// pods go with them), the CNI bridges they left in the host's network namespace, the Node
// objects, and the nodes' directory. It is idempotent and goes on after errors.
func (ns *Nodes) Stop() error {
	var (
		mu   sync.Mutex
		errs []error
	)
	ns.stopped.Do(func() {
		var wg sync.WaitGroup
		for _, n := range ns.Nodes {
			wg.Go(func() {
				if n.Plugin != nil {
					n.Plugin.stop()
				}
				if err := removeContainer(n.ref()); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := ns.c.Clientset().CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					ns.log.V(1).Info("deleting the Node object", "node", n.Name, "err", err)
				}
			})
		}
		wg.Wait()
		if ns.dir != "" {
			if err := os.RemoveAll(ns.dir); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// saveImages writes each Docker image as an archive the node entrypoint imports into containerd.
func saveImages(ctx context.Context, dir string, images []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, img := range images {
		out, err := exec.CommandContext(ctx, "docker", "save", "-o", filepath.Join(dir, fmt.Sprintf("extra-%d.tar", i)), img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker save %s: %w: %s", img, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// capabilityNames are the Linux capabilities by number (linux/capability.h), as Docker names them.
var capabilityNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// missingCapabilities names the capabilities outside this process's bounding set: the test
// runs beside the Docker daemon, which cannot give a container what it lacks itself.
func missingCapabilities() []string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		hexBits, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bits, err := strconv.ParseUint(strings.TrimSpace(hexBits), 16, 64)
		if err != nil {
			return nil
		}
		var out []string
		for i, name := range capabilityNames {
			if bits&(1<<i) == 0 {
				out = append(out, name)
			}
		}
		return out
	}
	return nil
}
