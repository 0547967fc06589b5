// Package nodepool is the node-pool format: a YAML list of groups of identical GPU nodes (type,
// count, memory, topology labels) and the Node objects each group stands for. Two consumers read
// it: `fairway sim`, which builds its simulated cluster from a node-pool file, and the local test
// cluster (test/cluster), which creates the same nodes as kwok fake nodes. It lives in api/, not
// in test/, because it is a file format the shipped binary reads; keeping it here keeps the e2e
// harness and Go's testing package out of that binary. It depends only on apimachinery, the
// core API types and api/v1alpha1.
package nodepool

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// KwokNodeAnnotation marks a Node as a kwok fake node; the test cluster's kwok manages exactly
// the nodes that carry it, so tests can also create nodes nobody plays (they stay NotReady). The
// simulator ignores it.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Labels the NVIDIA GPU feature discovery publishes on real GPU nodes; pool nodes carry them too,
// so code that reads either convention can be tested.
const (
	NVIDIAGPUProductLabel = "nvidia.com/gpu.product"
	NVIDIAGPUCountLabel   = "nvidia.com/gpu.count"
	NVIDIAGPUMemoryLabel  = "nvidia.com/gpu.memory"
)

// Pool describes a group of identical fake nodes. It reads from YAML (see Parse):
//
//	nodePools:
//	- name: h100
//	  count: 4
//	  gpuType: H100
//	  gpuProduct: NVIDIA-H100-80GB-HBM3
//	  gpusPerNode: 8
//	  gpuMemoryMiB: 81559
//	  cpu: "96"
//	  memory: 1Ti
//	  topology: {rack: "rack-{{div .Index 2}}", nvlink: "nvl-{{.Index}}"}
//
// Nodes are named <name>-<index>. Label values and topology values are Go templates over
// {{.Index}} (the node's index in its pool), {{.Pool}} and {{.Name}}, with the functions div,
// mod and add, so a pool can spread its nodes over racks or NVLink domains.
type Pool struct {
	// Name of the pool; node names are <Name>-<index>. Required.
	Name string `json:"name"`
	// Count is how many nodes to create. Required.
	Count int `json:"count"`
	// GPUType is the fairway.dev/gpu-type label (the GPU type queues quota by), e.g. H100.
	GPUType string `json:"gpuType,omitempty"`
	// GPUProduct is the NVML product name with dashes for spaces, e.g. NVIDIA-H100-80GB-HBM3; it
	// becomes nvidia.com/gpu.product and fairway.dev/gpu-product.
	GPUProduct string `json:"gpuProduct,omitempty"`
	// GPUsPerNode is the node's nvidia.com/gpu capacity; 0 makes a CPU-only node.
	GPUsPerNode int `json:"gpusPerNode,omitempty"`
	// GPUMemoryMiB is the memory of one GPU, published as fairway.dev/gpu-memory.
	GPUMemoryMiB int `json:"gpuMemoryMiB,omitempty"`
	// CPU capacity as a quantity; "64" when empty.
	CPU string `json:"cpu,omitempty"`
	// Memory capacity as a quantity; "512Gi" when empty.
	Memory string `json:"memory,omitempty"`
	// Pods is the pod capacity; 110 when zero.
	Pods int `json:"pods,omitempty"`
	// EphemeralStorage capacity as a quantity; none when empty. A real kubelet always reports
	// it; set it for pods that request ephemeral-storage (the MPIJob launcher's init container
	// of the training operator does), which cannot fit a node without it.
	EphemeralStorage string `json:"ephemeralStorage,omitempty"`
	// Labels are added to every node; values are templates (see Pool).
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to every node.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Taints are set on every node.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Topology labels: keys are label keys or the shorthands nvlink (fairway.dev/nvlink-domain),
	// zone and region (topology.kubernetes.io/...); another key without a slash, such as rack or
	// block, becomes fairway.dev/<key>. Values are templates (see Pool).
	Topology map[string]string `json:"topology,omitempty"`
}

// file is the top level of a node description file.
type file struct {
	NodePools []Pool `json:"nodePools"`
}

// Parse reads a YAML node description with a top-level nodePools list. Unknown fields are
// errors, so a typo does not silently make a different cluster.
func Parse(data []byte) ([]Pool, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("parsing node pools: %w", err)
	}
	for _, p := range f.NodePools {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	return f.NodePools, nil
}

// Load reads a YAML node description file; see Parse.
func Load(path string) ([]Pool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading node pools: %w", err)
	}
	pools, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pools, nil
}

// H100 returns count nodes of 8 NVIDIA H100 80GB GPUs each (a DGX H100), two per rack, each
// node its own NVLink domain: the shape of the demo and of most e2e tests.
func H100(count int) Pool {
	return Pool{
		Name:         "h100",
		Count:        count,
		GPUType:      "H100",
		GPUProduct:   "NVIDIA-H100-80GB-HBM3",
		GPUsPerNode:  8,
		GPUMemoryMiB: 81559,
		CPU:          "224",
		Memory:       "2Ti",
		Pods:         110,
		Topology:     map[string]string{"rack": "rack-{{div .Index 2}}", "nvlink": "nvl-{{.Index}}"},
	}
}

