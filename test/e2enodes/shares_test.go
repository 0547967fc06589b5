//go:build e2enodes

package e2enodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// shareNode is one real node with fairway installed by its chart (scheduler, webhook,
// admission policies) and the chart's gpu-agent serving fairway.dev/gpu-share from go-nvml's mock
// DGX H100 inside its container, on the node's fake GPU device nodes (test/nodes).
type shareNode struct {
	c    *cluster.Cluster
	node *nodes.Node
	// memMiB is each GPU's memory as the agent reports it.
	memMiB int64
	gpus   int
}

type shareNodeConfig struct {
	// image is the fairway image; fairwayImage when empty.
	image string
	// nodeImage is the node image; NODE_IMAGE or nodes.DefaultImage when empty.
	nodeImage string
	// set are more chart values.
	set []string
	// before runs on the node before the chart is installed.
	before func(t *testing.T, n *nodes.Node)
}

// startShareNode starts the cluster, the node and the chart, and waits until the kubelet offers
// the agent's share slots: the agent's device plugin registered with the real kubelet.
func startShareNode(t *testing.T, cfg shareNodeConfig) *shareNode {
	t.Helper()
	if cfg.image == "" {
		cfg.image = fairwayImage
	}
	repo, tag, ok := strings.Cut(cfg.image, ":")
	if !ok {
		t.Fatalf("image %q: want repository:tag", cfg.image)
	}
	c := cluster.StartT(t, cluster.Config{KubeScheduler: true, APIServerFlags: []string{"--enable-aggregator-routing=true"}})
	ns := nodes.StartT(t, c, nodes.Config{Count: 1, KubernetesService: true, Image: cfg.nodeImage,
		Labels: map[string]string{"nvidia.com/gpu.present": "true"}, ExtraImages: []string{cfg.image}, ReadyTimeout: 5 * time.Minute})
	sn := &shareNode{c: c, node: ns.Nodes[0], gpus: 8}
	if cfg.before != nil {
		cfg.before(t, sn.node)
	}
	helmInstall(t, c, append([]string{"image.repository=" + repo, "image.tag=" + tag, "image.pullPolicy=Never",
		"agent.nvml=mock:dgxh100", "agent.runtimeClassName=",
		"scheduler.replicas=1", "webhook.replicas=1", "webhook.podDisruptionBudget.enabled=false", "scheduler.reservation.image=" + pauseImage},
		cfg.set...)...)
	slots := int64(sn.gpus * fairwayv1.DefaultShareSlotsPerGPU)
	eventually(t, 2*time.Minute, fmt.Sprintf("node %s labelled by its agent and offering %d %s", sn.node.Name, slots, fairwayv1.ResourceGPUShare),
		func(ctx context.Context) (bool, error) {
			n, err := c.Clientset().CoreV1().Nodes().Get(ctx, sn.node.Name, metav1.GetOptions{})
			if err != nil || n.Labels[fairwayv1.GPUCountLabel] != strconv.Itoa(sn.gpus) {
				return false, nil
			}
			var inv fairwayv1.GPUInventory
			if json.Unmarshal([]byte(n.Annotations[fairwayv1.GPUInventoryAnnotation]), &inv) != nil || len(inv.GPUs) != sn.gpus {
				return false, nil
			}
			sn.memMiB = inv.GPUs[0].MemoryMiB
			q := n.Status.Allocatable[fairwayv1.ResourceGPUShare]
			return q.Value() == slots, nil
		})
	return sn
}

// minorOf is the minor number (go-nvml's mock: the index) of the node's GPU uuid, -1 if none.
func (sn *shareNode) minorOf(uuid string) int {
	for i := range sn.gpus {
		if fakegpu.DeviceUUID(sn.node.Name, i) == uuid {
			return i
		}
	}
	return -1
}

