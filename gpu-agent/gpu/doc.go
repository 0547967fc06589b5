// Package gpu is the gpu-agent's narrow view of a GPU management library: the few NVML
// queries the agent makes (identity, memory, NVLink, fabric, utilization, processes), as plain
// Go types and errors.
//
// It exists so that everything above it (discovery, usage, metrics) is written once against
// one small interface and tested with go-nvml's mock servers, while the real libnvidia-ml.so
// and the fake-node mocks sit behind the same adapter (package nvmllib). It imports no cgo
// code: the packages that only consume GPU data build and test without a C toolchain.
package gpu
