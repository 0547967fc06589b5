package swap

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProcCPUAndCgroupRoom(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A command name with a space and a parenthesis; utime 250 and stime 50 ticks.
	write(filepath.Join(proc, "42", "stat"), "42 (python (ipy) S 1 42 42 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 3 0 100 0 0")
	write(filepath.Join(proc, "42", "cgroup"), "0::/kubepods.slice/kubepods-burstable.slice/pod1.slice/cri-containerd-1.scope\n")
	pod := "kubepods.slice/kubepods-burstable.slice/pod1.slice"
	write(filepath.Join(cg, pod, "cri-containerd-1.scope", "memory.max"), "max\n")
	write(filepath.Join(cg, pod, "cri-containerd-1.scope", "memory.current"), "100\n")
	write(filepath.Join(cg, pod, "memory.max"), "10737418240\n")
	write(filepath.Join(cg, pod, "memory.current"), "2147483648\n")
	got, err := ProcCPU(proc)(42)
	if err != nil || got != 3*time.Second {
		t.Errorf("ProcCPU = %s, %v; want 3s", got, err)
	}
	if _, err := ProcCPU(proc)(43); err == nil {
		t.Error("ProcCPU of a missing process: no error")
	}
	room, ok := CgroupRoom(proc, cg)(nil, []int{42})
	if !ok || room != 8<<30 {
		t.Errorf("CgroupRoom = %d, %v; want the pod's 8 GiB", room, ok)
	}
	if _, ok := CgroupRoom(proc, cg)(nil, []int{43}); ok {
		t.Error("CgroupRoom of a missing process says limited")
	}
}