// tenants creates namespaces at their Pod Security levels, each served by a queue of its own
// with gpuQuota, and waits for the webhook to serve them all.
func tenants(t *testing.T, c *cluster.Cluster, gpuQuota string, levels map[string]string) {
	t.Helper()
	for n, level := range levels {
		mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}}})
		eventually(t, 30*time.Second, "the default ServiceAccount of "+n, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset().CoreV1().ServiceAccounts(n).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		queue(t, c, n, gpuQuota, n)
	}
	// The webhook serves a namespace once its configuration lists it (it follows the Queues).
	eventually(t, time.Minute, "the webhook serving the tenants' namespaces", func(ctx context.Context) (bool, error) {
		mwc, err := c.Clientset().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "fairway-webhook", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, w := range mwc.Webhooks {
			sel := w.NamespaceSelector.String()
			served := true
			for n := range levels {
				served = served && strings.Contains(sel, n)
			}
			if served {
				return true, nil
			}
		}
		return false, nil
	})
}

// tenant is a namespace editor: user is bound to the ClusterRole edit in each namespace, and the
// client impersonates them, so every request has exactly a tenant's rights.
func tenant(t *testing.T, c *cluster.Cluster, user string, namespaces ...string) *kubernetes.Clientset {
	t.Helper()
	for _, n := range namespaces {
		mustCreate(t, c, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-edit", Namespace: n},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// sharePod is a busybox pod asking fairway for a GPU share as a user writes one: the share's
// annotation (key: a fraction or an amount of memory), fairway's scheduler, nothing else of
// fairway's; the webhook adds the rest. Its security context is Pod Security restricted's, run
// as uid.
func sharePod(namespace, name, key, value string, uid int64, script string) *corev1.Pod {
	p := restrictedPod(namespace, name, uid, script)
	p.Annotations = map[string]string{key: value}
	p.Spec.SchedulerName = fairwayv1.SchedulerName
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "POD_NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	return p
}

// cdiEnv is the variable the node's stand-in NVIDIA CDI spec (nvidiaCDISpec) sets in a
// container given one of its devices: a runtime that applies CDI devices sets it.
const cdiEnv = "FAIRWAY_TEST_CDI"

// shareProbe prints, one line each, what a share's container was given: NVIDIA_VISIBLE_DEVICES
// and cdiEnv ("unset" when unset), the NVIDIA device nodes in /dev, the NVIDIA runtime's
// volume-mount device list, the preload file, the share's configuration (comments left out),
// and whether the mounts behind both are read-only (their per-mount options in mountinfo).
var shareProbe = fmt.Sprintf(`probe() {
  echo "visible-env: ${NVIDIA_VISIBLE_DEVICES-unset}"
  echo "cdi-env: ${%[1]s-unset}"
  echo "gpu-devices: $(ls /dev | grep '^nvidia' | sort | tr '\n' ' ')"
  echo "device-list: $(ls %[2]s 2>&1 | tr '\n' ' ')"
  echo "preload: $(cat %[3]s 2>&1 | tr '\n' ' ')"
  echo "share-conf: $(grep -v '^#' %[4]s 2>&1 | tr '\n' ' ')"
  echo "share-mounts: $(awk '$5 == "%[3]s" || $5 == "%[5]s" {split($6, o, ","); print $5 "=" o[1]}' /proc/self/mountinfo | sort | tr '\n' ' ')"
}
`, cdiEnv, shareplugin.VolumeMountsRoot, shim.PreloadPath, filepath.Join(shim.ContainerDir, shim.ConfigName), shim.ContainerDir)

// logLine returns the rest of the last log line starting with prefix, trimmed.
func logLine(logs, prefix string) string {
	out := ""
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			out = strings.TrimSpace(rest)
		}
	}
	return out
}

// shareDelivery says how the agent's device plugin names a share's GPU to the runtime in a test.
type shareDelivery struct {
	// cdiOnly: by CDI devices alone (deviceListStrategy cdi-cri), so that whatever of the GPU
	// reaches the container came through the runtime's CDI: the plugin's answer has no device
	// nodes and no NVIDIA runtime volume-mount list. Otherwise the chart's default (cdi-cri,
	// device-nodes, volume-mounts).
	cdiOnly bool
}

// checkShareProbe checks shareProbe's output against what the share must have been given: the
// device node of its GPU (minor) and the driver's control nodes, and no other GPU; its GPU alone
// in the runtime's device list; no NVIDIA_VISIBLE_DEVICES; the share library preloaded from its
// read-only directory; a configuration of limitMiB, read-only.
func checkShareProbe(t *testing.T, who, logs string, uuid string, minor int, limitMiB int64) {
	t.Helper()
	checkShareProbeOf(t, who, logs, uuid, minor, limitMiB, shareDelivery{})
}

// checkShareProbeOf is checkShareProbe for delivery d: by CDI alone, no runtime device list.
func checkShareProbeOf(t *testing.T, who, logs string, uuid string, minor int, limitMiB int64, d shareDelivery) {
	t.Helper()
	var devs []string
	for _, d := range append([]string{nodes.GPUDeviceNode(minor)}, shareplugin.DefaultControlDevices...) {
		devs = append(devs, strings.TrimPrefix(d, "/dev/"))
	}
	slices.Sort(devs)
	deviceList := uuid
	if d.cdiOnly {
		deviceList = "ls: " + shareplugin.VolumeMountsRoot + ": No such file or directory"
	}
	want := map[string]string{
		"visible-env: ":  "unset",
		"gpu-devices: ":  strings.Join(devs, " "),
		"device-list: ":  deviceList,
		"preload: ":      filepath.Join(shim.ContainerDir, shim.LibraryName),
		"share-conf: ":   fmt.Sprintf("memory_limit_bytes=%d", limitMiB<<20),
		"share-mounts: ": shim.PreloadPath + "=ro " + shim.ContainerDir + "=ro",
	}
	for prefix, w := range want {
		got := logLine(logs, prefix)
		ok := got == w
		if prefix == "share-conf: " {
			// The limit first; the state file and, with MPS, the pipe directory follow.
			ok = strings.HasPrefix(got, w+" ")
		}
		if !ok {
			t.Errorf("%s: %s%q, want %q", who, prefix, got, w)
		}
	}
}

// nvidiaCDISpec is a stand-in for the CDI spec NVIDIA's toolkit generates (nvidia.com/gpu, one
// device per GPU by index, with its device node), whose devices also set cdiEnv, so that a
// container shows whether its runtime applied them. The agent finds the device of a share's GPU
// in it and names it to the kubelet beside its own.
func nvidiaCDISpec(gpus int) string {
	var b strings.Builder
	b.WriteString("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n")
	for i := range gpus {
		fmt.Fprintf(&b, "- name: %q\n  containerEdits:\n    deviceNodes:\n    - path: %s\n    env:\n    - %s=nvidia.com/gpu=%d\n",
			strconv.Itoa(i), nodes.GPUDeviceNode(i), cdiEnv, i)
	}
	return b.String()
}

// kubeletAllocations reads the kubelet's device-manager checkpoint on the node (the device-plugin
// directory is the host's, bind-mounted): per pod UID, the share device plugin's Allocate answer
// for its container, as the kubelet recorded it and replays at every container start.
func kubeletAllocations(t *testing.T, n *nodes.Node) map[string]*pluginapi.ContainerAllocateResponse {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.Dir, "device-plugins", "kubelet_internal_checkpoint"))
	if err != nil {
		t.Fatalf("the kubelet's device checkpoint: %v", err)
	}
	var cp struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID, ContainerName, ResourceName string
				AllocResp                           []byte
			}
		}
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatalf("the kubelet's device checkpoint: %v", err)
	}
	out := map[string]*pluginapi.ContainerAllocateResponse{}
	for _, e := range cp.Data.PodDeviceEntries {
		if e.ResourceName != string(fairwayv1.ResourceGPUShare) {
			continue
		}
		r := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, r); err != nil {
			t.Fatalf("the kubelet's record of pod %s's %s: %v", e.PodUID, e.ResourceName, err)
		}
		out[e.PodUID] = r
	}
	return out
}

