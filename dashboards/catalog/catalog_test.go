package catalog

import (
	"slices"
	"testing"
)

func TestGPUAgentFamilies(t *testing.T) {
	fams, err := Exported()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Family{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	for name, labels := range map[string][]string{
		"fairway_gpu_info":                  {"node", "gpu_uuid", "gpu_index", "model", "compute_capability", "mig_enabled"},
		"fairway_gpu_utilization_ratio":     {"node", "gpu_uuid", "gpu_index", "model"},
		"fairway_gpu_pod_memory_used_bytes": {"node", "gpu_uuid", "gpu_index", "model", "namespace", "pod", "queue"},
		"fairway_gpu_pod_idle":              {"node", "gpu_uuid", "gpu_index", "model", "namespace", "pod", "queue"},
		"fairway_gpu_nvml_errors_total":     {"node", "code"},
	} {
		f, ok := byName[name]
		if !ok {
			t.Errorf("%s not found among the gpu-agent's families", name)
			continue
		}
		slices.Sort(labels)
		if f.Component != "gpu-agent" || f.Type == "untyped" || !slices.Equal(f.Labels, labels) {
			t.Errorf("%s: %+v, want gauge/counter of gpu-agent with labels %v", name, f, labels)
		}
	}
	if f := byName["go_goroutines"]; f.Component != "gpu-agent" {
		t.Errorf("the agent serves the Go collector too; got %+v", f)
	}
}

func TestSeriesNames(t *testing.T) {
	ix := NewIndex([]Family{{Name: "h", Type: "histogram"}, {Name: "c", Type: "counter"}},
		[]Request{{Name: "r", Type: "histogram"}, {Name: "c", Label: "x"}})
	for _, n := range []string{"h_bucket", "h_sum", "h_count", "c"} {
		if _, ok := ix.Exported(n); !ok {
			t.Errorf("%s not exported", n)
		}
	}
	if _, ok := ix.Exported("h"); ok {
		t.Error("a histogram has no series named after the family")
	}
	if _, ok := ix.Requested("r_bucket"); !ok {
		t.Error("r_bucket is requested")
	}
	if len(ix.LabelRequests()) != 1 {
		t.Error("label requests are kept apart")
	}
}
