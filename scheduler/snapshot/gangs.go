package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// This file keeps gangs true as their pods and PodGroups come and go.

// gangFor returns the pod's gang, creating it on first sight.
func (s *Snapshot) gangFor(info *PodInfo) *Gang {
	g := s.gangs[info.Gang]
	if g == nil {
		g = &Gang{Key: info.Gang, Created: info.Created, queuePos: -1, stalePos: -1, heldPos: -1, MinMember: 1}
		if spec := s.podGroups[types.NamespacedName{Namespace: info.Gang.Namespace, Name: info.Gang.Name}]; spec != nil && info.Gang.PodGroup {
			g.spec = spec
		}
		s.gangs[info.Gang] = g
	}
	h := &g.hints
	if h.queue == "" {
		h.queue = info.Queue
	}
	if h.minMember == 0 {
		h.minMember = info.MinMember
	}
	if h.topology == (Topology{}) {
		h.topology = info.Topology
	}
	if h.preemptibility == "" {
		h.preemptibility = info.Preemptibility
	}
	if h.subGroups == nil {
		h.subGroups = info.SubGroups
	}
	switch {
	case h.mixedWorkloads || g.Workload == info.Workload:
	case g.Workload == (v1alpha1.Workload{}):
		g.Workload = info.Workload
	default:
		// Pods of several objects (a JobSet's Jobs): none of them names the gang.
		g.Workload, h.mixedWorkloads = v1alpha1.Workload{}, true
	}
	if g.spec == nil && (g.Created.IsZero() || info.Created.Before(g.Created)) {
		g.Created = info.Created
	}
	return g
}

// refreshGang recomputes what a gang derives from its spec, hints and pods (queue, minimum,
// priority, preemptibility, topology). When the queue or preemptibility changes, every task
// already accounted (all but skip) moves its contribution.
func (s *Snapshot) refreshGang(g *Gang, skip *Task) {
	h := g.hints
	queue, minMember, topo, preempt, subs := h.queue, max(h.minMember, 1), h.topology, h.preemptibility, h.subGroups
	if sp := g.spec; sp != nil {
		if sp.Queue != "" {
			queue = sp.Queue
		}
		minMember = sp.MinMember
		if sp.Topology != (Topology{}) {
			topo = sp.Topology
		}
		if sp.Preemptibility != "" {
			preempt = string(sp.Preemptibility)
		}
		subs = sp.SubGroups
		if !sp.Created.IsZero() {
			g.Created = sp.Created
		}
	}
	prio := int32(0)
	for i, t := range g.Tasks {
		if i == 0 || t.Priority > prio {
			prio = t.Priority
		}
	}
	if sp := g.spec; sp != nil && sp.Priority != nil {
		prio = *sp.Priority
	}
	preemptible := prio < v1alpha1.NonPreemptiblePriority
	switch preempt {
	case string(v1alpha1.Preemptible):
		preemptible = true
	case string(v1alpha1.NonPreemptible):
		preemptible = false
	}
	if prio != g.Priority {
		// The per-priority count of the queue's evictable pods follows the gang's priority.
		for _, t := range g.Tasks {
			if t != skip {
				s.victimRef(t, -1)
			}
		}
		g.Priority = prio
		for _, t := range g.Tasks {
			if t != skip {
				s.victimRef(t, 1)
			}
		}
	}
	g.MinMember, g.Topology, g.SubGroups = minMember, topo, subs
	foreign := s.foreign(queue, g.Key.Namespace)
	if g.Queue != nil && g.Queue.Name == queue && g.Preemptible == preemptible && g.Foreign == foreign {
		return
	}
	for _, t := range g.Tasks {
		if t != skip {
			s.account(t, -1)
			s.victimRef(t, -1)
		}
	}
	heldGangHolds := slices.Clone(g.holds)
	s.clearHolds(g)
	oldQ := g.Queue
	if oldQ == nil || oldQ.Name != queue {
		if oldQ != nil {
			s.unlinkQueueGang(g)
			oldQ.gangs--
		}
		g.Queue = s.joinQueue(queue)
		if oldQ != nil && oldQ.gangs == 0 && (!oldQ.Defined || len(oldQ.Children) > 0) {
			s.relink()
		}
	}
	g.Preemptible = preemptible
	g.Foreign = foreign
	for _, h := range heldGangHolds {
		s.AddHold(g, h)
	}
	for _, t := range g.Tasks {
		if t != skip {
			s.account(t, 1)
			s.victimRef(t, 1)
		}
	}
}

