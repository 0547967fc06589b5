package nodes

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fairway-sched/fairway/gpu-agent/shareplugin"
)

// Fake GPU device nodes. A node has no NVIDIA driver, but the share device plugin
// (gpu-agent/shareplugin) answers the kubelet with a share's device nodes, /dev/nvidia<minor>
// and the driver's control nodes, which containerd creates in the container and allows in its
// device cgroup; containerd refuses a device whose host path is missing. So each node gets the
// nodes themselves, with NVIDIA's numbers: character devices that no driver serves, so opening
// one that the container's device cgroup allows fails with ENXIO ("No such device or address"),
// and one it does not allow with EPERM ("Operation not permitted"). That difference is what
// tests read to see which GPUs a container can reach.
const (
	// GPUDeviceMajor is the NVIDIA driver's character device major number: /dev/nvidia<n> is
	// GPUDeviceMajor:n, /dev/nvidiactl GPUDeviceMajor:255.
	GPUDeviceMajor = 195
	// UVMDeviceMajor stands for nvidia-uvm's major, which the kernel assigns at load time on a
	// real node.
	UVMDeviceMajor = 510
)

// GPUDeviceNode is the device node of the GPU of minor number minor (go-nvml's mock gives GPU i
// minor i).
func GPUDeviceNode(minor int) string { return "/dev/nvidia" + strconv.Itoa(minor) }

// fakeDeviceNodes are the node's fake devices: one per GPU and the control nodes every share
// gets (shareplugin.DefaultControlDevices, /dev/nvidiactl).
func fakeDeviceNodes(gpus int) map[string][2]int {
	out := map[string][2]int{"/dev/nvidiactl": {GPUDeviceMajor, 255}}
	for i := range gpus {
		out[GPUDeviceNode(i)] = [2]int{GPUDeviceMajor, i}
	}
	for i, d := range shareplugin.DefaultControlDevices {
		if _, ok := out[d]; !ok {
			out[d] = [2]int{UVMDeviceMajor, i}
		}
	}
	return out
}

// makeDeviceNodes creates the fake device nodes in the node container's /dev (a tmpfs of its
// own), where containerd looks for a device plugin's host paths.
func makeDeviceNodes(ctx context.Context, n *Node, gpus int) error {
	var script strings.Builder
	for path, mm := range fakeDeviceNodes(gpus) {
		fmt.Fprintf(&script, "[ -e %[1]s ] || mknod -m 666 %[1]s c %[2]d %[3]d || exit 1\n", path, mm[0], mm[1])
	}
	if _, err := n.Exec(ctx, "sh", "-c", script.String()); err != nil {
		return fmt.Errorf("node %s: making the fake GPU device nodes: %w", n.Name, err)
	}
	return nil
}
