package v1alpha1

import "strings"

// GPUType is the short model of an NVML product name, the node-pool name queues quota by:
// "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA A100-SXM4-40GB" -> "A100", "Tesla T4" -> "T4",
// "NVIDIA GeForce RTX 4090" -> "RTX-4090", "NVIDIA RTX A6000" -> "RTX-A6000".
//
// It lives in the API, next to GPUTypeLabel, because two components must agree on it: the
// gpu-agent writes it as the node's label, and the scheduler derives it from a DRA device's
// product when a node has no label. One owner keeps the two from drifting apart.
func GPUType(product string) string {
	var words []string
	for _, w := range strings.Fields(product) {
		switch strings.ToLower(w) {
		case "mock", "nvidia", "tesla", "geforce", "quadro":
			continue
		}
		words = append(words, w)
	}
	if len(words) == 0 {
		return ""
	}
	first := words[0]
	if (first == "RTX" || first == "GTX") && len(words) > 1 {
		return first + "-" + strings.SplitN(words[1], "-", 2)[0]
	}
	return strings.SplitN(first, "-", 2)[0]
}
