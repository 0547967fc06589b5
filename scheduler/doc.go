// Package scheduler is the root of fairway's scheduling engine. It holds no code of its own; the
// work is split into packages with one reason each:
//
//   - snapshot: the in-memory model of the cluster (nodes and their GPUs, the queue tree, gangs
//     and their pods), kept up to date incrementally from informer objects.
//   - fairshare: the pure water-filling algorithm that turns quotas, weights, limits and demand
//     into a fair share per queue and resource.
//   - engine: one scheduling cycle, snapshot in, decisions out (bindings, evictions, reasons,
//     queue status). No API calls, no goroutines, no wall clock.
//   - usage: every queue's usage history, which makes fair share fair over time.
//   - internal: small helpers of the packages above (bitset).
//   - testutil: fluent builders of pods, nodes, queues and pod groups for tests.
//   - runtime: the process around the engine (`fairway scheduler`): informers, the scheduling
//     loop, binding, eviction, GPU reservations, PodGroups, status, leader election, metrics.
//   - sim: `fairway sim`, the engine replayed over a trace in simulated time.
//
// The layers are fenced by depguard rules in .golangci.yml, so that a sideways import fails lint
// rather than waiting for review: snapshot and fairshare sit below engine, engine below usage,
// and the four import nothing of fairway but api/, internal and each other; nothing in scheduler/
// imports an adapter (the runtime takes interfaces, which cmd/fairway fills in) or test/.
//
// Scenario files that drive the engine end to end live in testdata/scenarios.
package scheduler
