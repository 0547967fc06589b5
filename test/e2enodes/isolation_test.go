//go:build e2enodes

package e2enodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// isolationImageEnv names the fairway image TestIsolationOnRealNodes installs (its tag is the
// chart's image.tag); the image `make images` builds when unset.
const isolationImageEnv = "FAIRWAY_IMAGE"

// isolationScript prints what the GPU container of a fractional pod was given: its GPU, the
// modes and owners of its /dev/shm and MPS pipe directory, and the mounts behind them (the
// node's directories they come from, in mountinfo's root field); it leaves a mark in /dev/shm
// and keeps listing /dev/shm.
const isolationScript = `echo "visible=$NVIDIA_VISIBLE_DEVICES"
echo "$POD_NAMESPACE" >/dev/shm/mark-$POD_NAMESPACE
echo "modes: $(stat -c '%n=%a:%u' /dev/shm /tmp/nvidia-mps | tr '\n' ' ')"
echo "mounts: $(awk '$5 == "/dev/shm" || $5 == "/tmp/nvidia-mps" {print $5 "=" $4 "@" $3}' /proc/self/mountinfo | tr '\n' ' ')"
echo "shm-kib: $(df -k /dev/shm | awk 'NR == 2 {print $2}')"
while :; do echo "shm: $(ls /dev/shm | tr '\n' ' ')"; sleep 1; done`

// mpsStandIn is an nvidia-cuda-mps-control for nodes without a GPU, added to the fairway image
// the test installs: as the daemon (-f) it records its environment and what it sees as /dev/shm,
// leaves a file of its own there (where a real MPS server keeps the memory it shares with its
// clients) and serves a control pipe until told to quit; as a client it records each command.
const mpsStandIn = `#!/bin/sh
if [ "$1" = "-f" ]; then
  echo "visible=$CUDA_VISIBLE_DEVICES" >"$CUDA_MPS_LOG_DIRECTORY/daemon"
  echo "daemon $$" >/dev/shm/mps-daemon
  : >"$CUDA_MPS_PIPE_DIRECTORY/control"
  while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.1; done
  rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" "$CUDA_MPS_PIPE_DIRECTORY/quit"
  exit 0
fi
read cmd
echo "$cmd" >>"$CUDA_MPS_LOG_DIRECTORY/commands"
case "$cmd" in
  quit) : >"$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
  get_server_list) exit 1 ;;
esac
`

// withMPSStandIn builds image with mpsStandIn on its PATH and returns the new image's name.
func withMPSStandIn(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	df := "FROM " + image + "\nUSER 0:0\nCOPY nvidia-cuda-mps-control /usr/local/bin/nvidia-cuda-mps-control\nUSER 65532:65532\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia-cuda-mps-control"), []byte(mpsStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	out := image + "-mps-standin"
	if b, err := exec.CommandContext(t.Context(), "docker", "build", "-q", "-t", out, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build of %s: %v\n%s", out, err, b)
	}
	return out
}

