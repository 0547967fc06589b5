//go:build e2enodes

package e2enodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/nodes"
)

// isolationImageEnv names the fairway image TestIsolationOnRealNodes installs (its tag is the
// chart's image.tag); the image `make images` builds when unset.
const isolationImageEnv = "FAIRWAY_IMAGE"

// isolationScript prints what the GPU container of a share was given (shareProbe), the modes and
// owners of its /dev/shm and MPS pipe directory and the mounts behind them (the node's
// directories they come from, in mountinfo's root field); it leaves a mark in /dev/shm, tries
// to break out of its share (escapeAttempts), prints shareProbe's lines again, and keeps listing
// /dev/shm.
var isolationScript = shareProbe + `probe
echo "$POD_NAMESPACE" >/dev/shm/mark-$POD_NAMESPACE
echo "modes: $(stat -c '%n=%a:%u' /dev/shm /tmp/nvidia-mps | tr '\n' ' ')"
echo "mounts: $(awk '$5 == "/dev/shm" || $5 == "/tmp/nvidia-mps" {print $5 "=" $4 "@" $3}' /proc/self/mountinfo | tr '\n' ' ')"
echo "shm-kib: $(df -k /dev/shm | awk 'NR == 2 {print $2}')"
` + escapeAttempts + `echo "attempts done"
probe
echo "probed again"
while :; do echo "shm: $(ls /dev/shm | grep -v '^\.' | tr '\n' ' ')"; sleep 1; done`

// escapeAttempts are what a share's container tries against its share: each attempt prints
// "attempt <name> rc=<exit status>: <output>". The share's files: overwrite or append to them,
// replace the library, remove the preload file, remount them read-write, unmount them, cover
// them with a mount of its own. Its GPU: open its own device node (a control: the device cgroup
// allows it, so the fake node answers ENXIO as a GPU without driver would), make a node of its
// own GPU's numbers and open it (a control for the next: a node the container makes reaches
// the device when the cgroup allows it), then make one of another GPU's numbers and open it.
var escapeAttempts = fmt.Sprintf(`attempt() {
  name=$1; shift
  out=$("$@" 2>&1); rc=$?
  echo "attempt $name rc=$rc: $(echo "$out" | tr '\n' ' ')"
}
own=$(ls /dev | sed -n 's/^nvidia\([0-9][0-9]*\)$/\1/p' | head -1)
other=$(( (${own:-0} + 1) %% 8 ))
attempt write-preload sh -c 'echo /tmp/evil.so >%[1]s'
attempt append-share-conf sh -c 'echo memory_limit_bytes=85899345920 >>%[2]s'
attempt replace-library cp /bin/sh %[3]s
attempt remove-preload rm -f %[1]s
attempt remount-rw mount -o remount,rw %[4]s
attempt unmount-preload umount %[1]s
attempt cover-share-dir mount -t tmpfs tmpfs %[4]s
attempt open-own-gpu cat /dev/nvidia$own
attempt mknod-own-gpu sh -c "mknod /tmp/own-gpu c %[5]d $own && cat /tmp/own-gpu"
attempt mknod-other-gpu sh -c "mknod /tmp/other-gpu c %[5]d $other && cat /tmp/other-gpu"
`, shim.PreloadPath, filepath.Join(shim.ContainerDir, shim.ConfigName), filepath.Join(shim.ContainerDir, shim.LibraryName),
	shim.ContainerDir, nodes.GPUDeviceMajor)

// Reasons an attempt fails for. An attempt that fails for another reason (a missing applet, a
// wrong path) shows nothing, and fails the test as much as one that succeeds.
const (
	errReadOnly  = "Read-only file system"
	errDenied    = "Permission denied"
	errBusy      = "resource busy" // busybox rm: "Device or resource busy"
	errNotPermit = "Operation not permitted"
	errMountPerm = "permission denied" // busybox mount's words for EPERM and EACCES
	errNoDriver  = "No such device or address"
)

