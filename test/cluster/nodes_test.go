package cluster

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/nodepool"
)

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

// TestDemoNodesFile keeps the demo's example node description valid.
func TestDemoNodesFile(t *testing.T) {
	pools, err := nodepool.Load("../demo/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 1 || pools[0].Count != 4 || pools[0].GPUsPerNode != 8 {
		t.Errorf("unexpected demo pools: %+v", pools)
	}
}
