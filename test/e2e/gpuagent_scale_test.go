//go:build e2e

package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// TestGPUAgentsAreCheap runs an agent on each of 16 fake nodes, the most the e2e tests and the
// demo are expected to use, and bounds what they cost: start-up time and memory.
func TestGPUAgentsAreCheap(t *testing.T) {
	const nodes = 16
	bin, err := gpuagents.BuildBinary(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartT(t, cluster.Config{
		NodePools: []cluster.NodePool{{Name: "gpu", Count: nodes, GPUsPerNode: 8}},
		SkipCRDs:  true,
	})
	agentNodes, err := gpuagents.GPUNodes(t.Context(), c)
	if err != nil || len(agentNodes) != nodes {
		t.Fatalf("GPU nodes: %d, %v", len(agentNodes), err)
	}
	begin := time.Now()
	fleet, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Nodes: agentNodes, Binary: bin, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Stop()
	ready := time.Since(begin)
	eventually(t, 30*time.Second, "every node labelled by its agent", func(ctx context.Context) (bool, error) {
		var list corev1.NodeList
		if err := c.Client().List(ctx, &list); err != nil {
			return false, err
		}
		for _, n := range list.Items {
			if n.Annotations[fairwayv1.GPUInventoryAnnotation] == "" || n.Labels[fairwayv1.GPUTypeLabel] != "H100" {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(2 * time.Second) // a few usage polls and a refresh
	var total int64
	for _, n := range agentNodes {
		total += rssKiB(t, fleet.Agent(n.Name).Process.Pid())
	}
	perAgent := total / nodes / 1024
	t.Logf("%d agents ready in %v; resident memory %d MiB in all, %d MiB per agent", nodes, ready.Round(time.Millisecond), total/1024, perAgent)
	if ready > 30*time.Second {
		t.Errorf("agents took %v to be ready", ready)
	}
	if perAgent > 120 {
		t.Errorf("%d MiB per agent; an agent on a fake node should stay well under 120 MiB", perAgent)
	}
}

func rssKiB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
