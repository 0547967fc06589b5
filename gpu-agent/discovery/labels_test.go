package discovery

import (
	"strings"
	"testing"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestLabelsEdgeCases(t *testing.T) {
	t.Run("no healthy GPU", func(t *testing.T) {
		inv := &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{{Index: 0, Product: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920}}}
		got := Labels(inv, "node.x")
		if len(got) != 1 || got[fairwayv1alpha1.GPUCountLabel] != "0" {
			t.Errorf("Labels = %v, want only count 0", got)
		}
	})
	t.Run("mixed memory takes the smallest", func(t *testing.T) {
		inv := &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Healthy: true},
			{Index: 1, Product: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Healthy: true},
		}}
		if got := Labels(inv, "")[fairwayv1alpha1.GPUMemoryLabel]; got != "40960" {
			t.Errorf("memory label = %s, want 40960", got)
		}
	})
	t.Run("long values are valid label values", func(t *testing.T) {
		v := labelValue(strings.Repeat("x", 70) + " .")
		if len(v) > 63 || strings.ContainsAny(v, " ") {
			t.Errorf("labelValue = %q", v)
		}
		if d := NodeDomain(strings.Repeat("n", 100)); len(d) > 63 {
			t.Errorf("NodeDomain too long: %q", d)
		}
	})
}
