// Package fairshare computes every queue's fair share of every resource: the pure water-filling
// algorithm at the heart of fairway's quota model, with no knowledge of pods or nodes.
//
// Inputs are the queue tree (parent links, priority), per resource the guaranteed quota, the
// over-quota weight, the limit and the demand of each leaf, and the capacity of the cluster. The
// output is one fair share per queue and resource. The engine computes it once per cycle; the
// reclaim rules read it (borrowed work above a queue's fair share is what may be reclaimed) and
// the allocation order reads it (queues furthest below their fair share go first).
package fairshare
