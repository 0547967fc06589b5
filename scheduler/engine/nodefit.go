package engine

import (
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// FitFailure is why a node cannot take a pod; Fits when it can.
type FitFailure uint8

// Fit failures, in the order reasons list them.
const (
	Fits FitFailure = iota
	FailCordoned
	FailTaint
	FailAffinity
	FailDomain
	FailPolicyGPUType
	FailPolicyCPUOnGPU
	FailGPUType
	FailTooFewGPUs
	FailGPUs
	FailGPUShare
	FailGPUMemoryUnknown
	FailNoInventory
	FailCPU
	FailMemory
	FailPods
	FailExtended
	FailHostPort
	FailDRANode
	FailDRANoDevices
	FailDRA
	FailDRAAllocated
	numFitFailures
)

// String is the phrase used in "0/5 nodes fit: 3 <phrase>" reasons.
func (f FitFailure) String() string {
	switch f {
	case Fits:
		return "fit"
	case FailCordoned:
		return "cordoned"
	case FailTaint:
		return "untolerated taint"
	case FailAffinity:
		return "node selector/affinity mismatch"
	case FailDomain:
		return "outside the topology domain"
	case FailPolicyGPUType:
		return "GPU type closed by the queue's policy"
	case FailPolicyCPUOnGPU:
		return "GPU node, which the queue's policy keeps CPU-only pods off"
	case FailGPUType:
		return "over the queue's GPU limit or quota on this node"
	case FailTooFewGPUs:
		return "too few GPUs in total"
	case FailGPUs:
		return "not enough free GPUs"
	case FailGPUShare:
		return "no GPU with enough free share or memory"
	case FailGPUMemoryUnknown:
		return "GPU memory unknown"
	case FailNoInventory:
		return "no GPU inventory for a GPU share (no fairway gpu-agent on the node)"
	case FailCPU:
		return "insufficient cpu"
	case FailMemory:
		return "insufficient memory"
	case FailPods:
		return "too many pods"
	case FailExtended:
		return "insufficient extended resource"
	case FailHostPort:
		return "host port in use"
	case FailDRANode:
		return "GPUs through DRA only (the pod asks for nvidia.com/gpu or a GPU share)"
	case FailDRANoDevices:
		return "no GPUs published through DRA (ResourceSlices)"
	case FailDRA:
		return "cannot allocate the pod's ResourceClaims"
	case FailDRAAllocated:
		return "a ResourceClaim of the pod is allocated on another node"
	}
	return "unknown"
}

// heldByOthers is what gangs other than g hold on n and g must leave alone. Seen after release,
// that is all they hold. Seen now, it is only the part that capacity being released on the node
// does not cover: a hold made for evicted pods' GPUs is met by those GPUs once they are free,
// and must not also keep the GPUs free today from anyone else.
func heldByOthers(n *snapshot.Node, g *snapshot.Gang, afterRelease bool) (res snapshot.NodeResources, whole int64) {
	if n.HeldWhole == 0 && n.Held.MilliCPU == 0 && n.Held.Memory == 0 && n.Held.Pods == 0 {
		return
	}
	mine, mineWhole := n.HeldFor(g)
	res.MilliCPU = n.Held.MilliCPU - mine.MilliCPU
	res.Memory = n.Held.Memory - mine.Memory
	res.Pods = n.Held.Pods - mine.Pods
	whole = n.HeldWhole - mineWhole
	if !afterRelease {
		res.MilliCPU = max(0, res.MilliCPU-n.Releasing.MilliCPU)
		res.Memory = max(0, res.Memory-n.Releasing.Memory)
		res.Pods = max(0, res.Pods-n.Releasing.Pods)
		whole = max(0, whole-(n.FreeWholeSlotsAfterRelease()-n.FreeWholeSlots()))
	}
	return res, whole
}

// FitsNode reports whether a pod's CPU, memory, pod slot, extended resources and host ports fit
// a node as gang g sees it: free now (afterRelease false) or once releasing pods are gone, minus
// what other gangs hold there. GPUs are PickGPUs' business, node constraints FilterClass'.
func FitsNode(n *snapshot.Node, req *snapshot.Request, g *snapshot.Gang, afterRelease bool) FitFailure {
	held, _ := heldByOthers(n, g, afterRelease)
	return fitsNode(n, req, held, afterRelease)
}

func fitsNode(n *snapshot.Node, req *snapshot.Request, held snapshot.NodeResources, afterRelease bool) FitFailure {
	a, u := &n.Allocatable, &n.Used
	var rCPU, rMem, rPods int64
	if afterRelease {
		rCPU, rMem, rPods = n.Releasing.MilliCPU, n.Releasing.Memory, n.Releasing.Pods
	}
	if req.MilliCPU > 0 && a.MilliCPU-u.MilliCPU+rCPU-held.MilliCPU < req.MilliCPU {
		return FailCPU
	}
	if req.Memory > 0 && a.Memory-u.Memory+rMem-held.Memory < req.Memory {
		return FailMemory
	}
	if a.Pods-u.Pods+rPods-held.Pods < 1 {
		return FailPods
	}
	for _, s := range req.Scalars {
		free := a.Scalars[s.Name] - u.Scalars[s.Name]
		if afterRelease {
			free += n.Releasing.Scalars[s.Name]
		}
		if free < s.Value {
			return FailExtended
		}
	}
	for _, p := range req.HostPorts {
		if !n.PortFree(p) {
			return FailHostPort
		}
	}
	return Fits
}
