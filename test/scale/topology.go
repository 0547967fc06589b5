package scale

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/test/cluster"
)

// The topology tree's node labels, KAI's (kwok_test.go, Context "Topology").
const (
	zoneLabel  = "cloud.provider.com/topology-zone"
	blockLabel = "cloud.provider.com/topology-block"
	rackLabel  = "cloud.provider.com/topology-rack"
)

// nodesPerRack is KAI's nodesPerDomain.
const nodesPerRack = 2

// topologyShape is KAI's tree, 4 zones × 8 blocks × 8 racks × 2 nodes (512 nodes) at 500 nodes,
// cut from the top level down for a smaller cluster: about 512/500 of the node count, whole racks
// of 2, at most 8 racks a block and 8 blocks a zone (48 nodes in 1 × 3 × 8 racks at 50 nodes).
func topologyShape(nodes int) (zones, blocksPerZone, racksPerBlock int) {
	racks := max(1, nodes*512/500/nodesPerRack)
	racksPerBlock = min(8, racks)
	blocks := max(1, racks/racksPerBlock)
	blocksPerZone = min(8, blocks)
	zones = max(1, blocks/blocksPerZone)
	return zones, blocksPerZone, racksPerBlock
}

// topologyPool is the tree's nodes, with KAI's node template, each labelled with its zone, block
// and rack (values unique across the tree); levels describes the shape for the log.
func topologyPool(nodes int) (pool cluster.NodePool, levels string) {
	zones, blocks, racks := topologyShape(nodes)
	pool = bigPool(zones * blocks * racks * nodesPerRack)
	pool.Name = "topology-node"
	pool.Labels[rackLabel] = fmt.Sprintf("rack-{{div .Index %d}}", nodesPerRack)
	pool.Labels[blockLabel] = fmt.Sprintf("block-{{div .Index %d}}", nodesPerRack*racks)
	pool.Labels[zoneLabel] = fmt.Sprintf("zone-{{div .Index %d}}", nodesPerRack*racks*blocks)
	return pool, fmt.Sprintf("%d zones × %d blocks × %d racks × %d nodes", zones, blocks, racks, nodesPerRack)
}

func topologyPreferred(ctx context.Context, e *env) (Result, error) {
	return topologyGang(ctx, e, "topology-preferred", rackLabel)
}

func topologyNone(ctx context.Context, e *env) (Result, error) {
	return topologyGang(ctx, e, "topology-none", "")
}

// topologyGang is KAI's distributedJobsScaleTestInternal with one job: a gang of one pod of 2
// GPUs per node of the tree, preferring to stay within a rack (or with no constraint), created
// with the scheduler off; from its start to the last binding.
func topologyGang(ctx context.Context, e *env, name, preferred string) (Result, error) {
	pool, _ := topologyPool(e.o.Nodes)
	pods := pool.Count
	if err := e.stopScheduler(); err != nil {
		return Result{}, err
	}
	g, err := e.createGang(ctx, queueSanity, pods, 2, preferred)
	if err != nil {
		return Result{}, err
	}
	if err := e.watch.waitCreated(ctx, queueSanity, pods, e.timeout()); err != nil {
		return Result{}, err
	}
	start, m := time.Now(), e.begin(name)
	if err := e.startScheduler(ctx); err != nil {
		m.end()
		return Result{}, err
	}
	end, err := e.watch.waitBound(ctx, queueSanity, pods, inGang(g), e.timeout())
	u := m.end()
	if err != nil {
		return Result{}, fmt.Errorf("%w\n%s", err, e.schedTail())
	}
	if err := e.checkNodes(); err != nil {
		return Result{}, err
	}
	nodes := map[string]bool{}
	for _, p := range e.watch.pods(queueSanity) {
		nodes[p.Spec.NodeName] = true
	}
	racks, blocks, err := e.domains(ctx, nodes)
	if err != nil {
		return Result{}, err
	}
	r := Result{Figure: end.Sub(start), Usage: u,
		Detail: fmt.Sprintf("gang of %d×2 GPUs bound whole on %d nodes, %d racks, %d blocks", pods, len(nodes), racks, blocks)}
	return r, e.cleanup(ctx, queueSanity)
}

// domains counts the racks and blocks the nodes are in.
func (e *env) domains(ctx context.Context, nodes map[string]bool) (racks, blocks int, err error) {
	list, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	r, b := map[string]bool{}, map[string]bool{}
	for _, n := range list.Items {
		if nodes[n.Name] {
			r[n.Labels[rackLabel]], b[n.Labels[blockLabel]] = true, true
		}
	}
	return len(r), len(b), nil
}
