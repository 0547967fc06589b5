package mpsvolume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/mps"
)

// fakeMounter records binds instead of mounting.
type fakeMounter struct {
	mounts map[string]string
	tmpfs  map[string]int64
}

func (f *fakeMounter) Tmpfs(dir string, size int64) error {
	if f.tmpfs == nil {
		f.tmpfs = map[string]int64{}
	}
	f.tmpfs[dir] = size
	return nil
}

func (f *fakeMounter) Bind(src, target string, _ bool) error {
	f.mounts[target] = src
	return os.MkdirAll(target, 0o750)
}

func (f *fakeMounter) Unmount(target string) error {
	delete(f.mounts, target)
	return nil
}

func sharePod(namespace, name string, uid types.UID, runAs *int64) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid, Annotations: map[string]string{
			fairwayv1.GPUFractionAnnotation: "0.5", fairwayv1.GPUUUIDAnnotation: "GPU-1", fairwayv1.GPUContainerAnnotation: "main"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "side"}, {Name: "main"}}},
	}
	if runAs != nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), FSGroup: ptr.To[int64](2000)}
		p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: runAs}
	}
	return p
}

func publish(d *Driver, kubelet string, p corev1.Pod, kind string) (string, error) {
	target := filepath.Join(kubelet, "pods", string(p.UID), "volumes", "kubernetes.io~csi", "fairway-mps-"+kind, "mount")
	_, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: "csi-" + string(p.UID) + kind, TargetPath: target,
		VolumeContext: map[string]string{podNameKey: p.Name, podNamespaceKey: p.Namespace, podUIDKey: string(p.UID),
			ephemeralKey: "true", fairwayv1.MPSVolumeAttribute: kind},
	})
	return target, err
}

// Each pod gets directories of its own, its user's alone when it names its user, behind
// ancestors that cannot be listed; the volume's attributes never choose whose; the last
// unpublish removes them.
func TestPublishPerPod(t *testing.T) {
	root, kubelet := t.TempDir(), t.TempDir()
	a := sharePod("team-a", "nb", "uid-a", ptr.To(int64(os.Getuid())))
	b := sharePod("team-b", "nb", "uid-b", nil)
	plain := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "plain", UID: "uid-c"}}
	m := &fakeMounter{mounts: map[string]string{}}
	d := New(Options{NodeName: "n", Root: root, Mounter: m, Log: testr.New(t),
		MPS:  mps.Options{Enabled: true, Binary: "/nonexistent/nvidia-cuda-mps-control"},
		Pods: func(context.Context) ([]corev1.Pod, error) { return []corev1.Pod{a, b, plain}, nil }})
	if d.Available().Enabled {
		t.Fatal("MPS available without its binary")
	}
	targets := map[string]string{}
	for _, p := range []corev1.Pod{a, b} {
		for _, kind := range []string{fairwayv1.MPSVolumePipe, fairwayv1.MPSVolumeSharedMemory} {
			target, err := publish(d, kubelet, p, kind)
			if err != nil {
				t.Fatalf("publishing %s of %s: %v", kind, p.Name, err)
			}
			if want := filepath.Join(root, "pods", string(p.UID), kind); m.mounts[target] != want {
				t.Errorf("%s/%s %s: mounted %q, want %q", p.Namespace, p.Name, kind, m.mounts[target], want)
			}
			targets[string(p.UID)+kind] = target
		}
	}
	for _, dir := range []string{root, filepath.Join(root, "pods"), filepath.Join(root, "pods", "uid-a")} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v, want 0711", dir, fi.Mode(), err)
		}
	}
	// a names its user (and fsGroup 2000): its own; b does not: like any container's /dev/shm.
	if fi, _ := os.Stat(filepath.Join(root, "pods", "uid-a", "shm")); fi.Mode().Perm() != 0o770 || fi.Mode()&os.ModeSticky != 0 {
		t.Errorf("a's shm mode %v, want 0770", fi.Mode())
	}
	// Either way the pipe directory is the agent's and sticky: the pod cannot remove or replace
	// the daemon's control pipe.
	for _, uid := range []string{"uid-a", "uid-b"} {
		fi, err := os.Stat(filepath.Join(root, "pods", uid, "pipe"))
		if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
			t.Errorf("%s's pipe directory: %v (%v), want 1777 owned by the agent's user %d", uid, fi.Mode(), err, os.Getuid())
		}
	}

	// Each pod's /dev/shm is a tmpfs of its own: 64 MiB unless the pod says otherwise.
	for _, uid := range []string{"uid-a", "uid-b"} {
		if got := m.tmpfs[filepath.Join(root, "pods", uid, "shm")]; got != 64<<20 {
			t.Errorf("%s's /dev/shm: a tmpfs of %d bytes, want 64 MiB", uid, got)
		}
	}
	sized := sharePod("team-a", "sized", "uid-s", nil)
	sized.Spec.Volumes = []corev1.Volume{{Name: "fairway-mps-shm", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: fairwayv1.MPSDriverName, VolumeAttributes: map[string]string{fairwayv1.MPSVolumeAttribute: "shm", fairwayv1.MPSSharedMemorySizeAttribute: "1Gi"}}}}}
	limited := sharePod("team-a", "limited", "uid-l", nil)
	limited.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	for p, want := range map[*corev1.Pod]int64{&sized: 1 << 30, &limited: 2 << 30} {
		if got := d.sharedMemoryBytes(p); got != want {
			t.Errorf("pod %s: /dev/shm of %d bytes, want %d", p.Name, got, want)
		}
	}

	// A pod that holds no share gets nothing, whatever it names.
	if _, err := publish(d, kubelet, plain, fairwayv1.MPSVolumePipe); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a pod without a share: %v, want FailedPrecondition", err)
	}
	// A volume that is not inline, or of no known kind, is refused.
	_, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: filepath.Join(kubelet, "x"),
		VolumeContext: map[string]string{podNameKey: "nb", podNamespaceKey: "team-a", podUIDKey: "uid-a", ephemeralKey: "true", fairwayv1.MPSVolumeAttribute: "../uid-b"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown kind: %v", err)
	}

	// Unpublishing a's volumes removes a's directories only.
	for _, kind := range []string{fairwayv1.MPSVolumePipe, fairwayv1.MPSVolumeSharedMemory} {
		if _, err := d.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: targets["uid-a"+kind]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-a")); !os.IsNotExist(err) {
		t.Errorf("a's directories left after its last unpublish: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-b", "shm")); err != nil {
		t.Errorf("b's directories: %v", err)
	}
}

