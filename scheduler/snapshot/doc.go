// Package snapshot is fairway's in-memory model of the cluster: nodes with their GPUs, the queue
// tree, gangs and their pods, and what runs where. The scheduling engine reads it and changes it
// through a few primitives (Assume, Unassume, SetReleasing, AddHold); the scheduler runtime keeps
// it true between cycles by feeding it informer objects.
//
// # Ownership
//
// One long-lived Snapshot is owned by one goroutine. Between cycles the runtime applies informer
// events with UpsertPod/DeletePod, UpsertNode/DeleteNode, UpsertQueue/DeleteQueue and
// UpsertPodGroup/DeletePodGroup; then it runs a cycle. Nothing is copied per cycle: every event
// updates the few aggregates it touches (node usage and GPU slots, the node indexes, queue totals
// up the tree, gang counters) in O(1) or O(tree depth), so the cost of a cycle scales with pending
// work, queues and nodes, not with the number of running pods.
//
// # Units
//
// GPUs are counted in milli-GPU integers: a whole GPU is 1000, a fraction f of a GPU is
// floor(f*1000) (0.5 is 500, 0.3333 is 333; fractions below 0.001 are refused). CPU is in
// milli-cores, memory in bytes, GPU memory in MiB. A pod asking for GPU memory instead of a
// fraction is charged ceil(MiB*1000/GPU memory) milli-GPU of the GPU it lands on, and a pod asking
// for a fraction is charged floor(fraction*GPU memory) MiB of that GPU's memory, so both the share
// and the memory of a GPU stay within bounds whatever mix of requests shares it.
//
// # Pod states
//
// A pod is pending (no node, waiting for the engine), bound (on a node: running, or assumed by the
// engine and not yet confirmed by the API server), or releasing (being evicted or terminating: it
// still holds its node's resources, but reclaim counts them as already freed so that it does not
// evict twice for the same need). Succeeded pods count only towards their gang's minimum; failed
// pods are ignored.
package snapshot
