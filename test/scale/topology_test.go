package scale

import "testing"

// At 500 nodes the tree is KAI's, 4 zones × 8 blocks × 8 racks × 2 nodes; smaller clusters cut
// it from the top level down and keep about 512/500 of the node count.
func TestTopologyShape(t *testing.T) {
	for _, tc := range []struct {
		nodes, zones, blocks, racks, total int
	}{
		{500, 4, 8, 8, 512},
		{50, 1, 3, 8, 48},
		{20, 1, 1, 8, 16},
		{1000, 8, 8, 8, 1024},
	} {
		z, b, r := topologyShape(tc.nodes)
		pool, _ := topologyPool(tc.nodes)
		if z != tc.zones || b != tc.blocks || r != tc.racks || pool.Count != tc.total {
			t.Errorf("topologyShape(%d) = %d zones × %d blocks × %d racks, %d nodes; want %d × %d × %d, %d",
				tc.nodes, z, b, r, pool.Count, tc.zones, tc.blocks, tc.racks, tc.total)
		}
	}
}

// The tree's labels put two nodes in a rack, eight racks in a block and the blocks of a zone
// together, with values unique across the tree.
func TestTopologyPoolLabels(t *testing.T) {
	pool, _ := topologyPool(500)
	for _, tc := range []struct {
		index             int
		zone, block, rack string
	}{
		{0, "zone-0", "block-0", "rack-0"},
		{1, "zone-0", "block-0", "rack-0"},
		{2, "zone-0", "block-0", "rack-1"},
		{16, "zone-0", "block-1", "rack-8"},
		{128, "zone-1", "block-8", "rack-64"},
		{511, "zone-3", "block-31", "rack-255"},
	} {
		n, err := pool.Node(tc.index)
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]string{n.Labels[zoneLabel], n.Labels[blockLabel], n.Labels[rackLabel]}; got != [3]string{tc.zone, tc.block, tc.rack} {
			t.Errorf("node %d: %v, want %v", tc.index, got, [3]string{tc.zone, tc.block, tc.rack})
		}
		if n.Labels["type"] != "kwok" || n.Status.Capacity.Cpu().String() != "32" {
			t.Errorf("node %d: not KAI's template: labels %v, capacity %v", tc.index, n.Labels, n.Status.Capacity)
		}
	}
}
