package swap

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on every Linux
// architecture Kubernetes runs on).
const userHZ = 100

// ProcCPU returns a CPU reader over a proc filesystem: utime plus stime of /proc/<pid>/stat,
// which sum every thread of the process.
func ProcCPU(procRoot string) func(pid int) (time.Duration, error) {
	return func(pid int) (time.Duration, error) {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
		if err != nil {
			return 0, err
		}
		return parseStatCPU(string(b))
	}
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may hold spaces and parentheses: fields are counted from
// the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the command, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat CPU time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// CgroupRoom returns a PodRoom over a proc filesystem and the host's cgroup v2 mount: the least
// room (memory.max less memory.current) of the first process's cgroup and every cgroup above it
// (its container's, its pod's, its QoS class's). The driver keeps a checkpoint in the process's
// own memory, which these limits cover.
func CgroupRoom(procRoot, cgroupRoot string) func(pod *corev1.Pod, pids []int) (int64, bool) {
	return func(_ *corev1.Pod, pids []int) (int64, bool) {
		if len(pids) == 0 {
			return 0, false
		}
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pids[0]), "cgroup"))
		if err != nil {
			return 0, false
		}
		dir, ok := cgroupV2Path(string(b))
		if !ok {
			return 0, false
		}
		room, limited := int64(0), false
		for ; ; dir = path.Dir(dir) {
			if r, ok := cgroupRoom(filepath.Join(cgroupRoot, dir)); ok && (!limited || r < room) {
				room, limited = r, true
			}
			if dir == "/" || dir == "." {
				break
			}
		}
		return room, limited
	}
}

// cgroupV2Path is the "0::<path>" line of /proc/<pid>/cgroup.
func cgroupV2Path(content string) (string, bool) {
	for _, line := range strings.Split(content, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return path.Clean(p), true
		}
	}
	return "", false
}

// cgroupRoom is memory.max less memory.current of one cgroup; ok false without a limit.
func cgroupRoom(dir string) (int64, bool) {
	maxB, err := os.ReadFile(filepath.Join(dir, "memory.max"))
	if err != nil || strings.TrimSpace(string(maxB)) == "max" {
		return 0, false
	}
	curB, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, false
	}
	limit, err1 := strconv.ParseInt(strings.TrimSpace(string(maxB)), 10, 64)
	cur, err2 := strconv.ParseInt(strings.TrimSpace(string(curB)), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return limit - cur, true
}