// Validate checks what Parse checks: a name, no negative counts, parseable quantities. A Pool
// built in Go rather than parsed is checked by it before its nodes are made.
func (p Pool) Validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("node pool without a name")
	case p.Count < 0:
		return fmt.Errorf("node pool %s: count must not be negative", p.Name)
	case p.GPUsPerNode < 0 || p.GPUMemoryMiB < 0 || p.Pods < 0:
		return fmt.Errorf("node pool %s: gpusPerNode, gpuMemoryMiB and pods must not be negative", p.Name)
	}
	for _, q := range []string{p.CPU, p.Memory, p.EphemeralStorage} {
		if q == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("node pool %s: %q: %w", p.Name, q, err)
		}
	}
	return nil
}

// topologyKey expands a topology shorthand to its label key.
func topologyKey(k string) string {
	switch {
	case strings.Contains(k, "/"):
		return k
	case k == "nvlink":
		return fairwayv1.NVLinkDomainLabel
	case k == "zone":
		return corev1.LabelTopologyZone
	case k == "region":
		return corev1.LabelTopologyRegion
	default:
		return fairwayv1.Prefix + k
	}
}

var templateFuncs = template.FuncMap{
	"div": func(a, b int) int { return a / b },
	"mod": func(a, b int) int { return a % b },
	"add": func(a, b int) int { return a + b },
}

// render evaluates a label value template for one node.
func render(value string, data any) (string, error) {
	if !strings.Contains(value, "{{") {
		return value, nil
	}
	t, err := template.New("label").Funcs(templateFuncs).Option("missingkey=error").Parse(value)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Node builds the Node object of the pool's node at index: labels, kwok annotation, taints and
// status capacity/allocatable. kwok keeps the status it is created with and only adds conditions,
// addresses and node info.
func (p Pool) Node(index int) (*corev1.Node, error) {
	name := fmt.Sprintf("%s-%d", p.Name, index)
	data := struct {
		Index      int
		Pool, Name string
	}{index, p.Name, name}

	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok",
	}
	if p.GPUsPerNode > 0 {
		count := strconv.Itoa(p.GPUsPerNode)
		labels[fairwayv1.GPUCountLabel] = count
		labels[NVIDIAGPUCountLabel] = count
		if p.GPUType != "" {
			labels[fairwayv1.GPUTypeLabel] = p.GPUType
		}
		if p.GPUProduct != "" {
			labels[fairwayv1.GPUProductLabel] = p.GPUProduct
			labels[NVIDIAGPUProductLabel] = p.GPUProduct
		}
		if p.GPUMemoryMiB > 0 {
			mem := strconv.Itoa(p.GPUMemoryMiB)
			labels[fairwayv1.GPUMemoryLabel] = mem
			labels[NVIDIAGPUMemoryLabel] = mem
		}
	}
	for k, v := range p.Topology {
		val, err := render(v, data)
		if err != nil {
			return nil, fmt.Errorf("node pool %s: topology %s: %w", p.Name, k, err)
		}
		labels[topologyKey(k)] = val
	}
	for k, v := range p.Labels {
		val, err := render(v, data)
		if err != nil {
			return nil, fmt.Errorf("node pool %s: label %s: %w", p.Name, k, err)
		}
		labels[k] = val
	}

	annotations := map[string]string{KwokNodeAnnotation: "fake"}
	for k, v := range p.Annotations {
		annotations[k] = v
	}

	capacity, err := p.capacity()
	if err != nil {
		return nil, err
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: p.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
		},
	}, nil
}

func (p Pool) capacity() (corev1.ResourceList, error) {
	cpu, mem, pods := p.CPU, p.Memory, p.Pods
	if cpu == "" {
		cpu = "64"
	}
	if mem == "" {
		mem = "512Gi"
	}
	if pods == 0 {
		pods = 110
	}
	rl := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	var err error
	if rl[corev1.ResourceCPU], err = resource.ParseQuantity(cpu); err != nil {
		return nil, fmt.Errorf("node pool %s: cpu: %w", p.Name, err)
	}
	if rl[corev1.ResourceMemory], err = resource.ParseQuantity(mem); err != nil {
		return nil, fmt.Errorf("node pool %s: memory: %w", p.Name, err)
	}
	if p.EphemeralStorage != "" {
		if rl[corev1.ResourceEphemeralStorage], err = resource.ParseQuantity(p.EphemeralStorage); err != nil {
			return nil, fmt.Errorf("node pool %s: ephemeralStorage: %w", p.Name, err)
		}
	}
	if p.GPUsPerNode > 0 {
		rl[fairwayv1.ResourceGPU] = *resource.NewQuantity(int64(p.GPUsPerNode), resource.DecimalSI)
	}
	return rl, nil
}

// Nodes returns the Node objects of the pool: the local test cluster creates them, and
// `fairway sim` builds its simulated cluster from them, so both read the same files the same way.
func (p Pool) Nodes() ([]*corev1.Node, error) {
	out := make([]*corev1.Node, 0, p.Count)
	for i := range p.Count {
		n, err := p.Node(i)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