func TestLimits(t *testing.T) {
	got := mps.Limits([]string{"GPU-1"}, 20480, 50)
	want := []string{"set_default_device_pinned_mem_limit GPU-1 20480M", "set_default_active_thread_percentage 50"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Limits = %q, want %q", got, want)
	}
}

// A restarted agent takes back the directories of pods still on the node (their volumes stay
// published; the kubelet unpublishes them later with targets this agent never saw) and removes
// those of pods gone.
func TestResumeAfterRestart(t *testing.T) {
	root, kubelet := t.TempDir(), t.TempDir()
	a := sharePod("team-a", "nb", "uid-a", ptr.To(int64(os.Getuid())))
	for _, uid := range []string{"uid-a", "uid-gone"} {
		if err := os.MkdirAll(filepath.Join(root, "pods", uid, "shm"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m := &fakeMounter{mounts: map[string]string{}}
	d := New(Options{NodeName: "n", Root: root, Mounter: m, Log: testr.New(t),
		Pods: func(context.Context) ([]corev1.Pod, error) { return []corev1.Pod{a}, nil }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	sock := t.TempDir()
	go func() { done <- d.Serve(ctx, Sockets{CSI: filepath.Join(sock, "csi.sock"), RegistrationDir: sock}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(sock, fairwayv1.MPSDriverName+"-reg.sock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the registration socket never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-gone")); !os.IsNotExist(err) {
		t.Errorf("the directories of a pod gone were kept: %v", err)
	}
	for i, kind := range []string{"pipe", "shm"} {
		target := filepath.Join(kubelet, "pods", "uid-a", "volumes", "kubernetes.io~csi", "fairway-mps-"+kind, "mount")
		if _, err := d.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(root, "pods", "uid-a"))
		if gone := os.IsNotExist(err); gone != (i == 1) {
			t.Errorf("after unpublishing %d of the pod's 2 volumes, its directories gone: %v", i+1, gone)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
