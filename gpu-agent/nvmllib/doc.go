//go:build cgo

// Package nvmllib adapts go-nvml (github.com/NVIDIA/go-nvml) to the agent's narrow gpu.Library.
//
// One adapter serves both the real libnvidia-ml.so.1, loaded with dlopen at Init, and the
// go-nvml mock servers that back fake nodes and unit tests, so the code path the tests and the
// local cluster exercise is the one that runs on a GPU node. go-nvml needs cgo (for dlopen),
// hence the build constraint; nothing else in the agent does.
package nvmllib