// openProbe prints, for each NVIDIA device node in the container, what opening it for reading
// says: no driver serves the fake nodes, so "No such device or address" (ENXIO) where the
// container's device cgroup allows the node, "Operation not permitted" where it does not.
const openProbe = `echo "gpu-open: $(for d in /dev/nvidia*; do [ -c "$d" ] && head -c1 "$d" 2>&1 >/dev/null; done | tr '\n' ';')"
`

// restartScriptWith prints shareProbe's lines, runs extra, prints the pod's /dev/shm, then waits
// for the pod's annotation e2e.fairway.dev/restart=now (its downward API file) and exits 3,
// once: the kubelet restarts the container (restartPolicy OnFailure), which prints again and
// stays.
func restartScriptWith(extra string) string {
	return shareProbe + "probe\n" + extra + `echo "$POD_NAMESPACE" >/dev/shm/mark-$POD_NAMESPACE
echo "shm: $(ls /dev/shm | grep -v '^\.' | tr '\n' ' ')"
if [ ! -e /state/restarted ]; then
  touch /state/restarted
  until grep -q 'e2e.fairway.dev/restart="now"' /podinfo/annotations; do sleep 1; done
  echo "restarting"
  exit 3
fi
echo "restarted"
while :; do sleep 1; done`
}

