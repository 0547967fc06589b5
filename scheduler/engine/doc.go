// Package engine runs fairway's scheduling cycle: a snapshot of the cluster goes in, decisions
// come out. It makes no API calls, starts no goroutines and reads no clock: the caller passes
// now.
//
// # The cycle
//
// Engine.Schedule runs these steps in order (see engine.go):
//
//  0. Loan return: every pod on loan on a GPU that is no longer lendable (one of the idle
//     interactive pods it was lent from works again, left, or stopped lending) is evicted,
//     all loans of the GPU at once (lending.go).
//  1. Housekeeping: holds of gangs that no longer wait, or whose time ran out, are dropped.
//  2. Fair share: every queue's fair share of every resource (package fairshare).
//  3. Allocate: pending gangs are placed on free capacity, all or nothing, queues below their
//     guarantee first and then by lowest dominant share; within a queue gangs that run below
//     their minimum come first (allocate.go).
//  4. Stale gangs: gangs that ran below their minimum for longer than the grace period, and that
//     allocation could not complete, are evicted whole (stale.go).
//  5. Reclaim: gangs of queues below their fair share evict borrowed work of queues above theirs
//     (reclaim.go).
//  6. Preempt: within a queue, higher priority evicts lower priority (reclaim.go).
//  7. Consolidate: a gang that fits only if preemptible pods move evicts them when every one can
//     be placed again elsewhere (consolidate.go).
//  8. Idle GPU lending: single-pod preemptible borrowers that nothing above could place run on
//     loan on GPUs shared only by idle interactive pods, within the memory those leave free;
//     loans of GPUs this cycle's placements made unlendable go back (lending.go).
//  9. Starvation: gangs that waited too long get the capacity they need held (allocate.go).
//  10. Reasons and queue status for every pending gang and every queue (reasons.go).
//
// Every what-if runs inside a Statement (statement.go) on the live snapshot and is rolled back
// unless it succeeds; what is committed is what the Result reports.
//
// # What the snapshot looks like afterwards
//
// Schedule leaves its decisions in the snapshot so the next cycle does not repeat them: bound
// pods are assumed on their nodes and GPUs (the runtime calls Snapshot.Forget if a binding
// fails); evicted pods are releasing (they keep their resources until deleted, and reclaim counts
// them as already freed; Snapshot.CancelEviction undoes one); capacity that evictions free for a
// gang is held for it (Hold), and the gang is reported in Result.Nominations: it is bound in a
// later cycle, once the evicted pods are gone.
//
// Node fit, GPU packing and topology are small files, each with an exported pure predicate
// (FitsNode, PickGPUs, TightestDomains) that its tests call directly, without a cycle. Only the
// engine calls them today: fairway has no what-if command, and `fairway why` reads the reasons
// the engine published instead of re-running it.
package engine
