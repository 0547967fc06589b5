// Package metrics exposes the gpu-agent's view of its node to Prometheus as fairway_gpu_*
// series: per GPU (node, gpu_uuid, gpu_index, model) and per pod on a GPU (plus namespace, pod,
// queue), and the agent's own health (NVML up, MPS on, NVML errors by code).
//
// The Collector builds constant metrics at scrape time from the agent's latest inventory and
// usage snapshot (the pattern for exporting state of a system not built around Prometheus), on
// a private registry, so series of pods that left the node vanish with them and a scrape never
// calls NVML.
package metrics