// TestGPUShares: two shares of two namespaces (Pod Security restricted), one asking half a GPU
// and one 20000 MiB, placed by fairway's chart on a real kubelet, which admits them with one
// fairway.dev/gpu-share each from the gpu-agent's device plugin. Each container gets exactly what
// the plugin answered for the GPU the scheduler chose, and nothing of the tenant's: the device
// node of that GPU and the driver's control nodes and no other GPU's (fake device nodes), that
// GPU alone in the NVIDIA runtime's volume-mount device list, no NVIDIA_VISIBLE_DEVICES, and the
// share library with a share.conf of its own memory limit, both mounted read-only; the kubelet's
// own records (PodResources, its checkpoint) hold a slot of that GPU. The tenant then edits what
// its namespace lets it (the pod's annotations, a ConfigMap of the name the old delivery read
// NVIDIA_VISIBLE_DEVICES from, set to "all"; fairway's binding key is refused) and restarts the
// container: it comes back with the same GPU and limit, replayed by the kubelet from its record.
//
// Also shown, and kept as a finding: the plugin's answer names CDI devices (fairway's and the
// node's NVIDIA device of the GPU), which the kubelet passes in the CRI; containerd 1.6, as
// Debian 12 ships it, has no CDI and ignores them without an error, so on such nodes the device
// nodes of the answer are the delivery (docs/real-nodes.md).
//
// The kwok tier has no kubelet that calls a device plugin, no container, no mount.
func TestGPUShares(t *testing.T) {
	sn := startShareNode(t, shareNodeConfig{before: writeNVIDIACDISpec})
	testGPUShares(t, sn, shareDelivery{})
}

// TestGPUSharesCDI is TestGPUShares on a CDI-enabled node, with delivery by CDI alone: the node
// runs containerd 2.x (nodes.CDIImage), whose CRI applies CDI devices, with the stand-in NVIDIA
// CDI spec (nvidiaCDISpec: one device per fake GPU device node) in /etc/cdi, and the agent's
// device plugin answers the kubelet with CDI device names only (deviceListStrategy cdi-cri: no
// device nodes, no NVIDIA runtime device list, no variable). The node has no NVIDIA runtime at
// all, so nothing honours NVIDIA_VISIBLE_DEVICES (as where the GPU Operator refuses it from
// unprivileged containers). Each share's container has exactly the device node of the GPU the
// scheduler chose (and the driver's control nodes), put there by containerd from the CDI specs
// (fairway's fairway.dev/gpu, written by the agent into /var/run/cdi, and NVIDIA's device of
// the same GPU, whose variable is set), allowed by its device cgroup (opening it gives ENXIO,
// no driver); a neighbour GPU's node is absent; after the tenant edits its namespace and the
// container restarts, the same.
//
// containerd 1.6 (the default node image, TestGPUShares) drops CDI devices; this is the tier's
// one run of a runtime that applies them.
func TestGPUSharesCDI(t *testing.T) {
	sn := startShareNode(t, shareNodeConfig{nodeImage: nodes.CDIImage(), before: writeNVIDIACDISpec,
		set: []string{"agent.shares.deviceListStrategy=" + string(shareplugin.StrategyCDI)}})
	testGPUShares(t, sn, shareDelivery{cdiOnly: true})
}

