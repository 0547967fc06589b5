//go:build cgo

// Package agent assembles the gpu-agent, the DaemonSet process on every GPU node (and, in mock
// mode, one process per fake node of the local cluster): it opens NVML or a fake node, and runs
// discovery and publishing, the assignment of reservation pods, usage and idleness, the MPS
// daemon, the metrics endpoint and, in mock mode, the fake node's control endpoint, as
// controller-runtime Runnables of one manager whose cache holds only this node and its pods.
//
// Each concern lives in its own package (discovery, publish, assign, usage, mps, metrics);
// this one only wires them and owns the state they share.
package agent
