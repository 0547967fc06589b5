package discovery

import (
	"strconv"
	"strings"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// OwnedLabels are the node labels the agent manages: it sets those Labels returns and removes
// the others.
var OwnedLabels = []string{
	fairwayv1alpha1.GPUTypeLabel,
	fairwayv1alpha1.GPUProductLabel,
	fairwayv1alpha1.GPUMemoryLabel,
	fairwayv1alpha1.GPUCountLabel,
	fairwayv1alpha1.NVLinkDomainLabel,
}

// Labels are the node labels for an inventory: the count of healthy GPUs, and the type,
// product and memory of the healthy ones (the smallest memory if they differ, so that a
// placement by the label always fits). A node whose GPUs are all unhealthy gets count 0 and
// nothing else.
func Labels(inv *fairwayv1alpha1.GPUInventory, nvlinkDomain string) map[string]string {
	labels := map[string]string{}
	healthy := 0
	var product string
	var memory int64
	for _, g := range inv.GPUs {
		if !g.Healthy {
			continue
		}
		healthy++
		if product == "" {
			product = g.Product
		}
		if memory == 0 || g.MemoryMiB < memory {
			memory = g.MemoryMiB
		}
	}
	labels[fairwayv1alpha1.GPUCountLabel] = strconv.Itoa(healthy)
	if healthy == 0 {
		return labels
	}
	if v := labelValue(strings.ReplaceAll(product, " ", "-")); v != "" {
		labels[fairwayv1alpha1.GPUProductLabel] = v
	}
	if v := labelValue(fairwayv1alpha1.GPUType(product)); v != "" {
		labels[fairwayv1alpha1.GPUTypeLabel] = v
	}
	if memory > 0 {
		labels[fairwayv1alpha1.GPUMemoryLabel] = strconv.FormatInt(memory, 10)
	}
	if v := labelValue(nvlinkDomain); v != "" {
		labels[fairwayv1alpha1.NVLinkDomainLabel] = v
	}
	return labels
}

// labelValue trims s to a valid label value: at most 63 of [A-Za-z0-9._-], beginning and
// ending alphanumeric.
func labelValue(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b = append(b, c)
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "._-")
}
