package v1alpha1

import "testing"

func TestGPUType(t *testing.T) {
	cases := map[string]string{
		"NVIDIA H100 80GB HBM3":      "H100",
		"NVIDIA H200 141GB HBM3e":    "H200",
		"NVIDIA A100-SXM4-40GB":      "A100",
		"Mock NVIDIA A100-SXM4-40GB": "A100",
		"NVIDIA A100-PCIE-80GB":      "A100",
		"Tesla T4":                   "T4",
		"Tesla V100-SXM2-16GB":       "V100",
		"NVIDIA L40S":                "L40S",
		"NVIDIA GeForce RTX 4090":    "RTX-4090",
		"NVIDIA RTX A6000":           "RTX-A6000",
		"NVIDIA B200":                "B200",
		"":                           "",
	}
	for product, want := range cases {
		if got := GPUType(product); got != want {
			t.Errorf("GPUType(%q) = %q, want %q", product, got, want)
		}
	}
}
