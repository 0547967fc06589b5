// Package mps runs the NVIDIA MPS control daemon (nvidia-cuda-mps-control) for the node's
// shared GPUs, which is what makes fractional GPUs safe: an MPS client started with
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT cannot allocate more device memory than that, and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps its share of the SMs.
//
// The daemon runs in the foreground under the agent's supervision, restarted with back-off if
// it dies, with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY pointing at host directories
// that fractional pods mount. Where the binary is missing (or MPS is not asked for) the node
// runs in soft mode: fractions are still scheduled, but their limits rely on the application.
// Daemon.Enabled tells which, for the inventory's mps field and the fairway_gpu_mps_enabled
// metric.
package mps
