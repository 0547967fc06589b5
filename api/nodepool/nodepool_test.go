package nodepool

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

const poolsYAML = `
nodePools:
- name: h100
  count: 4
  gpuType: H100
  gpuProduct: NVIDIA-H100-80GB-HBM3
  gpusPerNode: 8
  gpuMemoryMiB: 81559
  cpu: "96"
  memory: 1Ti
  pods: 110
  labels: {team: "ml-{{mod .Index 2}}"}
  topology: {rack: "r{{div .Index 2}}", nvlink: "nvl-{{.Name}}", "example.com/block": b0}
- name: cpu
  count: 1
`

func TestParseRendersNodes(t *testing.T) {
	pools, err := Parse([]byte(poolsYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 {
		t.Fatalf("got %d pools, want 2", len(pools))
	}
	n, err := pools[0].Node(3)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		corev1.LabelHostname:        "h100-3",
		fairwayv1.GPUTypeLabel:      "H100",
		fairwayv1.GPUCountLabel:     "8",
		fairwayv1.GPUMemoryLabel:    "81559",
		fairwayv1.GPUProductLabel:   "NVIDIA-H100-80GB-HBM3",
		NVIDIAGPUProductLabel:       "NVIDIA-H100-80GB-HBM3",
		fairwayv1.NVLinkDomainLabel: "nvl-h100-3",
		fairwayv1.Prefix + "rack":   "r1",
		"example.com/block":         "b0",
		"team":                      "ml-1",
	}
	for k, want := range wantLabels {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if n.Annotations[KwokNodeAnnotation] != "fake" {
		t.Errorf("node lacks the kwok annotation: %v", n.Annotations)
	}
	for res, want := range map[corev1.ResourceName]string{fairwayv1.ResourceGPU: "8", corev1.ResourceCPU: "96", corev1.ResourceMemory: "1Ti", corev1.ResourcePods: "110"} {
		if got := n.Status.Allocatable[res]; got.String() != want {
			t.Errorf("allocatable %s = %s, want %s", res, got.String(), want)
		}
	}

	cpuNode, err := pools[1].Node(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cpuNode.Status.Capacity[fairwayv1.ResourceGPU]; ok {
		t.Errorf("a pool without GPUs got %s capacity", fairwayv1.ResourceGPU)
	}
	if _, ok := cpuNode.Labels[fairwayv1.GPUTypeLabel]; ok {
		t.Errorf("a pool without GPUs got a GPU type label")
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		"unknown field":   "nodePools: [{name: a, count: 1, gpus: 8}]",
		"no name":         "nodePools: [{count: 1}]",
		"negative count":  "nodePools: [{name: a, count: -1}]",
		"bad quantity":    "nodePools: [{name: a, count: 1, memory: lots}]",
		"not a node list": "nodes: []",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(doc)); err == nil {
				t.Errorf("Parse(%q) succeeded, want an error", doc)
			}
		})
	}
}

func TestBadTemplateIsAnError(t *testing.T) {
	p := Pool{Name: "a", Count: 1, Topology: map[string]string{"rack": "{{.Nope}}"}}
	if _, err := p.Node(0); err == nil || !strings.Contains(err.Error(), "topology rack") {
		t.Errorf("want an error naming the topology key, got %v", err)
	}
}
