package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/nodepool"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
)

// ConfigFile is a simulation config in YAML. Paths are relative to the file.
//
//	name: more-l4
//	nodes: ../../examples/queues/nodes.yaml
//	extraNodePools:
//	- {name: l4-extra, count: 2, gpuType: L4, gpusPerNode: 4, gpuMemoryMiB: 23034, cpu: "64", memory: 256Gi}
//	queues: ../../examples/queues/queues.yaml
//	trace: trace.yaml
//	interval: 10s
//	placement: binpack
//	seed: 1
//	fairShare: {usageHalfLife: 24h, usageWeight: 1}
type ConfigFile struct {
	Name           string          `json:"name,omitempty"`
	Nodes          string          `json:"nodes"`
	ExtraNodePools []nodepool.Pool `json:"extraNodePools,omitempty"`
	Queues         string          `json:"queues,omitempty"`
	Trace          string          `json:"trace"`
	Interval       Duration        `json:"interval,omitempty"`
	MaxTime        Duration        `json:"maxTime,omitempty"`
	Placement      string          `json:"placement,omitempty"`
	Seed           int64           `json:"seed,omitempty"`
	// FairShare turns on fair share over time, as the scheduler's --fair-share-usage-* flags.
	FairShare *FairShareConfig `json:"fairShare,omitempty"`
	// OpenB says how a trace that is an openb pod list is replayed (queues by qos, speedup).
	OpenB OpenBTimed `json:"openb,omitempty"`
}

// FairShareConfig is fair share over time in a simulation config.
type FairShareConfig struct {
	// UsageHalfLife is the half-life of the queues' usage history; 0 turns it off.
	UsageHalfLife Duration `json:"usageHalfLife,omitempty"`
	// UsageWeight is how strongly recent usage moves fair share (default 1).
	UsageWeight float64 `json:"usageWeight,omitempty"`
}

// LoadConfigFile reads a config file.
func LoadConfigFile(path string) (*ConfigFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f ConfigFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, decodeError(path, b, err, "extraNodePools", nil)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&f.Nodes, &f.Queues, &f.Trace} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if f.Name == "" {
		f.Name = filepath.Base(path)
	}
	return &f, nil
}

// loadNodePools reads a node-pool file as nodepool.Load does, but a mistake in it is reported
// with its line, as in traces and configs: nodepool's errors name the field, not where it is.
func loadNodePools(path string) ([]nodepool.Pool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		NodePools []nodepool.Pool `json:"nodePools"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, decodeError(path, b, err, "nodePools", func() any { return &nodepool.Pool{} })
	}
	return nodepool.Load(path)
}

// Build loads what the config names into a Config with the scheduler's engine options (its
// defaults, shares only where a GPU inventory is published, the placement the config asks for).
func (f *ConfigFile) Build() (Config, error) {
	cfg := Config{Name: f.Name, Interval: time.Duration(f.Interval), MaxTime: time.Duration(f.MaxTime), Seed: f.Seed}
	if f.Nodes == "" || f.Trace == "" {
		return cfg, fmt.Errorf("config %s: nodes and trace are required", f.Name)
	}
	var pools []nodepool.Pool
	var err error
	switch {
	case strings.HasSuffix(f.Nodes, ".csv"):
		// An openb node list (sn, cpu_milli, memory_mib, gpu, model).
		nodes, err := LoadOpenBNodes(f.Nodes)
		if err != nil {
			return cfg, err
		}
		for i := range nodes {
			n := Node{Name: nodes[i].Name, MilliCPU: nodes[i].MilliCPU, MemoryMiB: nodes[i].MemoryMiB, GPUs: nodes[i].GPUs, GPUType: nodes[i].Model}
			cfg.Nodes = append(cfg.Nodes, n.Object())
		}
	default:
		// Node objects (fairway sim export), else a node-pool file.
		objs, ok, err := loadNodeObjects(f.Nodes)
		if err != nil {
			return cfg, err
		}
		if ok {
			cfg.Nodes = objs
		} else if pools, err = loadNodePools(f.Nodes); err != nil {
			return cfg, err
		}
	}
	for _, p := range append(pools, f.ExtraNodePools...) {
		nodes, err := p.Nodes()
		if err != nil {
			return cfg, err
		}
		for _, n := range nodes {
			if q, ok := n.Status.Allocatable["nvidia.com/gpu"]; ok && q.Value() > 0 {
				AddGPUs(n, int(q.Value()), p.GPUType, int64(p.GPUMemoryMiB))
			}
			cfg.Nodes = append(cfg.Nodes, n)
		}
	}
	if f.Queues != "" {
		if cfg.Queues, err = LoadQueues(f.Queues); err != nil {
			return cfg, err
		}
	}
	openb := f.OpenB
	for _, n := range cfg.Nodes {
		if q, ok := n.Status.Allocatable[v1alpha1.ResourceGPU]; ok {
			openb.capacityMilli += q.Value() * 1000
		}
	}
	if cfg.Pods, err = LoadTrace(f.Trace, openb); err != nil {
		return cfg, err
	}
	// Queues the trace names but the config does not define: top-level, no quota.
	have := map[string]bool{}
	for _, q := range cfg.Queues {
		have[q.Name] = true
	}
	for _, p := range cfg.Pods {
		if !have[p.Queue] {
			have[p.Queue] = true
			cfg.Queues = append(cfg.Queues, QueueObject(p.Queue))
		}
	}
	opts := engine.DefaultOptions()
	opts.SharesNeedInventory = true
	switch pl := engine.Placement(f.Placement); pl {
	case "", engine.BinPack, engine.Spread, engine.FirstFit:
		if pl != "" {
			opts.Placement = pl
		}
	default:
		return cfg, fmt.Errorf("config %s: placement %q: must be binpack, spread or firstfit (the baseline)", f.Name, f.Placement)
	}
	if fs := f.FairShare; fs != nil {
		if fs.UsageWeight < 0 {
			return cfg, fmt.Errorf("config %s: fairShare.usageWeight %v: must be above 0", f.Name, fs.UsageWeight)
		}
		cfg.UsageHalfLife = time.Duration(fs.UsageHalfLife)
		opts.FairShareUsageWeight = fs.UsageWeight
	}
	cfg.Options = opts
	return cfg, nil
}
