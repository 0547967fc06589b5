package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/nodepool"
)

// AddNodes creates the nodes of pools and returns their names; kwok makes them Ready shortly
// after (see WaitNodesReady). A pool name used before continues its numbering, so AddNodes(ctx,
// H100Pool(2)) on a cluster started with H100Pool(4) adds h100-4 and h100-5.
func (c *Cluster) AddNodes(ctx context.Context, pools ...NodePool) ([]string, error) {
	var nodes []*corev1.Node
	for _, p := range pools {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		first := c.poolNext[p.Name]
		c.poolNext[p.Name] = first + p.Count
		c.mu.Unlock()
		for i := first; i < first+p.Count; i++ {
			n, err := p.Node(i)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		}
	}
	names := make([]string, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		names[i] = n.Name
		wg.Go(func() {
			if _, err := c.clientset.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				errs[i] = fmt.Errorf("creating node %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return names, err
		}
	}
	return names, nil
}

// WaitNodesReady waits until every kwok node (annotation kwok.x-k8s.io/node) is Ready and
// schedulable: condition Ready=True and no node.kubernetes.io/not-ready or unreachable taint,
// which the node lifecycle controller removes a moment after kwok reports Ready.
//
// Each poll lists every node, so the interval grows with the count (1 ms a node, at least
// 200 ms): at 5,000 nodes a list is megabytes of JSON, and listing it back to back kept the API
// server busy on a 2-vCPU machine while kwok was trying to report those nodes Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context) error {
	var pending []string
	interval := max(200*time.Millisecond, time.Duration(c.nodeCount())*time.Millisecond)
	err := poll(ctx, interval, "nodes to be Ready and schedulable", nil, func(ctx context.Context) (bool, error) {
		list, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pending = pending[:0]
		for i := range list.Items {
			n := &list.Items[i]
			if _, ok := n.Annotations[nodepool.KwokNodeAnnotation]; ok && !NodeReady(n) {
				pending = append(pending, n.Name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w; not ready: %v", err, pending)
	}
	return nil
}

// NodeReady reports whether a node is Ready and carries none of the taints that the node
// lifecycle controller keeps on nodes that are not (yet) healthy.
func NodeReady(n *corev1.Node) bool {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready && !n.Spec.Unschedulable
}

// nodeCount returns how many nodes AddNodes has created.
func (c *Cluster) nodeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, next := range c.poolNext {
		n += next
	}
	return n
}
