// Package assign learns which GPUs the kubelet gave the pods of its node, from the kubelet's
// PodResources API (k8s.io/kubelet/pkg/apis/podresources/v1, a gRPC service on a unix socket),
// and publishes the answer where the scheduler's runtime reads it.
//
// fairway places fractional pods on a GPU by holding that GPU with a reservation pod (label
// fairway.dev/reservation=true) that requests nvidia.com/gpu: 1. Which physical GPU the
// kubelet's device manager picked is known only on the node; the Assigner finds it and writes
// it on the reservation pod as fairway.dev/gpu-uuid and fairway.dev/gpu-index (through the
// node's inventory), from where the runtime hands it to the fractional pods sharing it. The
// same listing tells the usage monitor which GPUs whole-GPU pods hold.
package assign