// escapeExpect is, per attempt, the reasons it must fail for; root is the baseline pod's user,
// who passes file permissions (CAP_DAC_OVERRIDE) and may make device nodes (CAP_MKNOD), which
// restricted's non-root user without capabilities may not. The open-own-gpu and mknod-own-gpu
// controls must fail with errNoDriver where allowed: the device was reached.
func escapeExpect(root bool) map[string][]string {
	write := []string{errReadOnly}
	remove := []string{errBusy, errReadOnly}
	mknodOwn := []string{errNoDriver}
	if !root {
		write = append(write, errDenied)
		remove = append(remove, errDenied)
		mknodOwn = []string{errNotPermit, errDenied}
	}
	return map[string][]string{
		"write-preload":     write,
		"append-share-conf": write,
		"replace-library":   write,
		"remove-preload":    remove,
		"remount-rw":        {errMountPerm, errNotPermit},
		"unmount-preload":   {errNotPermit, errMountPerm},
		"cover-share-dir":   {errMountPerm, errNotPermit},
		"open-own-gpu":      {errNoDriver},
		"mknod-own-gpu":     mknodOwn,
		"mknod-other-gpu":   {errNotPermit, errDenied},
	}
}

// checkEscapes reads escapeAttempts' lines from a container's log: every attempt ran, exited
// non-zero, for one of its expected reasons.
func checkEscapes(t *testing.T, who, logs string, root bool) {
	t.Helper()
	for name, reasons := range escapeExpect(root) {
		line := logLine(logs, "attempt "+name+" ")
		rc, out, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			t.Errorf("%s: attempt %s did not run", who, name)
		case rc == "rc=0":
			t.Errorf("%s: attempt %s SUCCEEDED: %s", who, name, out)
		case !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(out, r) }):
			t.Errorf("%s: attempt %s failed (%s) for another reason than %q: %s", who, name, rc, reasons, out)
		case name == "open-own-gpu" || (root && name == "mknod-own-gpu"):
			t.Logf("%s: control %s reached the device, as its own GPU must (%s): %s", who, name, rc, out)
		default:
			t.Logf("%s: attempt %s blocked (%s): %s", who, name, rc, out)
		}
	}
}

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
// MPS control daemon (mpsStandIn), and runs half-GPU pods of two namespaces there, through the
// webhook as users create them: one enforces Pod Security restricted (uid 1000, no
// capabilities), one baseline, where the pod runs as root with the runtime's default
// capabilities, the strongest tenant Pod Security lets in, and sets NVIDIA_VISIBLE_DEVICES=all
// (the webhook takes it out). Each pod's GPU reaches it from the gpu-agent's device plugin
// (fairway.dev/gpu-share), as TestGPUShares shows without MPS; here each then tries to break out
// of its share and fails (escapeAttempts, checkEscapes): the share library's preload file and
// share.conf cannot be written, replaced, removed, remounted, unmounted or covered, and the
// device cgroup refuses another GPU's device node that the root pod makes itself while it allows
// its own. The share files read the same after the attempts.
//
// MPS: both pods start; their MPS pipe directory and /dev/shm reach them as CSI ephemeral volumes,
// which the API server's PodSecurity admission allows where it refuses hostPath (checked: a
// hostPath pod is refused in the same namespace). The real kubelet found the agent's driver
// through its plugin registration and published the volumes with the pods' identities; each
// pod's /dev/shm and pipe directory come from directories of that pod alone on the node, owned by
// the pod's user, not writable by others, behind ancestors nobody can list; and neither pod sees
// the other's shared memory. Each pod got an MPS daemon of its own before its containers
// started: only the pod's GPU visible, the pod's memory limit and thread percentage sent as
// server-side defaults, and the pod's /dev/shm as the daemon's.
//
// Then, on the same node: a second share cannot get the first's GPU and limit (SecondShare), and
// a tenant cannot get a share past fairway (ForgedTickets). The kwok tier cannot show any of it:
// its kubelets neither call device plugins, publish volumes nor start containers.
func TestIsolationOnRealNodes(t *testing.T) {
	image := os.Getenv(isolationImageEnv)
	if image == "" {
		image = fairwayImage
	}
	sn := startShareNode(t, shareNodeConfig{image: withMPSStandIn(t, image), set: []string{"agent.mps.enabled=true"}})
	c, node, ctx := sn.c, sn.node, t.Context()
	eventually(t, time.Minute, "node "+node.Name+"'s agent running MPS", func(ctx context.Context) (bool, error) {
		n, err := c.Clientset().CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
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
	users := map[string]int64{"iso-restricted": 1000, "iso-baseline": 0}
	tenants(t, c, "1", levels)

	// Pod Security enforces restricted: a hostPath volume (what fractional pods carried before)
	// is refused there.
	hp := restrictedPod("iso-restricted", "hostpath", 1000, "sleep 1")
	hp.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/fairway/mps"}}}}
	if err := c.Client().Create(ctx, hp); err == nil || !strings.Contains(err.Error(), "hostPath") {
		t.Fatalf("a hostPath pod in a restricted namespace: %v, want PodSecurity's refusal", err)
	}

	for n := range levels {
		p := sharePod(n, "half", fairwayv1.GPUFractionAnnotation, "0.5", users[n], isolationScript)
		if n == "iso-baseline" {
			// Root with the runtime's default capabilities, and a GPU of its choosing.
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
			p.Spec.Containers[0].SecurityContext = nil
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"})
			// A bigger /dev/shm, the usual way: the webhook makes it the MPS one, of this size.
			p.Spec.Volumes = []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("128Mi"))}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}}
		}
		if err := c.Client().Create(ctx, p); err != nil {
			t.Fatalf("creating the half-GPU pod in %s (Pod Security %s): %v", n, levels[n], err)
		}
	}
	halves := map[string]*corev1.Pod{}
	for n := range levels {
		pod := waitPhase(t, c, n, "half", corev1.PodRunning, 3*time.Minute)
		halves[n] = pod
		checkShareSpec(t, pod)
		logs := waitLog(t, c, n, "half", "probed again", time.Minute)
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		before, after, _ := strings.Cut(logs, "attempts done")
		t.Logf("%s/half (uid %s, user %d) on GPU %d %s:\n%s", n, pod.UID, users[n], sn.minorOf(uuid), uuid, logs)
		checkShareProbe(t, n+"/half", before, uuid, sn.minorOf(uuid), 500*sn.memMiB/1000)
		t.Run("Escapes/"+n, func(t *testing.T) {
			checkEscapes(t, n+"/half", logs, users[n] == 0)
			// What the attempts could have changed reads as before.
			checkShareProbe(t, n+"/half after the attempts", after, uuid, sn.minorOf(uuid), 500*sn.memMiB/1000)
		})
	}
	t.Run("MPS", func(t *testing.T) { checkMPSVolumes(t, sn, levels, users, halves) })
	t.Run("SecondShare", func(t *testing.T) { checkSecondShare(t, sn) })
	t.Run("ForgedTickets", func(t *testing.T) { checkForgedTickets(t, sn, halves["iso-baseline"]) })

	// The pods go: their MPS directories and share files go with them.
	for n, pod := range halves {
		if err := c.Clientset().CoreV1().Pods(n).Delete(ctx, "half", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the MPS directories and share files of "+n+"/half removed", func(ctx context.Context) (bool, error) {
			_, err := node.Exec(ctx, "sh", "-c", "test ! -e /run/fairway/mps/pods/"+string(pod.UID)+" && test ! -e /var/lib/fairway/share/shares/"+string(pod.UID))
			return err == nil, nil
		})
	}
}

