// Package discovery turns what NVML reports about a node's GPUs into what the scheduler reads:
// the per-GPU inventory (fairway.dev/gpu-inventory, a v1alpha1.GPUInventory) and the node
// labels (type, product, memory, count, NVLink domain).
//
// Discovery is a pure function of a gpu.Library and the previous inventory: it makes no API
// calls and keeps no state, so it is tested against go-nvml's mock servers and re-run freely.
// A failing device does not fail discovery; it is reported unhealthy, keeping the UUID it had
// last time when NVML can no longer tell, and its error is returned alongside the result.
package discovery
