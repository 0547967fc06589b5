package snapshot

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ForeignPending counts the pending pods of one other scheduler (kube-scheduler's
// default-scheduler, most often) that ask for whole GPUs. fairway does not place them, but they
// compete for the GPUs of the same nodes: what fairway does not hold (Hold; the runtime's
// hold taint) goes to whichever scheduler binds first. The engine names them in the
// reasons of gangs that wait for GPUs.
type ForeignPending struct {
	Scheduler string
	Pods      int
	GPUs      int64
}

// foreignPending is the snapshot's record of them: only pods that ask for GPUs are kept, so
// its size is the number of such pods, whatever else waits in the cluster.
type foreignPending struct {
	pods  map[types.NamespacedName]foreignPod
	bySch map[string]*ForeignPending
	// list is ForeignPending's answer, rebuilt on the first call after a change.
	list  []ForeignPending
	dirty bool
}

type foreignPod struct {
	scheduler string
	gpus      int64
}

// UpsertForeignPending records a pending pod of scheduler that asks for gpus whole GPUs; a
// pod asking for none is forgotten (DeleteForeignPending).
func (s *Snapshot) UpsertForeignPending(key types.NamespacedName, scheduler string, gpus int64) {
	f := &s.foreignPods
	if gpus <= 0 {
		s.DeleteForeignPending(key)
		return
	}
	if old, ok := f.pods[key]; ok {
		if old.scheduler == scheduler && old.gpus == gpus {
			return
		}
		s.DeleteForeignPending(key)
	}
	if f.pods == nil {
		f.pods, f.bySch = map[types.NamespacedName]foreignPod{}, map[string]*ForeignPending{}
	}
	f.pods[key] = foreignPod{scheduler: scheduler, gpus: gpus}
	c := f.bySch[scheduler]
	if c == nil {
		c = &ForeignPending{Scheduler: scheduler}
		f.bySch[scheduler] = c
	}
	c.Pods++
	c.GPUs += gpus
	f.dirty = true
}

// DeleteForeignPending forgets a pending pod of another scheduler (bound, deleted, or asking for
// no GPU).
func (s *Snapshot) DeleteForeignPending(key types.NamespacedName) {
	f := &s.foreignPods
	old, ok := f.pods[key]
	if !ok {
		return
	}
	delete(f.pods, key)
	c := f.bySch[old.scheduler]
	c.Pods--
	c.GPUs -= old.gpus
	if c.Pods <= 0 {
		delete(f.bySch, old.scheduler)
	}
	f.dirty = true
}

// ForeignPending returns the pending pods of other schedulers that ask for GPUs, per scheduler,
// sorted by scheduler name. Owned by the snapshot.
func (s *Snapshot) ForeignPending() []ForeignPending {
	f := &s.foreignPods
	if f.dirty {
		f.list = f.list[:0]
		for _, c := range f.bySch {
			f.list = append(f.list, *c)
		}
		slices.SortFunc(f.list, func(a, b ForeignPending) int { return strings.Compare(a.Scheduler, b.Scheduler) })
		f.dirty = false
	}
	return f.list
}
