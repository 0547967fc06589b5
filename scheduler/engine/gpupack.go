package engine

import (
	"slices"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// PickGPUs chooses the GPUs of a node for a pod, or says why there are none:
//
//   - N whole GPUs take N empty GPUs (never one that holds a fraction), the lowest indexes first.
//   - A fraction (or an amount of GPU memory) goes to a GPU already shared by fractions when one
//     has room for both its share and its memory, the fullest such GPU first, so shared GPUs
//     fill up before a new one is opened; otherwise to an empty GPU. Shares on a GPU never sum
//     above 1000 milli-GPU nor memory above the GPU's memory.
//
// afterRelease counts releasing pods as gone; heldWhole is the number of empty GPUs held for
// other gangs, which the pod may not take. The returned assignment is what Snapshot.Assume takes.
func PickGPUs(n *snapshot.Node, req *snapshot.Request, afterRelease bool, heldWhole int64) (snapshot.Assignment, FitFailure) {
	return pickGPUs(n, req, afterRelease, heldWhole, 0)
}

// pickGPUs is PickGPUs leaving alone the slots other gangs' holds pin (bit i for slot i): a
// share neither joins nor opens one, and whole GPUs are taken from the others first (their
// number is already kept back by heldWhole).
func pickGPUs(n *snapshot.Node, req *snapshot.Request, afterRelease bool, heldWhole int64, pinned uint64) (snapshot.Assignment, FitFailure) {
	a := snapshot.Assignment{Shared: -1}
	if !req.GPU() {
		return a, Fits
	}
	floating := n.Floating
	if afterRelease {
		floating -= n.FloatingRel
	}
	empty := int64(0)
	for i := range n.Slots {
		if slotEmpty(&n.Slots[i], afterRelease) {
			empty++
		}
	}
	avail := empty - floating - heldWhole
	if req.WholeGPUs > 0 {
		if int64(len(n.Slots)) < req.WholeGPUs {
			return a, FailTooFewGPUs
		}
		if avail < req.WholeGPUs {
			return a, FailGPUs
		}
		a.Whole = make([]int32, 0, req.WholeGPUs)
		for pass := 0; pass < 2 && int64(len(a.Whole)) < req.WholeGPUs; pass++ {
			for i := range n.Slots {
				if isPinned(pinned, i) != (pass == 1) || !slotEmpty(&n.Slots[i], afterRelease) {
					continue
				}
				a.Whole = append(a.Whole, int32(i))
				if int64(len(a.Whole)) == req.WholeGPUs {
					break
				}
			}
		}
		if pinned != 0 {
			slices.Sort(a.Whole)
		}
		return a, Fits
	}
	if len(n.Slots) == 0 {
		return a, FailTooFewGPUs
	}
	best, bestUsed := -1, int64(-1)
	memUnknown := false
	for i := range n.Slots {
		g := &n.Slots[i]
		used, usedMem, owners, sharers := g.UsedMilli, g.UsedMemMiB, g.Owners, g.Sharers
		// A GPU held by a live reservation alone is joined rather than a new one opened; after
		// release it counts as empty (the reservation goes with its last fractional pod).
		reserved := !afterRelease && g.Reserved > g.RelReserved
		if afterRelease {
			used, usedMem, owners, sharers = used-g.RelMilli, usedMem-g.RelMemMiB, owners-g.RelOwners, sharers-g.RelSharers
		}
		if owners > 0 || (sharers == 0 && !reserved) || isPinned(pinned, i) {
			continue // held whole, or empty (empty GPUs come last), or freed for another gang
		}
		m := req.SharedMilli(g.MemoryMiB)
		if m < 0 {
			memUnknown = memUnknown || g.MemoryMiB <= 0
			continue
		}
		if used+m > snapshot.MilliPerGPU || (g.MemoryMiB > 0 && usedMem+req.SharedMemMiB(g.MemoryMiB) > g.MemoryMiB) {
			continue
		}
		if used > bestUsed {
			best, bestUsed = i, used
		}
	}
	if best < 0 && avail >= 1 {
		for i := range n.Slots {
			g := &n.Slots[i]
			if !slotEmpty(g, afterRelease) || isPinned(pinned, i) {
				continue
			}
			if req.SharedMilli(g.MemoryMiB) < 0 {
				memUnknown = memUnknown || g.MemoryMiB <= 0
				continue
			}
			best = i
			break
		}
	}
	if best < 0 {
		if memUnknown {
			return a, FailGPUMemoryUnknown
		}
		return a, FailGPUShare
	}
	g := &n.Slots[best]
	a.Shared = int32(best)
	a.Milli = req.SharedMilli(g.MemoryMiB)
	a.MemMiB = req.SharedMemMiB(g.MemoryMiB)
	return a, Fits
}

func isPinned(pinned uint64, i int) bool { return i < 64 && pinned&(1<<uint(i)) != 0 }

func slotEmpty(g *snapshot.GPUSlot, afterRelease bool) bool {
	if afterRelease {
		return g.EmptyAfterRelease()
	}
	return g.Empty()
}
