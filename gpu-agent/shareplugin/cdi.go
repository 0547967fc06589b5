package shareplugin

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// cdiAnnotationPlugin names the plugin in the cdi.k8s.io annotation keys it writes.
const cdiAnnotationPlugin = "fairway.dev-gpu-share"

// DefaultCDISpecDirs are where runtimes read CDI specs (the CDI packages' defaults): static
// specs in /etc/cdi, generated ones in /var/run/cdi. The plugin writes its own in the last.
var DefaultCDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// CDI writes the node's GPUs as a CDI spec of kind fairway.dev/gpu and resolves, per GPU, the
// CDI devices a share gets: fairway's, plus the device of the same GPU in NVIDIA's spec where the
// node has one (it carries the driver's libraries and hooks, which fairway's spec does not).
type CDI struct {
	writer *cdi.Cache
	reader *cdi.Cache

	mu sync.Mutex
}

// NewCDI reads specs from dirs and writes fairway's spec into the last of them (the CDI
// packages' highest priority).
func NewCDI(dirs []string) (*CDI, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no CDI spec directory")
	}
	w, err := cdi.NewCache(cdi.WithSpecDirs(dirs[len(dirs)-1]), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI spec directory %s: %w", dirs[len(dirs)-1], err)
	}
	// Errors of single specs (another vendor's bad file) leave the others usable.
	r, _ := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	return &CDI{writer: w, reader: r}, nil
}

// Spec is fairway's CDI spec for gpus: one device per GPU, named by its UUID, with its device
// node; the control nodes are the spec's common edits, which come with any of its devices.
func Spec(gpus []GPU, control []string) *cdispec.Spec {
	spec := &cdispec.Spec{Kind: fairwayv1alpha1.CDIVendor + "/" + fairwayv1alpha1.CDIClass}
	for _, d := range control {
		spec.ContainerEdits.DeviceNodes = append(spec.ContainerEdits.DeviceNodes, &cdispec.DeviceNode{Path: d})
	}
	for _, g := range gpus {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name:           g.UUID,
			ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: g.DeviceNode()}}},
		})
	}
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		v = cdispec.CurrentVersion
	}
	spec.Version = v
	return spec
}

// WriteSpec writes fairway's spec for gpus (v1alpha1.CDISpecName).
func (c *CDI) WriteSpec(gpus []GPU, control []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writer.WriteSpec(Spec(gpus, control), fairwayv1alpha1.CDISpecName); err != nil {
		return fmt.Errorf("writing CDI spec %s: %w", fairwayv1alpha1.CDISpecName, err)
	}
	return nil
}

// Devices are the qualified CDI names a share of g gets: fairway's device, and NVIDIA's device
// of the same GPU when a spec of vendor nvidia.com names one.
func (c *CDI) Devices(g GPU) []string {
	out := []string{fairwayv1alpha1.CDIDeviceName(g.UUID)}
	if name := c.nvidiaDevice(g); name != "" {
		out = append(out, name)
	}
	return out
}

// nvidiaDevice finds g's device among NVIDIA's CDI specs: a device whose edits include g's
// device node and no other GPU's (so not "all"). Specs name devices by index or by UUID, at the
// operator's choice; the device node tells either apart.
func (c *CDI) nvidiaDevice(g GPU) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.reader.Refresh() // errors of single specs are theirs
	var found []string
	for _, name := range c.reader.ListDevices() {
		vendor, _, _ := parser.ParseDevice(name)
		if vendor == fairwayv1alpha1.CDIVendor || !strings.HasSuffix(vendor, "nvidia.com") {
			continue
		}
		d := c.reader.GetDevice(name)
		if d == nil {
			continue
		}
		gpuNodes := 0
		mine := false
		for _, n := range d.ContainerEdits.DeviceNodes {
			if !isGPUNode(n.Path) {
				continue
			}
			gpuNodes++
			mine = mine || n.Path == g.DeviceNode() || n.HostPath == g.DeviceNode()
		}
		if mine && gpuNodes == 1 {
			found = append(found, name)
		}
	}
	// One name per GPU: the spec's own order of preference is not ours to know, so the first
	// in name order (nvidia.com/gpu before k8s.device-plugin.nvidia.com/gpu is the same GPU).
	slices.Sort(found)
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// isGPUNode reports whether path is a GPU's device node, /dev/nvidia<n>.
func isGPUNode(path string) bool {
	base := filepath.Base(path)
	n, ok := strings.CutPrefix(base, "nvidia")
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// cdiAnnotations names devices in the cdi.k8s.io annotation of the GPU uuid.
func cdiAnnotations(uuid string, devices []string) (map[string]string, error) {
	return cdi.UpdateAnnotations(nil, cdiAnnotationPlugin, uuid, devices)
}
