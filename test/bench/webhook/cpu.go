package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/test/cluster"
)

// cpuTimes reads the CPU time (user + system) every process of the cluster has used so far, from
// /proc, so that a phase of the benchmark can report what each component spent per request.
func cpuTimes(c *cluster.Cluster) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range c.Processes() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after the last ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		out[p.Name()] = time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	}
	return out
}

// cpuReport says how much CPU each component spent per request between two readings.
func cpuReport(before, after map[string]time.Duration, requests int) string {
	var parts []string
	for _, name := range []string{"fairway-webhook", "kube-apiserver", "etcd", "kube-controller-manager", "kwok"} {
		d := after[name] - before[name]
		if d <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f µs", name, float64(d.Microseconds())/float64(requests)))
	}
	return "CPU per request: " + strings.Join(parts, ", ")
}