// writeNVIDIACDISpec writes the stand-in NVIDIA CDI spec of the node's 8 fake GPUs into its
// /etc/cdi, where the agent reads it and containerd 2 resolves its devices.
func writeNVIDIACDISpec(t *testing.T, n *nodes.Node) {
	t.Helper()
	if _, err := n.Exec(t.Context(), "sh", "-c", "mkdir -p /etc/cdi && cat >/etc/cdi/nvidia.yaml <<'EOF'\n"+nvidiaCDISpec(8)+"EOF\n"); err != nil {
		t.Fatal(err)
	}
}

// testGPUShares is TestGPUShares's run on sn, whose agent delivers shares by d.
func testGPUShares(t *testing.T, sn *shareNode, d shareDelivery) {
	c, node, ctx := sn.c, sn.node, t.Context()
	levels := map[string]string{"share-a": "restricted", "share-b": "restricted"}
	tenants(t, c, "1", levels)
	type ask struct {
		key, value string
		uid        int64
		limitMiB   int64
	}
	asks := map[string]ask{
		"share-a": {fairwayv1.GPUFractionAnnotation, "0.5", 1000, 500 * sn.memMiB / 1000},
		"share-b": {fairwayv1.GPUMemoryAnnotation, "20000", 2000, 20000},
	}
	for n, a := range asks {
		p := sharePod(n, "share", a.key, a.value, a.uid, restartScriptWith(openProbe))
		p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		p.Spec.Volumes = []corev1.Volume{
			{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/state"}, {Name: "podinfo", MountPath: "/podinfo"}}
		mustCreate(t, c, p)
	}

	pr, err := assign.Dial(node.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	first := map[string]string{}
	for n, a := range asks {
		pod := waitPhase(t, c, n, "share", corev1.PodRunning, 3*time.Minute)
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		minor := sn.minorOf(uuid)
		if minor < 0 {
			t.Fatalf("%s/share: the scheduler recorded GPU %q, not a GPU of node %s", n, uuid, node.Name)
		}
		checkShareSpec(t, pod)
		logs := waitLog(t, c, n, "share", "shm: ", 30*time.Second) // the last line before it waits
		t.Logf("%s/share (%s=%s) on GPU %d %s:\n%s", n, a.key, a.value, minor, uuid, logs)
		checkShareProbeOf(t, n+"/share", logs, uuid, minor, a.limitMiB, d)
		checkOpenProbe(t, n+"/share", logs)
		if got := logLine(logs, "shm: "); got != "mark-"+n {
			t.Errorf("%s/share's /dev/shm holds %q; want only its own mark", n, got)
		}
		first[n] = logs
	}
	checkKubeletRecords(t, sn, pr, shareGPUs(t, c, slices.Collect(maps.Keys(asks))), d)

	// The tenant edits what its namespace lets it edit, then restarts the container.
	alice := tenant(t, c, "alice", "share-a", "share-b")
	for n := range asks {
		pod, err := getPod(ctx, c, n, "share")
		if err != nil {
			t.Fatal(err)
		}
		other := fakegpu.DeviceUUID(node.Name, (sn.minorOf(pod.Annotations[fairwayv1.GPUUUIDAnnotation])+1)%sn.gpus)
		if _, err := alice.CoreV1().ConfigMaps(n).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fairway-gpu-share"},
			Data: map[string]string{"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=80G"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: the tenant's ConfigMap: %v", n, err)
		}
		_, err = alice.CoreV1().Pods(n).Patch(ctx, "share", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, fairwayv1.GPUUUIDAnnotation, other), metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "fairway-owned-pod-keys") {
			t.Errorf("%s: the tenant's patch of %s to another GPU: %v, want the refusal of fairway-owned-pod-keys", n, fairwayv1.GPUUUIDAnnotation, err)
		} else {
			t.Logf("%s: the tenant's patch of %s to GPU %s: refused: %v", n, fairwayv1.GPUUUIDAnnotation, other, err)
		}
		if _, err := alice.CoreV1().Pods(n).Patch(ctx, "share", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"e2e.fairway.dev/restart":"now"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: the tenant's own annotation: %v", n, err)
		}
	}
	for n := range asks {
		eventually(t, 2*time.Minute, n+"/share restarted", func(ctx context.Context) (bool, error) {
			logs, err := podLogs(ctx, c, n, "share")
			return err == nil && strings.Contains(logs, "restarted"), nil
		})
		prev, err := c.Clientset().CoreV1().Pods(n).GetLogs("share", &corev1.PodLogOptions{Previous: true}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(prev), "restarting") {
			t.Fatalf("%s/share: the first container's log: %v\n%s", n, err, prev)
		}
		logs, _ := podLogs(ctx, c, n, "share")
		for _, prefix := range []string{"visible-env: ", "cdi-env: ", "gpu-devices: ", "gpu-open: ", "device-list: ", "preload: ", "share-conf: ", "share-mounts: "} {
			if before, after := logLine(first[n], prefix), logLine(logs, prefix); before != after {
				t.Errorf("%s/share after the tenant's edits and a restart: %s%q, before %q", n, prefix, after, before)
			}
		}
		t.Logf("%s/share after the tenant's edits and a restart: the same GPU, device list and limit", n)
	}
}

// checkOpenProbe checks openProbe's output: every NVIDIA device node the container has is
// allowed by its device cgroup (ENXIO from a node no driver serves), none refused.
func checkOpenProbe(t *testing.T, who, logs string) {
	t.Helper()
	got := logLine(logs, "gpu-open: ")
	lines := strings.Split(strings.TrimSuffix(got, ";"), ";")
	for _, l := range lines {
		if !strings.Contains(l, "No such device or address") {
			t.Errorf("%s: opening its NVIDIA device nodes: %q, want ENXIO (allowed, no driver) for each", who, got)
			return
		}
	}
}

// shareGPUs returns the GPU the scheduler recorded for the pod "share" of each namespace.
func shareGPUs(t *testing.T, c *cluster.Cluster, namespaces []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range namespaces {
		pod, err := getPod(t.Context(), c, n, "share")
		if err != nil {
			t.Fatal(err)
		}
		out[n] = pod.Annotations[fairwayv1.GPUUUIDAnnotation]
	}
	return out
}

// checkShareSpec checks what the webhook made of a share pod: its GPU container asks the kubelet
// for one fairway.dev/gpu-share, and nothing in it names a GPU (no NVIDIA_VISIBLE_DEVICES, no
// ConfigMap-fed variable).
func checkShareSpec(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	c := pod.Spec.Containers[0]
	if q := c.Resources.Limits[fairwayv1.ResourceGPUShare]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("%s/%s: container %s asks for %s %s, want 1", pod.Namespace, pod.Name, c.Name, q.String(), fairwayv1.ResourceGPUShare)
	}
	for _, e := range c.Env {
		if e.Name == "NVIDIA_VISIBLE_DEVICES" || (e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil) {
			t.Errorf("%s/%s: container %s has %s from %+v", pod.Namespace, pod.Name, c.Name, e.Name, e.ValueFrom)
		}
	}
	if len(c.EnvFrom) > 0 {
		t.Errorf("%s/%s: container %s has envFrom %+v", pod.Namespace, pod.Name, c.Name, c.EnvFrom)
	}
}

// checkKubeletRecords checks the real kubelet's records of the share pods (uuids: each pod's GPU
// as the scheduler recorded it, by namespace; pods named "share"): PodResources lists a slot of
// that GPU for the pod; the checkpoint holds the plugin's answer for it, with the GPU's device
// nodes, the share's read-only files, and the CDI devices of that GPU. And whether those reached
// the container: containerd 1.6 ignores CDI devices (the stand-in NVIDIA spec's variable is not
// set in the container), later containerd with CDI on applies them.
func checkKubeletRecords(t *testing.T, sn *shareNode, pr *assign.Client, uuids map[string]string, d shareDelivery) {
	t.Helper()
	ctx := t.Context()
	all, err := pr.List(ctx, string(fairwayv1.ResourceGPUShare))
	if err != nil {
		t.Fatal(err)
	}
	answers := kubeletAllocations(t, sn.node)
	version, err := sn.node.Exec(ctx, "containerd", "--version")
	if err != nil {
		t.Fatal(err)
	}
	noCDI := strings.Contains(version, " 1.6.")
	for n, uuid := range uuids {
		slots := all[types.NamespacedName{Namespace: n, Name: "share"}]
		for _, id := range slots {
			if g, err := fairwayv1.ParseShareSlotID(id); err != nil || g != uuid {
				t.Errorf("%s/share: the kubelet gave it slot %s; the scheduler chose GPU %s", n, id, uuid)
			}
		}
		if len(slots) != 1 {
			t.Errorf("%s/share: the kubelet lists slots %v, want one of GPU %s", n, slots, uuid)
		}
		pod, err := getPod(ctx, sn.c, n, "share")
		if err != nil {
			t.Fatal(err)
		}
		r := answers[string(pod.UID)]
		if r == nil {
			t.Fatalf("%s/share: no %s answer in the kubelet's checkpoint", n, fairwayv1.ResourceGPUShare)
		}
		minor := sn.minorOf(uuid)
		var devs []string
		for _, d := range r.Devices {
			devs = append(devs, d.HostPath+">"+d.ContainerPath)
		}
		var wantDevs []string
		if !d.cdiOnly {
			wantDevs = append(wantDevs, nodes.GPUDeviceNode(minor)+">"+nodes.GPUDeviceNode(minor))
			for _, d := range shareplugin.DefaultControlDevices {
				wantDevs = append(wantDevs, d+">"+d)
			}
		}
		if !slices.Equal(devs, wantDevs) {
			t.Errorf("%s/share: the plugin answered devices %v, want %v", n, devs, wantDevs)
		}
		var cdi []string
		for _, d := range r.CdiDevices {
			cdi = append(cdi, d.Name)
		}
		if want := []string{fairwayv1.CDIDeviceName(uuid), "nvidia.com/gpu=" + strconv.Itoa(minor)}; !slices.Equal(cdi, want) {
			t.Errorf("%s/share: the plugin answered CDI devices %v, want %v", n, cdi, want)
		}
		if len(r.Envs) > 0 {
			t.Errorf("%s/share: the plugin answered variables %v, want none", n, r.Envs)
		}
		ro := map[string]bool{}
		for _, m := range r.Mounts {
			ro[m.ContainerPath] = m.ReadOnly
		}
		for _, p := range []string{shim.PreloadPath, shim.ContainerDir, shareplugin.VolumeMountsRoot + "/" + uuid} {
			if d.cdiOnly && p == shareplugin.VolumeMountsRoot+"/"+uuid {
				if _, ok := ro[p]; ok {
					t.Errorf("%s/share: the plugin's mounts %v have the NVIDIA runtime's device list %s; delivery is by CDI alone", n, r.Mounts, p)
				}
				continue
			}
			if !ro[p] {
				t.Errorf("%s/share: the plugin's mounts %v have no read-only %s", n, r.Mounts, p)
			}
		}
		logs, _ := podLogs(ctx, sn.c, n, "share")
		got := logLine(logs, "cdi-env: ")
		switch {
		case noCDI && got != "unset":
			t.Errorf("%s/share: %s=%q with %s: containerd 1.6 applied a CDI device?", n, cdiEnv, got, strings.TrimSpace(version))
		case !noCDI && got != "nvidia.com/gpu="+strconv.Itoa(minor):
			t.Errorf("%s/share: %s=%q with %s, want NVIDIA's CDI device of GPU %d applied", n, cdiEnv, got, strings.TrimSpace(version), minor)
		}
		t.Logf("%s/share: the kubelet holds slot %v; the plugin's answer: devices %v, CDI devices %v, mounts %d; in the container %s=%s (%s)",
			n, slots, devs, cdi, len(r.Mounts), cdiEnv, got, strings.TrimSpace(version))
	}
}
