package cluster_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/test/cluster"
)

// Start a cluster outside a test (as the demo does), add nodes later, and run a process
// against it. Compiled, not run: it needs the binaries of `make tools`.
func ExampleStart() {
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Config{
		NodePools:     []cluster.NodePool{cluster.H100Pool(4)},
		KubeScheduler: true,
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Stop() }()

	a100 := cluster.NodePool{Name: "a100", Count: 2, GPUType: "A100", GPUsPerNode: 8, GPUMemoryMiB: 81920}
	if _, err := c.AddNodes(ctx, a100); err != nil {
		panic(err)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		panic(err)
	}
	var nodes corev1.NodeList
	if err := c.Client().List(ctx, &nodes); err != nil {
		panic(err)
	}
	fmt.Println(len(nodes.Items), "nodes; kubeconfig:", c.Kubeconfig())

	// Any binary in bin/ (or an absolute path); KUBECONFIG points at the cluster.
	p, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-scheduler", Path: "fairway", Args: []string{"scheduler"}})
	if err != nil {
		panic(err)
	}
	fmt.Println("logs in", p.LogPath())
}
