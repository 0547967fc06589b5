//go:build cgo

package agent

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// Report is one discovery and one usage sample, what `fairway agent discover` prints: the
// agent's view of a node without a cluster, for support and for the real-GPU check.
type Report struct {
	Node         string                       `json:"node"`
	NVML         string                       `json:"nvml"`
	Labels       map[string]string            `json:"labels"`
	NVLinkDomain string                       `json:"nvlinkDomain,omitempty"`
	Inventory    fairwayv1alpha1.GPUInventory `json:"inventory"`
	Usage        []GPUUsageReport             `json:"usage"`
	Errors       []string                     `json:"errors,omitempty"`
}

// GPUUsageReport is one GPU's usage in a Report.
type GPUUsageReport struct {
	Index              int      `json:"index"`
	UtilizationPercent *uint32  `json:"utilizationPercent,omitempty"`
	MemoryUsedMiB      uint64   `json:"memoryUsedMiB"`
	MemoryTotalMiB     uint64   `json:"memoryTotalMiB"`
	ProcessPIDs        []uint32 `json:"processPIDs,omitempty"`
	ProcessSamples     bool     `json:"perProcessUtilization"`
	Error              string   `json:"error,omitempty"`
}

// Discover opens the library o.NVML names, discovers once and samples usage once. It fails
// when NVML cannot be initialised, with advice on why.
func Discover(o Options) (*Report, error) {
	lib, err := OpenLibrary(&o)
	if err != nil {
		return nil, err
	}
	if err := lib.Init(); err != nil {
		return nil, fmt.Errorf("initialising NVML: %w", Explain(err))
	}
	defer func() { _ = lib.Shutdown() }()
	res, err := discovery.Discover(lib, discovery.Options{NodeName: o.NodeName})
	if err != nil {
		return nil, err
	}
	r := &Report{
		Node:         o.NodeName,
		NVML:         o.NVML,
		Labels:       discovery.Labels(&res.Inventory, res.NVLinkDomain),
		NVLinkDomain: res.NVLinkDomain,
		Inventory:    res.Inventory,
	}
	r.Inventory.ObservedAt = metav1.Now()
	for _, err := range res.DeviceErrors {
		r.Errors = append(r.Errors, err.Error())
	}
	s := usage.NewSampler(lib, lib.Resolver).Sample(time.Now())
	if s.Err != nil {
		r.Errors = append(r.Errors, s.Err.Error())
	}
	for _, g := range s.GPUs {
		u := GPUUsageReport{
			Index:          g.Index,
			MemoryUsedMiB:  g.MemoryUsedBytes >> 20,
			MemoryTotalMiB: g.MemoryTotalBytes >> 20,
			ProcessSamples: g.ProcessSMKnown,
		}
		if g.UtilizationKnown {
			v := g.UtilizationPercent
			u.UtilizationPercent = &v
		}
		for _, p := range g.Processes {
			u.ProcessPIDs = append(u.ProcessPIDs, p.PID)
		}
		if g.Err != nil {
			u.Error = g.Err.Error()
		}
		r.Usage = append(r.Usage, u)
	}
	return r, nil
}
