package view

import (
	"slices"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// Resources are the resources the console shows per queue.
var Resources = []string{"gpu", "cpu", "memory"}

// Model is a Snapshot digested for every page: built once per change, read by every request.
type Model struct {
	Now time.Time
	// Queues is the queue tree as `fairway queues --resources gpu,cpu,memory` shows it.
	Queues cli.QueueList
	// Nodes are the GPU nodes' grids, by name.
	Nodes []NodeGrid
	// Workloads are the workloads of every namespace, by namespace, kind and name.
	Workloads []Workload
	// Evictions are fairway's evictions, newest first.
	Evictions []Eviction

	snap *Snapshot
	// queueNamespaces lists the namespaces each queue serves (spec.namespaces).
	queueNamespaces map[string][]string
	queues          map[string]*fairwayv1.Queue
	namespaces      []string
	namespaceSet    map[string]struct{}
}

// Eviction is one of fairway's evictions of a pod, from the scheduler's event on it.
type Eviction struct {
	Time      time.Time
	Namespace string
	Pod       string
	// Reason is the v1alpha1.EvictionReason (Reclaim, Preempt, ...).
	Reason string
	// Note is the scheduler's explanation: why, and for whom.
	Note string
}

// Build digests a snapshot. The node grids are drawn while the workloads are built, on another
// CPU when the process has one: the first request after a change waits for the whole rebuild.
func Build(s *Snapshot) *Model {
	m := &Model{Now: s.Now, snap: s, queueNamespaces: make(map[string][]string, len(s.Queues)),
		queues: make(map[string]*fairwayv1.Queue, len(s.Queues))}
	var grids sync.WaitGroup
	grids.Go(func() { m.Nodes = buildGrids(s) })
	m.Queues = cli.BuildQueues(s.Queues, Resources)
	for i := range s.Queues {
		q := &s.Queues[i]
		m.queues[q.Name] = q
		m.queueNamespaces[q.Name] = q.Spec.Namespaces
	}
	m.Workloads = buildWorkloads(s)
	m.Evictions = evictions(s.Events)
	m.namespaces = nil
	m.namespaces = m.Namespaces()
	m.namespaceSet = make(map[string]struct{}, len(m.namespaces))
	for _, ns := range m.namespaces {
		m.namespaceSet[ns] = struct{}{}
	}
	grids.Wait()
	return m
}

// evictions reads fairway's evictions from the events on pods, newest first.
func evictions(events []eventsv1.Event) []Eviction {
	var out []Eviction
	for i := range events {
		ev := &events[i]
		if ev.Regarding.Kind != "Pod" || !fairwayv1.EvictionReason(ev.Reason).Known() {
			continue
		}
		out = append(out, Eviction{Time: cli.EventTime(ev), Namespace: ev.Regarding.Namespace, Pod: ev.Regarding.Name,
			Reason: ev.Reason, Note: ev.Note})
	}
	slices.SortStableFunc(out, func(a, b Eviction) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Pod, b.Namespace+"/"+b.Pod)
	})
	return out
}

// visibleQueues is the set of queues a user sees: all with Scope.Queues, else those serving a
// namespace they see, and their ancestors (the tree stays a tree).
func (m *Model) visibleQueues(sc Scope) map[string]bool {
	out := map[string]bool{}
	for name := range m.queues {
		if sc.Queues || sc.All {
			out[name] = true
			continue
		}
		if slices.ContainsFunc(m.queueNamespaces[name], sc.Sees) {
			for q, hops := name, 0; q != "" && !out[q] && hops < 64; hops++ {
				out[q] = true
				if m.queues[q] == nil {
					break
				}
				q = m.queues[q].Spec.Parent
			}
		}
	}
	return out
}

// Namespaces lists the namespaces there is something to show in: those of pods, PodGroups and
// events, and those queues serve. A restricted user's access is asked about these only.
func (m *Model) Namespaces() []string {
	if m.namespaces != nil {
		return m.namespaces
	}
	seen := map[string]bool{}
	for i := range m.snap.Pods {
		seen[m.snap.Pods[i].Namespace] = true
	}
	for i := range m.snap.PodGroups {
		seen[m.snap.PodGroups[i].Namespace] = true
	}
	for i := range m.snap.Events {
		seen[m.snap.Events[i].Regarding.Namespace] = true
	}
	for _, nss := range m.queueNamespaces {
		for _, ns := range nss {
			seen[ns] = true
		}
	}
	delete(seen, "")
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}
