package cluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

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

func TestParseNodePoolsRendersNodes(t *testing.T) {
	pools, err := ParseNodePools([]byte(poolsYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 {
		t.Fatalf("got %d pools, want 2", len(pools))
	}
	n, err := pools[0].node(3)
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

	cpuNode, err := pools[1].node(0)
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

func TestParseNodePoolsRejects(t *testing.T) {
	cases := map[string]string{
		"unknown field":   "nodePools: [{name: a, count: 1, gpus: 8}]",
		"no name":         "nodePools: [{count: 1}]",
		"negative count":  "nodePools: [{name: a, count: -1}]",
		"bad quantity":    "nodePools: [{name: a, count: 1, memory: lots}]",
		"not a node list": "nodes: []",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseNodePools([]byte(doc)); err == nil {
				t.Errorf("ParseNodePools(%q) succeeded, want an error", doc)
			}
		})
	}
}

func TestBadTemplateIsAnError(t *testing.T) {
	p := NodePool{Name: "a", Count: 1, Topology: map[string]string{"rack": "{{.Nope}}"}}
	if _, err := p.node(0); err == nil || !strings.Contains(err.Error(), "topology rack") {
		t.Errorf("want an error naming the topology key, got %v", err)
	}
}

// TestStagesAreKwokStages checks that every embedded file is one kwok Stage with a name, so a
// broken edit fails here rather than as a kwok start-up error in e2e.
func TestStagesAreKwokStages(t *testing.T) {
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		b, err := stageFiles.ReadFile("stages/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(b, &s); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if s.APIVersion != "kwok.x-k8s.io/v1alpha1" || s.Kind != "Stage" || s.Metadata.Name == "" {
			t.Errorf("%s is not a named kwok Stage: %+v", e.Name(), s)
		}
		if names[s.Metadata.Name] {
			t.Errorf("stage name %s used twice", s.Metadata.Name)
		}
		names[s.Metadata.Name] = true
	}
	if !names["pod-complete-annotated"] || !names["node-initialize"] {
		t.Errorf("missing essential stages; have %v", names)
	}
}
