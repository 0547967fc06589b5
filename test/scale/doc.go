// Package scale plays KAI-Scheduler's public scale suite (test/e2e/scale in its repository,
// published nightly on 500 kwok nodes) against fairway on the local cluster of test/cluster:
// the same node template, job shapes, queues and counts, and the same definition of each
// figure, so that fairway's numbers can sit beside KAI's. `make bench-scale` (test/bench/scale)
// runs it at 500 nodes and prints the figures; the e2e test TestScaleOutcomes runs it at 50
// nodes and checks only the outcomes.
//
// Every scenario checks what it produced, not only how long it took: every job placed, every
// gang whole, each reclaim evicting exactly the GPUs the claimant is owed, no queue above its
// limit, and the gang that cannot be placed answered with a reason on its PodGroup. A scenario
// whose outcome is wrong returns an error instead of a figure.
//
// The clocks, as KAI's suite defines them (kwok_test_functions.go, kwok_test_utils.go):
//
//   - fill, scheduler off: jobs are created while no scheduler runs; the clock starts when
//     the scheduler is started (KAI: EnableScheduler) and stops at the last pod's binding.
//   - fill, scheduler on: the clock starts before the first job is created.
//   - reclaim of one large gang: from the gang's PodGroup creation to its last pod's binding.
//   - single-GPU reclaim: from each one-GPU job's creation to its pod's binding, averaged.
//   - impossible reclaim: from the gang's PodGroup creation to the Unschedulable condition
//     that gives the reason, averaged.
//   - distributed reclaim and topology gangs: created with the scheduler off; from its start
//     to the last binding.
//
// Where KAI reads a pod's PodScheduled lastTransitionTime (whole seconds) the harness records
// when its watch first saw the pod bound (milliseconds, on the same machine as the API server);
// where KAI reads the PodGroup condition's lastTransitionTime the harness polls the PodGroup
// every 20 ms. Both stop the clock at the same event, with finer resolution.
//
// Differences from KAI's suite, each for a reason given in docs/performance.md: the scheduler
// runs as a local process with the chart's default flags but without the admission webhook
// (pods name fairway's scheduler and their queue themselves, as KAI's name theirs); "scheduler
// off" stops the process (KAI scales its Deployment to zero); KAI's queue quota -1 ("deserves
// everything") is a queue with no guarantee and over-quota weight 1 beside a victim queue of
// weight 0, which gives the claimant the same share; the count of background pending jobs
// scales with the node count (KAI's 400 is fixed); the topology tree shrinks with the node
// count from the top level down. KAI's consolidation and NCCL-burst specs, which are not in its
// published report, are not played.
package scale
