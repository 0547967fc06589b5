// Package gpushare makes a fractional GPU placement true on the node.
//
// The engine places a fractional pod on a GPU slot of a node: an index in its own numbering of
// the node's GPUs. The kubelet knows nothing of fractions; its device plugin hands out whole
// devices. For each shared slot the runtime therefore runs one reservation pod in fairway's
// namespace, bound straight to the node (spec.nodeName), asking for nvidia.com/gpu: 1. The
// kubelet gives it some physical GPU, which keeps ordinary nvidia.com/gpu pods off that device,
// and the gpu-agent on the node reports which one by annotating the reservation with
// fairway.dev/gpu-uuid and fairway.dev/gpu-index. Prepare records that UUID on each fractional
// pod of the slot before binding it; the pod's GPU container asks the kubelet for one
// fairway.dev/gpu-share, and the gpu-agent's device plugin answers the kubelet with that GPU's
// device (CDI and device nodes), so the container sees that GPU and no other, whatever is in the
// pod's namespace.
//
// The engine's slot is an identity for accounting, not a physical index: the physical GPU is
// whichever the kubelet gave the reservation. Both are recorded: the fractional pods carry
// fairway.dev/gpu-index (the slot: the snapshot rebuilds shares from it after a restart) and
// fairway.dev/gpu-uuid (the device), the reservation carries fairway.dev/gpu-slot (the slot) and
// the agent's fairway.dev/gpu-index (the device), and both carry the label fairway.dev/gpu-group.
//
// Manager serialises, per slot, the binder's Acquire (make sure a reservation holds the slot,
// learn its UUID) and the loop's Release (delete a reservation whose last fractional pod is
// gone), so a reservation is never deleted under a pod that is being bound to it.
package gpushare
