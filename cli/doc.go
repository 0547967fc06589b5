// Package cli is the logic of fairway's command-line client: `fairway queues`, `fairway jobs`,
// `fairway why` and `fairway nodes` (also `kubectl fairway ...` as a kubectl plugin). It reads
// what the scheduler writes (Queue and PodGroup status, pods' GPU annotations, the gpu-agent's
// node inventory) through any kubeconfig, and prints kubectl-style tables or, with -o json|yaml,
// the same data as a stable structure documented on the view types (QueueView, JobView, WhyView,
// NodeView); `fairway nodes -o wide` adds every GPU's holders.
//
// A name or a namespace given wrong is answered with where to look: `why NAME` searches the
// other namespaces the user may read and prints the -n to add, and `jobs` in an empty
// namespace counts the jobs of the others and suggests -A (elsewhere.go).
//
// Each command is split in two: a loader that lists objects into a Snapshot, and a pure
// function from Snapshot to view, so formatting and the reading of fairway's annotations are
// unit-tested on literal objects, and the e2e test runs the loaders against a real cluster.
package cli
