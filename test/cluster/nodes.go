package cluster

import "github.com/fairway-sched/fairway/api/nodepool"

// NodePool is a group of identical fake nodes, in the node-pool format of api/nodepool. The
// format lives in product code because `fairway sim` reads the same files; the harness names it
// here so that a test's Config reads as one package (cluster.Config{NodePools: ...}).
type NodePool = nodepool.Pool

// H100Pool returns count nodes of 8 NVIDIA H100 80GB GPUs each, two per rack, each node its own
// NVLink domain: the shape of the demo and of most e2e tests (see nodepool.H100).
func H100Pool(count int) NodePool { return nodepool.H100(count) }

// LoadNodePools reads a node-pool file (see nodepool.Load), for tests and the demo that start a
// cluster from one.
func LoadNodePools(path string) ([]NodePool, error) { return nodepool.Load(path) }