// foreign says why queue refuses gangs of namespace ns, or "" when it takes them (or does not
// exist: such gangs wait on the queue's NotReady).
func (s *Snapshot) foreign(queue, ns string) string {
	q := s.queues[queue]
	if q == nil || !q.Defined || q.Serves(ns) {
		return ""
	}
	const shown = 5 // a selector may serve many namespaces
	served := "no namespace"
	switch n := len(q.Spec.Namespaces); {
	case n > shown:
		served = fmt.Sprintf("%s and %d more", strings.Join(q.Spec.Namespaces[:shown], ", "), n-shown)
	case n > 0:
		served = strings.Join(q.Spec.Namespaces, ", ")
	}
	return fmt.Sprintf("queue %s does not serve namespace %s (it serves %s); a pod may only name a queue whose spec.namespaces or spec.namespaceSelector takes its namespace", queue, ns, served)
}

// syncGang keeps the gang's membership of the queue's pending list and the stale list true, and
// the minimum a running gang must keep (Gang.Stale).
func (s *Snapshot) syncGang(g *Gang) {
	if q := g.Queue; q != nil {
		if len(g.Pending) > 0 && g.queuePos < 0 {
			g.queuePos = len(q.PendingGangs)
			q.PendingGangs = append(q.PendingGangs, g)
		} else if len(g.Pending) == 0 && g.queuePos >= 0 {
			s.unlinkQueueGang(g)
		}
	}
	// Only members the API server confirmed raise the minimum a running gang must keep: a
	// what-if that assumes pods and rolls back must not leave the gang owing them.
	if confirmed := g.Bound - g.Assumed + g.Succeeded; g.Bound == 0 || confirmed >= g.MinMember || g.runMin > g.MinMember {
		g.runMin = g.MinMember
	}
	if g.Stale() && g.stalePos < 0 {
		g.stalePos = len(s.stale)
		s.stale = append(s.stale, g)
	} else if !g.Stale() && g.stalePos >= 0 {
		s.stale = swapRemove(s.stale, g, func(g *Gang) *int { return &g.stalePos })
		g.StaleSince = time.Time{}
	}
}

func (s *Snapshot) unlinkQueueGang(g *Gang) {
	if g.queuePos < 0 {
		return
	}
	q := g.Queue
	q.PendingGangs = swapRemove(q.PendingGangs, g, func(g *Gang) *int { return &g.queuePos })
}

func (s *Snapshot) maybeDropGang(g *Gang) {
	if len(g.Tasks) > 0 || g.Succeeded > 0 {
		return
	}
	s.clearHolds(g)
	s.unlinkQueueGang(g)
	if g.stalePos >= 0 {
		g.Bound = 0
		s.syncGang(g)
	}
	delete(s.gangs, g.Key)
	if q := g.Queue; q != nil {
		q.gangs--
		if q.gangs == 0 && (!q.Defined || len(q.Children) > 0) {
			s.relink()
		}
	}
}

// UpsertPodGroup records a PodGroup; its spec overrides its pods' annotations.
func (s *Snapshot) UpsertPodGroup(pg *v1alpha1.PodGroup) error {
	if pg == nil || pg.Name == "" {
		return fmt.Errorf("upsert pod group: %w", ErrInvalidObject)
	}
	return s.UpsertGangSpec(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, GangSpecFromPodGroup(pg))
}

// UpsertGangSpec records what a PodGroup says about its gang, already converted: the runtime
// uses it to add what it resolves itself (GangSpec.Priority from the PodGroup's
// priorityClassName).
func (s *Snapshot) UpsertGangSpec(key types.NamespacedName, spec GangSpec) error {
	if key.Name == "" {
		return fmt.Errorf("upsert pod group: %w", ErrInvalidObject)
	}
	if old := s.podGroups[key]; old != nil && gangSpecEqual(*old, spec) {
		return nil
	}
	s.podGroups[key] = &spec
	if g := s.gangs[GangKey{Namespace: key.Namespace, Name: key.Name, PodGroup: true}]; g != nil {
		g.spec = &spec
		s.refreshGang(g, nil)
		s.syncGang(g)
	}
	return nil
}

// DeletePodGroup forgets a PodGroup; its pods' annotations apply again.
func (s *Snapshot) DeletePodGroup(namespace, name string) {
	delete(s.podGroups, types.NamespacedName{Namespace: namespace, Name: name})
	if g := s.gangs[GangKey{Namespace: namespace, Name: name, PodGroup: true}]; g != nil {
		g.spec = nil
		s.refreshGang(g, nil)
		s.syncGang(g)
	}
}

func gangSpecEqual(a, b GangSpec) bool {
	return a.MinMember == b.MinMember && a.Queue == b.Queue && a.Preemptibility == b.Preemptibility &&
		a.Topology == b.Topology && slices.Equal(a.SubGroups, b.SubGroups) && a.Created.Equal(b.Created) &&
		(a.Priority == nil) == (b.Priority == nil) && (a.Priority == nil || *a.Priority == *b.Priority)
}
