// Package gpu holds the gpu-agent's check on a real NVIDIA GPU: run.sh (discovery through the
// real NVML, and MPS memory isolation with cudaalloc as the CUDA client), build.sh to prepare
// its binaries on a machine with Go, and a test of run.sh's own logic with fake binaries, since
// no GPU is at hand where the unit tests run.
package gpu
