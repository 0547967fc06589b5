package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
)

// Options tune a discovery pass.
type Options struct {
	// NodeName names the intra-node NVLink domain when the GPUs are not part of a
	// multi-node fabric.
	NodeName string
	// Previous is the last inventory, if any: a device NVML can no longer identify (lost)
	// keeps the UUID it had at the same index, so the scheduler sees which GPU went bad.
	Previous *fairwayv1alpha1.GPUInventory
}

// Result is one look at the node's GPUs.
type Result struct {
	// Inventory lists every device NVML enumerates, healthy or not. ObservedAt, MPS and
	// RefreshSeconds are left for the caller.
	Inventory fairwayv1alpha1.GPUInventory
	// NVLinkDomain is the node's NVLink domain: the fabric clique "<clusterUUID>.<cliqueID>"
	// when the fabric manager registered the GPUs in one, else "node.<name>" when every
	// healthy GPU reaches every other over NVLink, else "" (no single domain).
	NVLinkDomain string
	// Minors are the devices' minor numbers (/dev/nvidia<n>) by index, -1 where it could not
	// be read. Node-local: the scheduler has no use for them, the device plugin does.
	Minors []int
	// DeviceErrors are the failures of single devices; each such device is in Inventory
	// with Healthy false, or with what could still be read.
	DeviceErrors []error
}

// Discover reads the node's GPUs. It fails only when the library itself fails (no driver, the
// device count cannot be read); per-device failures land in Result.DeviceErrors.
func Discover(lib gpu.Library, opts Options) (Result, error) {
	var res Result
	if v, err := lib.DriverVersion(); err != nil {
		res.DeviceErrors = append(res.DeviceErrors, fmt.Errorf("reading driver version: %w", err))
	} else {
		res.Inventory.Driver = v
	}
	n, err := lib.DeviceCount()
	if err != nil {
		return Result{}, fmt.Errorf("counting GPUs: %w", err)
	}
	res.Inventory.GPUs = make([]fairwayv1alpha1.GPUDevice, 0, n)
	handles := make([]gpu.Device, n)
	for i := range n {
		d, dev, errs := describe(lib, i, opts.Previous)
		handles[i] = d
		res.Inventory.GPUs = append(res.Inventory.GPUs, dev)
		minor := -1
		if d != nil {
			if m, err := d.MinorNumber(); err != nil {
				res.DeviceErrors = append(res.DeviceErrors, fmt.Errorf("GPU %d: reading minor number: %w", i, err))
			} else {
				minor = m
			}
		}
		res.Minors = append(res.Minors, minor)
		res.DeviceErrors = append(res.DeviceErrors, errs...)
	}
	res.DeviceErrors = append(res.DeviceErrors, linkPeers(handles, res.Inventory.GPUs)...)
	domain, errs := nvlinkDomain(handles, res.Inventory.GPUs, opts.NodeName)
	res.NVLinkDomain = domain
	res.DeviceErrors = append(res.DeviceErrors, errs...)
	return res, nil
}

// describe reads one device. The returned handle is nil when the device is unusable.
func describe(lib gpu.Library, i int, prev *fairwayv1alpha1.GPUInventory) (gpu.Device, fairwayv1alpha1.GPUDevice, []error) {
	dev := fairwayv1alpha1.GPUDevice{Index: int32(i), Healthy: true}
	var errs []error
	fail := func(what string, err error) {
		errs = append(errs, fmt.Errorf("GPU %d: %s: %w", i, what, err))
	}
	d, err := lib.Device(i)
	if err != nil {
		fail("getting handle", err)
		dev.Healthy = false
		dev.UUID = previousUUID(prev, i)
		return nil, dev, errs
	}
	if dev.UUID, err = d.UUID(); err != nil {
		// Without its UUID the device cannot be handed to a container; it is unusable.
		fail("reading UUID", err)
		dev.Healthy = false
		dev.UUID = previousUUID(prev, i)
		if errors.Is(err, gpu.ErrGPULost) {
			return nil, dev, errs // a lost GPU answers nothing else
		}
	}
	if m, err := d.Memory(); err != nil {
		fail("reading memory", err)
		dev.Healthy = false
	} else {
		dev.MemoryMiB = int64(m.Total >> 20)
	}
	if name, err := d.Name(); err != nil {
		fail("reading name", err)
		dev.Healthy = dev.Healthy && !errors.Is(err, gpu.ErrGPULost)
	} else {
		dev.Product = name
	}
	if major, minor, err := d.ComputeCapability(); err != nil {
		if !errors.Is(err, gpu.ErrNotSupported) {
			fail("reading compute capability", err)
			dev.Healthy = dev.Healthy && !errors.Is(err, gpu.ErrGPULost)
		}
	} else {
		dev.ComputeCapability = strconv.Itoa(major) + "." + strconv.Itoa(minor)
	}
	if mig, err := d.MIGEnabled(); err != nil {
		if !errors.Is(err, gpu.ErrNotSupported) {
			fail("reading MIG mode", err)
			dev.Healthy = dev.Healthy && !errors.Is(err, gpu.ErrGPULost)
		}
	} else {
		dev.MIGEnabled = mig
	}
	if !dev.Healthy {
		return nil, dev, errs
	}
	return d, dev, errs
}

