// Package usage measures how a node's GPUs are used and by whom, and decides when an interactive
// pod's GPU work has gone idle.
//
//   - Sampler reads, per GPU, utilization, memory and the compute processes, and attributes
//     each process to the pod it runs in (process -> /proc/<pid>/cgroup -> pod UID).
//   - Tracker is a pure state machine over those samples: an interactive pod becomes idle
//     after its GPU work stayed below a threshold for a configured time, and active again at
//     the first sign of work (utilization above the threshold, a new GPU process, memory
//     growth).
//   - ConditionWriter publishes the tracker's transitions as the pod condition
//     fairway.dev/GPUIdle through the pods/status subresource, its message timed to the
//     microsecond, and, before a pod turns idle, the memory that stays resident on its GPU
//     (fairway.dev/idle-gpu-memory-used) as an annotation.
//   - Monitor runs the three every poll period and keeps the latest Snapshot for metrics.
//
// The idle signal is what the scheduler will use to lend an idle notebook's GPU to preemptible
// training and take it back on activity, so the poll is short (hundreds of milliseconds) and
// the condition is written only on transitions, at once.
package usage
