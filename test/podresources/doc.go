// Package podresources is a stand-in for the kubelet's PodResources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on the local cluster's fake (kwok) nodes, which have
// no kubelet. It is test infrastructure, never part of the product.
//
// Like the kubelet's device manager it assigns device IDs (the fake GPUs' UUIDs) to the
// containers of pods bound to its node that request nvidia.com/gpu: at most one pod per
// device, stable for the pod's life, freed when the pod ends. It serves List, Get and
// GetAllocatableResources on a unix socket per node, which is where the gpu-agent's assignment
// path reads them, exactly as it reads the real kubelet's socket.
package podresources
