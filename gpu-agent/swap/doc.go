// Package swap moves an idle notebook's GPU memory to host RAM while its GPU is lent, and back
// at the notebook's first sign of work (docs/idle-lending.md#swap), with the CUDA driver's
// checkpoint API (package checkpoint).
//
// The scheduler decides when: the agent marks an idle interactive pod's memory Eligible (its
// processes can be checkpointed, the host can take the bytes) or Ineligible with the reason, in
// fairway.dev/gpu-swap; the scheduler, with a borrower that does not fit the free memory, asks
// for the swap (fairway.dev/gpu-swap-request) for that idle period; the agent swaps and publishes
// SwappedOut, and only then does the scheduler lend the whole GPU. So a loan never starts before
// the memory it was promised is free.
//
// The Controller is driven by the usage monitor's polls (Observe): it keeps its own state per
// swapped pod, and reports a swapped pod that works as awake (Work), which sets
// fairway.dev/GPUIdle False, which makes the scheduler return the loans. Then it restores.
//
// That state is only ever rebuilt, never stored: at its first sight of a pod, a controller takes
// back what an earlier agent left of the pod's swap (adopt), from the state and PIDs published in
// fairway.dev/gpu-swap and the driver's state of each process, so an agent restart loses no
// swapped notebook.
package swap