// TestIsolationOnRealNodes installs the chart with MPS on (agent.mps.enabled: the agent serves
// the CSI driver mps.fairway.dev) on a real node, on go-nvml's mock with a stand-in for NVIDIA's
// MPS control daemon (mpsStandIn), and runs half-GPU pods of two namespaces there, one that enforces Pod Security
// restricted and one baseline, both through the webhook as users create them. Both pods start:
// their MPS pipe directory and /dev/shm reach them as CSI ephemeral volumes, which the API
// server's PodSecurity admission allows where it refuses hostPath (checked: a hostPath pod is
// refused in the same namespace). The real kubelet found the agent's driver through its plugin
// registration and published the volumes with the pods' identities; each pod's /dev/shm and pipe
// directory come from directories of that pod alone on the node, owned by the pod's user, not
// writable by others, behind ancestors nobody can list; and neither pod sees the other's shared
// memory. Each pod got an MPS daemon of its own before its containers started: only the pod's GPU
// visible, the pod's memory limit and thread percentage sent as server-side defaults, and the
// pod's /dev/shm as the daemon's (the file the daemon left there shows in that pod's /dev/shm and
// not in the other's). The kwok tier cannot show any of it: its kubelets neither publish volumes nor start
// containers.
func TestIsolationOnRealNodes(t *testing.T) {
	image := os.Getenv(isolationImageEnv)
	if image == "" {
		image = fairwayImage
	}
	image = withMPSStandIn(t, image)
	repo, tag, ok := strings.Cut(image, ":")
	if !ok {
		t.Fatalf("%s=%q: want repository:tag", isolationImageEnv, image)
	}
	c := cluster.StartT(t, cluster.Config{KubeScheduler: true, APIServerFlags: []string{"--enable-aggregator-routing=true"}})
	ns := nodes.StartT(t, c, nodes.Config{Count: 1, KubernetesService: true,
		Labels: map[string]string{"nvidia.com/gpu.present": "true"}, ExtraImages: []string{image}, ReadyTimeout: 5 * time.Minute})
	node := ns.Nodes[0]
	ctx := t.Context()
	helmInstall(t, c, "image.repository="+repo, "image.tag="+tag, "image.pullPolicy=Never",
		"agent.nvml=mock:dgxh100", "agent.runtimeClassName=", "agent.mps.enabled=true",
		"scheduler.replicas=1", "webhook.replicas=1", "webhook.podDisruptionBudget.enabled=false", "scheduler.reservation.image="+pauseImage)
	eventually(t, time.Minute, "node "+node.Name+" labelled by its agent, with MPS", func(ctx context.Context) (bool, error) {
		n, err := c.Clientset().CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil || n.Labels[fairwayv1.GPUCountLabel] != "8" {
			return false, nil
		}
		// The agent found the MPS control daemon: its GPUs are in mps mode.
		var inv fairwayv1.GPUInventory
		return json.Unmarshal([]byte(n.Annotations[fairwayv1.GPUInventoryAnnotation]), &inv) == nil && inv.MPS, nil
	})
	// The kubelet registered the agent's driver (CSINode), through the registration socket.
	eventually(t, time.Minute, "CSINode "+node.Name+" listing "+fairwayv1.MPSDriverName, func(ctx context.Context) (bool, error) {
		cn, err := c.Clientset().StorageV1().CSINodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == fairwayv1.MPSDriverName {
				return true, nil
			}
		}
		return false, nil
	})

	levels := map[string]string{"iso-restricted": "restricted", "iso-baseline": "baseline"}
	users := map[string]int64{"iso-restricted": 1000, "iso-baseline": 2000}
	for n, level := range levels {
		mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}}})
		eventually(t, 30*time.Second, "the default ServiceAccount of "+n, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset().CoreV1().ServiceAccounts(n).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		queue(t, c, n, "1", n)
	}
	// The webhook serves a namespace once its configuration lists it (it follows the Queues).
	eventually(t, time.Minute, "the webhook serving both namespaces", func(ctx context.Context) (bool, error) {
		mwc, err := c.Clientset().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "fairway-webhook", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, w := range mwc.Webhooks {
			if sel := w.NamespaceSelector.String(); strings.Contains(sel, "iso-restricted") && strings.Contains(sel, "iso-baseline") {
				return true, nil
			}
		}
		return false, nil
	})

	// Pod Security enforces restricted: a hostPath volume (what fractional pods carried before)
	// is refused there.
	hp := restrictedPod("iso-restricted", "hostpath", 1000, "sleep 1")
	hp.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/fairway/mps"}}}}
	if err := c.Client().Create(ctx, hp); err == nil || !strings.Contains(err.Error(), "hostPath") {
		t.Fatalf("a hostPath pod in a restricted namespace: %v, want PodSecurity's refusal", err)
	}

	for n := range levels {
		p := restrictedPod(n, "half", users[n], isolationScript)
		p.Annotations = map[string]string{fairwayv1.GPUFractionAnnotation: "0.5"}
		p.Spec.SchedulerName = fairwayv1.SchedulerName
		if n == "iso-baseline" {
			// A bigger /dev/shm, the usual way: the webhook makes it the MPS one, of this size.
			p.Spec.Volumes = []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("128Mi"))}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}}
		}
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "POD_NAMESPACE",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
		if err := c.Client().Create(ctx, p); err != nil {
			t.Fatalf("creating the half-GPU pod in %s (Pod Security %s): %v", n, levels[n], err)
		}
	}

	srcs := map[string]string{}
	for n := range levels {
		pod := waitPhase(t, c, n, "half", corev1.PodRunning, 3*time.Minute)
		// What the webhook put into the pod spec: CSI volumes of the agent's driver, no hostPath.
		csiVolumes := 0
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s/half has a hostPath volume %s", n, v.Name)
			}
			if v.CSI != nil && v.CSI.Driver == fairwayv1.MPSDriverName {
				csiVolumes++
			}
		}
		if csiVolumes != 2 {
			t.Errorf("%s/half: %d volumes of %s, want 2 (pipe, shm): %+v", n, csiVolumes, fairwayv1.MPSDriverName, pod.Spec.Volumes)
		}
		logs := waitLog(t, c, n, "half", "mounts:", 30*time.Second)
		t.Logf("%s/half (uid %s):\n%s", n, pod.UID, firstLines(logs, 4))
		want := map[string]string{"/dev/shm": "shm", "/tmp/nvidia-mps": "pipe"}
		mounts := fields(logs, "mounts: ")
		// The pipe directory is the node's .../pods/<uid>/pipe; /dev/shm is the root of a tmpfs
		// of its own, the one the agent mounted at .../pods/<uid>/shm (the same device), of the
		// pod's size: 64 MiB, or the 128 MiB of the emptyDir the baseline pod asked for.
		pipeRoot, _, _ := strings.Cut(mounts["/tmp/nvidia-mps"], "@")
		if !strings.HasSuffix(pipeRoot, "/pods/"+string(pod.UID)+"/pipe") {
			t.Errorf("%s/half: /tmp/nvidia-mps comes from %q, want the node's .../pods/%s/pipe", n, pipeRoot, pod.UID)
		}
		shmRoot, shmDev, _ := strings.Cut(mounts["/dev/shm"], "@")
		nodeDev, err := node.Exec(ctx, "stat", "-c", "%Hd:%Ld", "/run/fairway/mps/pods/"+string(pod.UID)+"/shm")
		if err != nil {
			t.Fatal(err)
		}
		if shmRoot != "/" || shmDev != strings.TrimSpace(nodeDev) {
			t.Errorf("%s/half: /dev/shm is %q of device %s, want the root of the tmpfs at the node's .../pods/%s/shm (device %s)",
				n, shmRoot, shmDev, pod.UID, strings.TrimSpace(nodeDev))
		}
		if got, want := fields(logs, "shm-kib: ")["_"], map[string]string{"iso-restricted": "65536", "iso-baseline": "131072"}[n]; got != want {
			t.Errorf("%s/half: /dev/shm of %s KiB, want %s", n, got, want)
		}
		srcs[n+"/tmp/nvidia-mps"], srcs[n+"/dev/shm"] = pipeRoot, shmDev
		// /dev/shm is the pod's user's alone (no fsGroup, no group: 0700), not the 1777 of a
		// shared /dev/shm; the pipe directory is the agent's and sticky, so the pod cannot remove
		// or replace its daemon's control pipe.
		modes := fields(logs, "modes: ")
		for path := range want {
			wantMode := "700:" + itoa(users[n])
			if path == "/tmp/nvidia-mps" {
				wantMode = "1777:0"
			}
			if got := modes[path]; got != wantMode {
				t.Errorf("%s/half: %s is mode:owner %q, want %q", n, path, got, wantMode)
			}
		}
		// On the node: the ancestors can be crossed, not listed; the pod's /dev/shm is its user's,
		// its pipe directory the agent's and sticky.
		out, err := node.Exec(ctx, "stat", "-c", "%n=%a:%u", "/run/fairway/mps", "/run/fairway/mps/pods", "/run/fairway/mps/pods/"+string(pod.UID),
			"/run/fairway/mps/pods/"+string(pod.UID)+"/pipe", "/run/fairway/mps/pods/"+string(pod.UID)+"/shm")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Fields(out) {
			path, mode, _ := strings.Cut(line, "=")
			wantMode := "711:0"
			if strings.HasSuffix(path, "/pipe") {
				wantMode = "1777:0"
			} else if strings.HasSuffix(path, "/shm") {
				wantMode = "700:" + itoa(users[n])
			}
			if mode != wantMode {
				t.Errorf("node %s: %s is mode:owner %s, want %s", node.Name, path, mode, wantMode)
			}
		}
	}
	// Each pod's daemon: its GPU only, and the server-side limits sent before the pod started
	// (the publish waits for them): half of its GPU's memory (the agent's inventory), and 50% of
	// its threads.
	nd, err := c.Clientset().CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var inv fairwayv1.GPUInventory
	if err := json.Unmarshal([]byte(nd.Annotations[fairwayv1.GPUInventoryAnnotation]), &inv); err != nil {
		t.Fatal(err)
	}
	for n := range levels {
		pod, err := getPod(ctx, c, n, "half")
		if err != nil {
			t.Fatal(err)
		}
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		logDir := "/run/fairway/mps/pods/" + string(pod.UID) + "/log"
		out, err := node.Exec(ctx, "cat", logDir+"/daemon", logDir+"/commands")
		if err != nil {
			t.Fatalf("%s/half's MPS daemon: %v", n, err)
		}
		var mib int64
		for _, g := range inv.GPUs {
			if g.UUID == uuid {
				mib = g.MemoryMiB / 2
			}
		}
		if mib == 0 {
			t.Fatalf("%s/half's GPU %q is not in the node's inventory", n, uuid)
		}
		want := fmt.Sprintf("visible=%s\nset_default_device_pinned_mem_limit %s %dM\nset_default_active_thread_percentage 50\n", uuid, uuid, mib)
		if out != want {
			t.Errorf("%s/half's MPS daemon recorded:\n%s\nwant:\n%s", n, out, want)
		}
	}
	if srcs["iso-restricted/dev/shm"] == srcs["iso-baseline/dev/shm"] || srcs["iso-restricted/tmp/nvidia-mps"] == srcs["iso-baseline/tmp/nvidia-mps"] {
		t.Errorf("the two namespaces' pods share a directory: %v", srcs)
	}
	for n := range levels {
		var last string
		eventually(t, 30*time.Second, n+"/half listing /dev/shm", func(ctx context.Context) (bool, error) {
			logs, err := podLogs(ctx, c, n, "half")
			if err != nil {
				return false, nil
			}
			lines := strings.Split(logs, "\n")
			last = lines[len(lines)-1]
			return strings.HasPrefix(last, "shm: ") && strings.Contains(last, "mark-"+n), nil
		})
		// Its own mark and its own MPS daemon's file, nothing of the other pod's.
		if got := strings.Fields(strings.TrimPrefix(last, "shm: ")); !slices.Equal(got, []string{"mark-" + n, "mps-daemon"}) {
			t.Errorf("%s/half's /dev/shm holds %v; want only its own mark and its own MPS daemon's file", n, got)
		}
	}

	// The pods go: their directories go with them.
	for n := range levels {
		pod, _ := getPod(ctx, c, n, "half")
		if err := c.Clientset().CoreV1().Pods(n).Delete(ctx, "half", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the MPS directories of "+n+"/half removed", func(ctx context.Context) (bool, error) {
			_, err := node.Exec(ctx, "test", "!", "-e", "/run/fairway/mps/pods/"+string(pod.UID))
			return err == nil, nil
		})
	}
}

// restrictedPod is a busybox pod that Pod Security restricted admits: non-root user uid, no
// privilege escalation, no capabilities, the runtime's default seccomp profile.
func restrictedPod(namespace, name string, uid int64, script string) *corev1.Pod {
	p := shPod(namespace, name, "", script)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	return p
}

// fields reads "prefix k=v k=v" from the first log line with that prefix; a field without "="
// is under "_".
func fields(logs, prefix string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			for _, f := range strings.Fields(rest) {
				k, v, ok := strings.Cut(f, "=")
				if !ok {
					k, v = "_", f
				}
				out[k] = v
			}
			break
		}
	}
	return out
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
