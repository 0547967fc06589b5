package view

import (
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/cli"
)

// Overview is the first page: GPUs by type, queues against their guarantees, what waits and
// why, and fairway's recent evictions, in one screen.
type Overview struct {
	// GPUTypes are nil for a user who may not list nodes.
	GPUTypes  []GPUTypeTotals
	Queues    []cli.QueueView
	Waiting   []*Workload
	Evictions []Eviction
	// Running and WaitingCount count the user's workloads that run and wait.
	Running, WaitingCount int
}

const (
	overviewWaiting   = 12
	overviewEvictions = 8
)

// Overview cuts the overview for a user.
func (m *Model) Overview(sc Scope) Overview {
	var o Overview
	if sc.Nodes || sc.All {
		o.GPUTypes = gpuTypes(m.Nodes)
	}
	o.Queues = m.QueuesFor(sc).Items
	for _, w := range m.WorkloadsFor(sc, "") {
		switch {
		case w.Waiting:
			o.WaitingCount++
			o.Waiting = append(o.Waiting, w)
		case w.State == stateRunning || w.State == stateBeingEvicted:
			o.Running++
		}
	}
	slices.SortStableFunc(o.Waiting, func(a, b *Workload) int { return int(b.WaitSeconds - a.WaitSeconds) })
	o.Waiting = o.Waiting[:min(len(o.Waiting), overviewWaiting)]
	o.Evictions = m.EvictionsFor(sc, overviewEvictions)
	return o
}

// QueuesFor is the queue tree a user sees.
func (m *Model) QueuesFor(sc Scope) cli.QueueList {
	if sc.All || sc.Queues {
		return m.Queues
	}
	vis := m.visibleQueues(sc)
	out := m.Queues
	out.Items = nil
	for _, q := range m.Queues.Items {
		if vis[q.Name] {
			out.Items = append(out.Items, q)
		}
	}
	return out
}

// QueueNamespaces lists the namespaces a queue serves that the user sees.
func (m *Model) QueueNamespaces(sc Scope, queue string) []string {
	var out []string
	for _, ns := range m.queueNamespaces[queue] {
		if sc.Sees(ns) {
			out = append(out, ns)
		}
	}
	return out
}

// Policy is the resolved policy of a queue, as `fairway policy QUEUE` shows it.
func (m *Model) Policy(queue string) cli.PolicyView { return cli.BuildPolicy(queue, m.queues) }

// WorkloadsFor lists the workloads a user sees; query, when set, keeps those whose namespace,
// kind, name or queue contains it.
func (m *Model) WorkloadsFor(sc Scope, query string) []*Workload {
	query = strings.ToLower(strings.TrimSpace(query))
	var out []*Workload
	for i := range m.Workloads {
		w := &m.Workloads[i]
		if !sc.Sees(w.Namespace) {
			continue
		}
		if query != "" && !strings.Contains(strings.ToLower(w.Namespace+"/"+w.Name+" "+w.Kind+" "+w.Queue), query) {
			continue
		}
		out = append(out, m.redactWorkload(sc, w))
	}
	return out
}

// WorkloadSection is one kind of workload on the Workloads page.
type WorkloadSection struct {
	Kind  string
	Items []*Workload
}

// Sections groups workloads by kind, in KindOrder.
func Sections(ws []*Workload) []WorkloadSection {
	var out []WorkloadSection
	for _, k := range KindOrder {
		var s WorkloadSection
		s.Kind = k
		for _, w := range ws {
			if w.Kind == k {
				s.Items = append(s.Items, w)
			}
		}
		if len(s.Items) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// NodesFor is the Nodes page of a user: nil for one who may not list nodes.
func (m *Model) NodesFor(sc Scope) []NodeGrid {
	if !sc.Nodes && !sc.All {
		return nil
	}
	return CutGrids(m.Nodes, sc)
}

// EvictionsFor lists the newest n evictions of pods the user sees (all with n <= 0).
func (m *Model) EvictionsFor(sc Scope, n int) []Eviction {
	var out []Eviction
	for _, e := range m.Evictions {
		if n > 0 && len(out) == n {
			break
		}
		if sc.Sees(e.Namespace) {
			e.Note = m.redact(sc, e.Note)
			out = append(out, e)
		}
	}
	return out
}
