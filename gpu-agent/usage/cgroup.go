package usage

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// PodResolver tells which pod a host process belongs to.
type PodResolver interface {
	// PodUID returns the UID of the pod pid runs in; ok is false for processes outside any pod
	// (or already gone).
	PodUID(pid uint32) (uid string, ok bool)
}

// PodResolverFunc adapts a function to PodResolver.
type PodResolverFunc func(pid uint32) (string, bool)

// PodUID implements PodResolver.
func (f PodResolverFunc) PodUID(pid uint32) (string, bool) { return f(pid) }

// podInCgroup matches the pod segment of a kubelet cgroup path in any of its shapes:
//
//	cgroupfs driver:  /kubepods/besteffort/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c/<container>
//	                  /kubepods/pod0c9d1c1a-.../<container>                 (Guaranteed QoS)
//	systemd driver:   /kubepods.slice/kubepods-burstable.slice/
//	                    kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/cri-containerd-<id>.scope
//
// The systemd driver writes the UID with underscores, since "-" separates slice levels.
var podInCgroup = regexp.MustCompile(`pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})`)

// PodUIDFromCgroup extracts the pod UID from the content of /proc/<pid>/cgroup, which has one
// "hierarchy-ID:controllers:path" line per hierarchy under cgroup v1 and the single line
// "0::path" under cgroup v2. ok is false when no line names a pod.
func PodUIDFromCgroup(content string) (uid string, ok bool) {
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		if !strings.Contains(path, "kubepods") {
			continue
		}
		if m := podInCgroup.FindStringSubmatch(path); m != nil {
			return strings.ToLower(strings.ReplaceAll(m[1], "_", "-")), true
		}
	}
	return "", false
}

// ProcResolver resolves processes through a proc filesystem. The agent runs with hostPID, so
// NVML's PIDs are valid under /proc.
type ProcResolver struct {
	// Root is the proc mount, "/proc" unless the host's is mounted elsewhere.
	Root string
}

// PodUID implements PodResolver.
func (r ProcResolver) PodUID(pid uint32) (string, bool) {
	root := r.Root
	if root == "" {
		root = "/proc"
	}
	b, err := os.ReadFile(filepath.Join(root, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return "", false
	}
	return PodUIDFromCgroup(string(b))
}

// FirstResolver asks each resolver in turn; fake nodes put their own table before /proc.
type FirstResolver []PodResolver

// PodUID implements PodResolver.
func (rs FirstResolver) PodUID(pid uint32) (string, bool) {
	for _, r := range rs {
		if uid, ok := r.PodUID(pid); ok {
			return uid, true
		}
	}
	return "", false
}
