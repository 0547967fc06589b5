package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
	"github.com/fairway-sched/fairway/gpu-agent/shim"
)

// A share's library configuration carries its own limit: a fraction of the GPU's memory, or the
// memory it asked for; a pod that asks for no share gets no files (the allocation is refused).
func TestShareFilesCarryTheShare(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(t.TempDir(), shim.LibraryName)
	if err := os.WriteFile(lib, []byte("not really a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := shim.Install(dir, lib); err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: Options{ShareLibraryDir: dir, MPS: true}}
	g := shareplugin.GPU{UUID: "GPU-a", MemoryMiB: 81920}
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"half", v1alpha1.GPUFractionAnnotation, "0.5", "memory_limit_bytes=42949672960"},
		{"tenGi", v1alpha1.GPUMemoryAnnotation, "10Gi", "memory_limit_bytes=10737418240"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: tc.name, UID: types.UID("uid-" + tc.name),
			Annotations: map[string]string{tc.key: tc.value}}}
		mounts, err := a.shareFiles(pod, g)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(mounts) != 2 || !mounts[0].ReadOnly || mounts[0].ContainerPath != shim.ContainerDir {
			t.Fatalf("%s: mounts %v", tc.name, mounts)
		}
		conf, err := os.ReadFile(filepath.Join(mounts[0].HostPath, shim.ConfigName))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{tc.want, "mps_pipe_directory=" + shim.DefaultPipeDirectory} {
			if !strings.Contains(string(conf), want) {
				t.Errorf("%s: share.conf lacks %q:\n%s", tc.name, want, conf)
			}
		}
	}
	none := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "none", UID: "uid-none"}}
	if _, err := a.shareFiles(none, g); err == nil {
		t.Error("a pod that asks for no share got share files")
	}
}
