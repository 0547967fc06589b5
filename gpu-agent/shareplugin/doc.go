// Package shareplugin is the gpu-agent's device plugin for GPU shares: it gives a fractional
// pod's container exactly the GPU the scheduler chose, through the kubelet's own device
// assignment, so that nothing in the pod's namespace decides which GPU it gets.
//
// The kubelet knows nothing of shares. The webhook makes a fractional pod's GPU container ask
// for one fairway.dev/gpu-share (v1alpha1.ResourceGPUShare); the plugin advertises that resource
// as a number of slots per physical GPU (v1alpha1.ShareSlotID: "<GPU UUID>::share-<n>"), on the
// kubelet's device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1). The kubelet calls
// the plugin with device IDs only, never with the pod, so the plugin finds the pod itself, the
// way HAMi's device plugin does: among the pods bound to its node that ask for a share and that
// the kubelet has not admitted yet, the one bound first, whose GPU the scheduler recorded on it
// before binding (v1alpha1.GPUUUIDAnnotation, a binding key only fairway's identities may
// write). Unlike HAMi, the scheduler holds no per-node lock while the kubelet admits a pod:
//
//   - GetPreferredAllocation steers the kubelet to a slot of that pod's GPU, so the kubelet's
//     own record (its checkpoint and the PodResources API) says which GPU the pod holds;
//   - Allocate answers for the GPU of the slot the kubelet chose, and only when a pod waiting on
//     the node was placed on that GPU; otherwise it refuses, naming the pods and GPUs it saw
//     (the kubelet then fails the pod's admission: it never starts with a GPU nobody chose for
//     it, nor without one).
//
// The answer is the GPU's CDI device (v1alpha1.CDIDeviceName, in a spec the plugin writes with
// the CDI packages, tags.cncf.io/container-device-interface, plus the NVIDIA CDI device of the
// same GPU where the node has NVIDIA's spec) for runtimes with CDI, and for the others the GPU's
// device nodes and the NVIDIA runtime's volume-mount device list. The NVIDIA_VISIBLE_DEVICES
// variable is sent only when the operator asks for it (StrategyEnvVar): a runtime that honours it
// from unprivileged containers lets any pod name any GPU (docs/isolation.md).
//
// Only one pod is ambiguous: two share pods bound to one node on different GPUs, where the
// kubelet admits them in another order than their bindings reached the agent. The kubelet's
// record then disagrees with the pods' decisions; Mismatches finds such pods from the
// PodResources API and the agent reports them (docs/isolation.md, "What is not covered").
package shareplugin