// checkMPSVolumes checks each half's MPS volumes and daemon (see TestIsolationOnRealNodes).
func checkMPSVolumes(t *testing.T, sn *shareNode, levels map[string]string, users map[string]int64, halves map[string]*corev1.Pod) {
	c, node, ctx := sn.c, sn.node, t.Context()
	srcs := map[string]string{}
	for n := range levels {
		pod := halves[n]
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
		logs, err := podLogs(ctx, c, n, "half")
		if err != nil {
			t.Fatal(err)
		}
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
		for _, path := range []string{"/dev/shm", "/tmp/nvidia-mps"} {
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
		// The daemon: its GPU only, and the server-side limits sent before the pod started (the
		// publish waits for them): half of its GPU's memory, and 50% of its threads.
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		logDir := "/run/fairway/mps/pods/" + string(pod.UID) + "/log"
		daemon, err := node.Exec(ctx, "cat", logDir+"/daemon", logDir+"/commands")
		if err != nil {
			t.Fatalf("%s/half's MPS daemon: %v", n, err)
		}
		want := fmt.Sprintf("visible=%s\nset_default_device_pinned_mem_limit %s %dM\nset_default_active_thread_percentage 50\n", uuid, uuid, sn.memMiB/2)
		if daemon != want {
			t.Errorf("%s/half's MPS daemon recorded:\n%s\nwant:\n%s", n, daemon, want)
		}
		// Its own mark and its own MPS daemon's file, nothing of the other pod's.
		var last string
		eventually(t, 30*time.Second, n+"/half listing /dev/shm", func(ctx context.Context) (bool, error) {
			logs, err := podLogs(ctx, c, n, "half")
			if err != nil {
				return false, nil
			}
			last = logLine(logs, "shm: ")
			return strings.Contains(last, "mark-"+n), nil
		})
		if got := strings.Fields(last); !slices.Equal(got, []string{"mark-" + n, "mps-daemon"}) {
			t.Errorf("%s/half's /dev/shm holds %v; want only its own mark and its own MPS daemon's file", n, got)
		}
	}
	if srcs["iso-restricted/dev/shm"] == srcs["iso-baseline/dev/shm"] || srcs["iso-restricted/tmp/nvidia-mps"] == srcs["iso-baseline/tmp/nvidia-mps"] {
		t.Errorf("the two namespaces' pods share a directory: %v", srcs)
	}
}

// gateLabel keeps SecondShare's pods off the node until both wait for it.
const gateLabel = "e2e.fairway.dev/gate"

// checkSecondShare: two shares, of two sizes (0.75 and 0.5 of a GPU, so on two GPUs), wait for
// the same node at once and are placed in one cycle when the node opens to them. Were both bound
// before the kubelet admitted either, the device plugin, to which the kubelet names no pod,
// would have two candidates and guess; a wrong guess (the kubelet orders a batch by creation
// time, the plugin by binding) gives each the other's GPU and limit. The binder's per-node gate
// binds a node's next share only once the kubelet has admitted the previous one: the pods' own
// watch (the API server's order of events) shows the second binding after the first admission,
// and each pod holds its own GPU and limit, in its container and in the kubelet's record.
func checkSecondShare(t *testing.T, sn *shareNode) {
	c, node, ctx := sn.c, sn.node, t.Context()
	const ns = "iso-gate"
	tenants(t, c, "4", map[string]string{ns: "restricted"})
	w, err := c.Clientset().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pods := []struct {
		name, fraction string
		milli          int64
	}{
		{"created-first", "0.75", 750},
		{"created-second", "0.5", 500},
	}
	for _, p := range pods {
		pod := sharePod(ns, p.name, fairwayv1.GPUFractionAnnotation, p.fraction, 1000, shareProbe+"probe\nwhile :; do sleep 1; done")
		pod.Spec.NodeSelector = map[string]string{gateLabel: "open"}
		mustCreate(t, c, pod)
		time.Sleep(1100 * time.Millisecond) // creation times a second apart: the kubelet's order is unambiguous
	}
	if _, err := c.Clientset().CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"open"}}}`, gateLabel), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pods' history in the watch's order (the API server's): when each was bound, and when
	// the kubelet admitted it (the binder's test: container statuses, or past Pending).
	bound, admitted := map[string]int{}, map[string]int{}
	deadline := time.After(3 * time.Minute)
	for seq := 0; len(admitted) < len(pods); seq++ {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of " + ns + "'s pods ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if _, seen := bound[p.Name]; !seen && p.Spec.NodeName != "" {
				bound[p.Name] = seq
			}
			if _, seen := admitted[p.Name]; !seen && (len(p.Status.ContainerStatuses) > 0 || p.Status.Phase != corev1.PodPending) {
				admitted[p.Name] = seq
			}
		case <-deadline:
			t.Fatalf("the kubelet admitted %v of %s's two pods in 3m (bound: %v)", admitted, ns, bound)
		}
	}
	firstBound, secondBound := pods[0].name, pods[1].name
	if bound[secondBound] < bound[firstBound] {
		firstBound, secondBound = secondBound, firstBound
	}
	t.Logf("bound %s (event %d, admitted at event %d), then %s (event %d, admitted at event %d)",
		firstBound, bound[firstBound], admitted[firstBound], secondBound, bound[secondBound], admitted[secondBound])
	if firstBound == pods[1].name {
		t.Logf("bound against their creation order: the order in which the kubelet would have admitted a batch of both")
	}
	if admitted[firstBound] > bound[secondBound] {
		t.Errorf("%s was bound (event %d) before the kubelet admitted %s (event %d): two shares bound and not admitted on node %s",
			secondBound, bound[secondBound], firstBound, admitted[firstBound], node.Name)
	}
	pr, err := assign.Dial(node.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	slots, err := pr.List(ctx, string(fairwayv1.ResourceGPUShare))
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[string]string{}
	for _, p := range pods {
		pod := waitPhase(t, c, ns, p.name, corev1.PodRunning, 2*time.Minute)
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		gpus[p.name] = uuid
		logs := waitLog(t, c, ns, p.name, "share-mounts:", 30*time.Second)
		checkShareProbe(t, ns+"/"+p.name, logs, uuid, sn.minorOf(uuid), p.milli*sn.memMiB/1000)
		for _, id := range slots[types.NamespacedName{Namespace: ns, Name: p.name}] {
			if g, _ := fairwayv1.ParseShareSlotID(id); g != uuid {
				t.Errorf("%s/%s: the kubelet gave it slot %s; the scheduler chose GPU %s", ns, p.name, id, uuid)
			}
		}
		t.Logf("%s/%s (%s GPU): GPU %d, its own limit of %d MiB", ns, p.name, p.fraction, sn.minorOf(uuid), p.milli*sn.memMiB/1000)
	}
	if gpus[pods[0].name] == gpus[pods[1].name] {
		t.Errorf("0.75 and 0.5 of a GPU on one GPU %s", gpus[pods[0].name])
	}
}

// ticketPod is a busybox pod asking for fairway.dev/gpu-share itself, of scheduler, created
// with node ("" for none).
func ticketPod(namespace, name, scheduler, node string) *corev1.Pod {
	p := shPod(namespace, name, node, "ls /dev; sleep 3600")
	p.Spec.SchedulerName = scheduler
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPUShare: resource.MustParse("1")}
	return p
}

// checkForgedTickets: a namespace editor (mallory) tries to get a GPU share past fairway, and is
// refused at each layer. The admission policy fairway-gpu-share-ticket, which holds where no
// webhook looks, refuses fairway.dev/gpu-share on a pod of another scheduler, and on one created
// with its node (which no scheduler would see: the kubelet would take it, and the device plugin,
// to which the kubelet names no pod, could hand it a waiting share's GPU); fairway-owned-pod-keys
// refuses a pod that names the victim's GPU there. Where the webhook serves, it refuses a ticket
// without a share and takes the victim's GPU out of a share that names it; its guard refuses a
// pod of fairway's scheduler where no queue serves.
//
// With the webhook down (its guard fails open), a pod opted out of the webhook, naming fairway's
// scheduler, with a ticket, a share and forged admission keys, is admitted but never placed: it
// carries no valid seal (NotAdmitted). mallory may not bind it herself (RBAC). Bound anyway, by
// the admin as a scheduler that ignores fairway would, the real kubelet asks the device plugin,
// which finds no decision of fairway's for the pod: the kubelet refuses it
// (UnexpectedAdmissionError) and no container starts.
func checkForgedTickets(t *testing.T, sn *shareNode, victim *corev1.Pod) {
	c, node, ctx := sn.c, sn.node, t.Context()
	const rogue = "iso-rogue"
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rogue, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}}})
	mallory := tenant(t, c, "mallory", rogue, victim.Namespace)
	victimGPU := victim.Annotations[fairwayv1.GPUUUIDAnnotation]
	victimKey := map[string]string{fairwayv1.GPUUUIDAnnotation: victimGPU}
	onVictimGPU := ticketPod(rogue, "on-victim-gpu", corev1.DefaultSchedulerName, "")
	onVictimGPU.Spec.Containers[0].Resources.Limits = nil
	onVictimGPU.Annotations = victimKey
	refusals := []struct {
		what    string
		pod     *corev1.Pod
		refused string
	}{
		{"a ticket on a pod of the default scheduler", ticketPod(rogue, "other-scheduler", corev1.DefaultSchedulerName, ""), "fairway-gpu-share-ticket"},
		{"a ticket on a pod created with its node", ticketPod(rogue, "with-node", corev1.DefaultSchedulerName, node.Name), "fairway-gpu-share-ticket"},
		{"a pod naming the victim's GPU " + victimGPU + " where no webhook looks", onVictimGPU, "fairway-owned-pod-keys"},
		{"a ticket without a share where the webhook serves", ticketPod(victim.Namespace, "no-share", fairwayv1.SchedulerName, ""), "which fairway sets itself"},
		{"a ticket of fairway's scheduler where no queue serves", ticketPod(rogue, "unserved", fairwayv1.SchedulerName, ""), "is not served by any fairway queue"},
	}
	for _, r := range refusals {
		_, err := mallory.CoreV1().Pods(r.pod.Namespace).Create(ctx, r.pod, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), r.refused) {
			t.Errorf("%s: %v, want a refusal naming %q", r.what, err, r.refused)
			continue
		}
		t.Logf("%s: refused: %v", r.what, err)
	}

	// Where the webhook serves, it takes the key out of a share that names the victim's GPU; the
	// scheduler then places the share where it chooses.
	share := sharePod(victim.Namespace, "on-victim-gpu", fairwayv1.GPUFractionAnnotation, "0.25", 1000, "sleep 3600")
	maps.Copy(share.Annotations, victimKey)
	if got, err := mallory.CoreV1().Pods(victim.Namespace).Create(ctx, share, metav1.CreateOptions{}); err == nil && got.Annotations[fairwayv1.GPUUUIDAnnotation] != "" {
		t.Errorf("a share naming the victim's GPU where the webhook serves: admitted with %s=%s", fairwayv1.GPUUUIDAnnotation, got.Annotations[fairwayv1.GPUUUIDAnnotation])
	} else {
		t.Logf("a share naming the victim's GPU where the webhook serves: admitted without the key (%v)", err)
		if err == nil {
			_ = c.Clientset().CoreV1().Pods(victim.Namespace).Delete(ctx, share.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}

	// The webhook down: its guard fails open, and a pod opted out of the webhook (which it then
	// never sees) names fairway's scheduler, with a ticket, a share, a queue and a forged seal.
	// The policies admit it (fairway's scheduler, no node, no binding key), and the scheduler
	// places no pod without the webhook's seal.
	forged := ticketPod(victim.Namespace, "forged", fairwayv1.SchedulerName, "")
	forged.Labels = map[string]string{fairwayv1.IgnoreLabel: "true", fairwayv1.QueueLabel: victim.Namespace, fairwayv1.ManagedLabel: "true"}
	forged.Annotations = map[string]string{fairwayv1.GPUFractionAnnotation: "0.5", fairwayv1.WorkloadKindAnnotation: string(fairwayv1.KindNotebook),
		fairwayv1.AdmittedAnnotation: "v1:forged"}
	setWebhookReplicas(t, sn, 0)
	forged, err := mallory.CoreV1().Pods(victim.Namespace).Create(ctx, forged, metav1.CreateOptions{})
	setWebhookReplicas(t, sn, 1)
	if err != nil {
		t.Fatalf("a forged ticket while the webhook is down: %v (the guard fails open; this test needs the pod to exist)", err)
	}
	var reason string
	eventually(t, 30*time.Second, "the forged ticket to wait with reason "+string(fairwayv1.ReasonNotAdmitted), func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, c, victim.Namespace, "forged")
		if err != nil {
			return false, nil
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("a pod the webhook never admitted was bound to %s", p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				reason = cond.Message
			}
		}
		return strings.HasPrefix(reason, string(fairwayv1.ReasonNotAdmitted)+":"), nil
	})
	t.Logf("%s/forged, created while the webhook was down: waits: %s", victim.Namespace, reason)
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: forged.Name, UID: forged.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}
	if err := mallory.CoreV1().Pods(victim.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("mallory binding her ticket herself: %v, want RBAC's refusal", err)
	} else {
		t.Logf("mallory binding her ticket herself: refused: %v", err)
	}
	if err := c.Clientset().CoreV1().Pods(victim.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding %s/forged as the admin: %v", victim.Namespace, err)
	}
	p := waitPhase(t, c, victim.Namespace, "forged", corev1.PodFailed, 2*time.Minute)
	t.Logf("%s/forged bound to %s by the admin: %s: %s", victim.Namespace, node.Name, p.Status.Reason, p.Status.Message)
	if p.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(p.Status.Message, "no pod fits") {
		t.Errorf("%s/forged: %s: %s; want the kubelet's UnexpectedAdmissionError with the device plugin's refusal", victim.Namespace, p.Status.Reason, p.Status.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || (cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero()) || cs.RestartCount > 0 {
			t.Errorf("%s/forged: container %s ran: %+v", victim.Namespace, cs.Name, cs.State)
		}
	}
}

// setWebhookReplicas scales the chart's webhook and, for 0, waits until none of its pods is left
// (the API server then finds no endpoint to call).
func setWebhookReplicas(t *testing.T, sn *shareNode, n int32) {
	t.Helper()
	ctx := t.Context()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if _, err := sn.c.Clientset().AppsV1().Deployments(chart.Namespace).Patch(ctx, "fairway-webhook", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling the webhook to %d: %v", n, err)
	}
	if n > 0 {
		return
	}
	eventually(t, 2*time.Minute, "no webhook pod left", func(ctx context.Context) (bool, error) {
		pods, err := sn.c.Clientset().CoreV1().Pods(chart.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
		return err == nil && len(pods.Items) == 0, nil
	})
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

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
