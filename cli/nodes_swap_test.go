package cli_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
)

// A notebook whose memory could not be brought back shows so, with its bytes; one only eligible
// for a swap shows nothing (its memory is on its GPU).
func TestNodesShowRestoreFailed(t *testing.T) {
	var nodes []corev1.Node
	for _, o := range clitest.Nodes() {
		nodes = append(nodes, *o.(*corev1.Node))
	}
	swap := func(s fairwayv1.GPUSwap) map[string]string {
		return map[string]string{fairwayv1.GPUSwapAnnotation: fairwayv1.FormatGPUSwap(s)}
	}
	nb := func(name string, s fairwayv1.GPUSwap) corev1.Pod {
		return *clitest.Pod(clitest.PodSpec{Namespace: "team-b", Name: name, Queue: "team-b", Class: fairwayv1.PriorityClassInteractive,
			Kind: fairwayv1.KindNotebook, Node: "h100-1", Fraction: "0.25", Slot: 0, UUID: clitest.UUID("h100-1", 3), Annotations: swap(s)})
	}
	v := cli.BuildNodes(&cli.NodesSnapshot{Nodes: nodes, Pods: []corev1.Pod{
		nb("nb-lost", fairwayv1.GPUSwap{State: fairwayv1.GPUSwapRestoreFailed, Bytes: 12 << 30, Reason: "CUDA_ERROR_UNKNOWN"}),
		nb("nb-idle", fairwayv1.GPUSwap{State: fairwayv1.GPUSwapEligible, Bytes: 4 << 30}),
	}})
	var out bytes.Buffer
	if err := cli.PrintNodes(&out, v); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "team-b/nb-lost=0.25(restore of 12Gi failed)") || !strings.Contains(s, "team-b/nb-idle=0.25,") &&
		!strings.Contains(s, "team-b/nb-idle=0.25\n") {
		t.Errorf("nodes:\n%s", s)
	}
	for _, n := range v.Items {
		if n.Name == "h100-1" && (n.Swapped != 1 || n.SharedGPUs[0].SwappedBytes != 12<<30) {
			t.Errorf("h100-1: %d swapped GPUs, %d bytes; want 1 with the failed notebook's 12Gi", n.Swapped, n.SharedGPUs[0].SwappedBytes)
		}
	}
}

// A GPU whose shares get the driver's per-cgroup limit shows "+kernel" after its mode, with the
// legend that says what it means; the others show their mode alone.
func TestNodesShowKernelMemoryLimit(t *testing.T) {
	var nodes []corev1.Node
	for _, o := range clitest.Nodes() {
		n := *o.(*corev1.Node)
		if n.Name == "h100-1" {
			var inv fairwayv1.GPUInventory
			if err := json.Unmarshal([]byte(n.Annotations[fairwayv1.GPUInventoryAnnotation]), &inv); err != nil {
				t.Fatal(err)
			}
			inv.GPUs[3].KernelMemoryLimit = true
			b, err := json.Marshal(inv)
			if err != nil {
				t.Fatal(err)
			}
			n.Annotations[fairwayv1.GPUInventoryAnnotation] = string(b)
		}
		nodes = append(nodes, n)
	}
	pod := func(name string, slot int) corev1.Pod {
		return *clitest.Pod(clitest.PodSpec{Namespace: "team-b", Name: name, Queue: "team-b", Node: "h100-1", Fraction: "0.5",
			Slot: slot, UUID: clitest.UUID("h100-1", slot)})
	}
	v := cli.BuildNodes(&cli.NodesSnapshot{Nodes: nodes, Pods: []corev1.Pod{pod("limited", 3), pod("library", 2)}})
	var out bytes.Buffer
	if err := cli.PrintNodes(&out, v); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"mps+kernel", "+kernel: each share's memory limit is on its pod's cgroup"} {
		if !strings.Contains(s, want) {
			t.Errorf("nodes lack %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "+kernel ") != 1 {
		t.Errorf("want one GPU with +kernel:\n%s", s)
	}
}
