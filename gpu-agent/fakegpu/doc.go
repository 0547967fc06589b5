// Package fakegpu makes fake GPU nodes out of go-nvml's mock servers (dgxh100, dgxh200,
// dgxa100, dgxb200, and 4-GPU PCIe servers of L4 or T4 cards built with go-nvml's mock server
// package), for unit tests and for the gpu-agents that back kwok nodes in the local
// cluster.
//
// A Node is a go-nvml nvml.Interface, so the agent reaches it through the same adapter
// (package nvmllib) as the real library. On top of the mocks it adds what an agent on a fake
// node needs: device UUIDs derived from the node name, so that several fake nodes never share
// one; NVLink and fabric answers; and usage (utilization, memory, processes with the pod they
// belong to) and failures (a lost GPU, a driver error) that a test drives, in process or over
// the HTTP control endpoint of Handler.
package fakegpu
