// Package gpu holds the gpu-agent's check on a real NVIDIA GPU: run.sh (discovery through the
// real NVML, MPS memory isolation with cudaalloc as the CUDA client, and idle lending: an idle
// owner, a loan using the rest of the memory, the agent's own idleness code seeing the owner
// wake, the loan stopped and the owner's time back to full speed), build.sh to prepare
// its binaries on a machine with Go, and a test of run.sh's own logic with fake binaries, since
// no GPU is at hand where the unit tests run.
package gpu