func previousUUID(prev *fairwayv1alpha1.GPUInventory, i int) string {
	if prev == nil {
		return ""
	}
	for _, g := range prev.GPUs {
		if int(g.Index) == i {
			return g.UUID
		}
	}
	return ""
}

// linkPeers fills NVLinkPeers of every healthy device from NVML's NVLink peer-to-peer status,
// which answers the same for direct links and NVSwitch systems.
func linkPeers(handles []gpu.Device, devs []fairwayv1alpha1.GPUDevice) []error {
	var errs []error
	for i, a := range handles {
		for j := i + 1; j < len(handles); j++ {
			b := handles[j]
			if a == nil || b == nil {
				continue
			}
			ok, err := a.NVLinkTo(b)
			if err != nil {
				if !errors.Is(err, gpu.ErrNotSupported) {
					errs = append(errs, fmt.Errorf("GPU %d: NVLink status to GPU %d: %w", i, j, err))
				}
				continue
			}
			if ok {
				devs[i].NVLinkPeers = append(devs[i].NVLinkPeers, int32(j))
				devs[j].NVLinkPeers = append(devs[j].NVLinkPeers, int32(i))
			}
		}
	}
	for i := range devs {
		slices.Sort(devs[i].NVLinkPeers)
	}
	return errs
}

// nvlinkDomain names the node's NVLink domain; see Result.NVLinkDomain.
func nvlinkDomain(handles []gpu.Device, devs []fairwayv1alpha1.GPUDevice, node string) (string, []error) {
	var errs []error
	cliques := map[string]int{}
	healthy := 0
	for i, d := range handles {
		if d == nil {
			continue
		}
		healthy++
		f, err := d.Fabric()
		if err != nil {
			if !errors.Is(err, gpu.ErrNotSupported) {
				errs = append(errs, fmt.Errorf("GPU %d: reading fabric info: %w", i, err))
			}
			continue
		}
		if f.Registered && f.ClusterUUID != "" {
			cliques[f.ClusterUUID+"."+strconv.FormatUint(uint64(f.CliqueID), 10)]++
		}
	}
	switch {
	case len(cliques) == 1:
		for c := range cliques {
			return c, errs
		}
	case len(cliques) > 1:
		errs = append(errs, fmt.Errorf("GPUs of this node are in %d different fabric cliques; publishing no NVLink domain", len(cliques)))
		return "", errs
	}
	if healthy < 2 || !allLinked(devs) {
		return "", errs
	}
	return NodeDomain(node), errs
}

// allLinked reports whether the healthy devices form one NVLink island.
func allLinked(devs []fairwayv1alpha1.GPUDevice) bool {
	var healthy []int32
	for _, d := range devs {
		if d.Healthy {
			healthy = append(healthy, d.Index)
		}
	}
	for _, d := range devs {
		if !d.Healthy {
			continue
		}
		for _, other := range healthy {
			if other != d.Index && !slices.Contains(d.NVLinkPeers, other) {
				return false
			}
		}
	}
	return true
}

// NodeDomain is the NVLink domain of a node whose GPUs are linked only to each other:
// "node.<name>", or a hash when the name is too long for a label value.
func NodeDomain(node string) string {
	const maxLabelValue = 63
	if d := "node." + node; len(d) <= maxLabelValue {
		return d
	}
	sum := sha256.Sum256([]byte(node))
	return "node." + hex.EncodeToString(sum[:12])
}
