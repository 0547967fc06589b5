package view

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Snapshot is every object the console shows, as its cache holds them. The objects are shared
// with the cache: nothing may modify them.
type Snapshot struct {
	Queues          []fairwayv1.Queue
	PodGroups       []fairwayv1.PodGroup
	Pods            []corev1.Pod
	Nodes           []corev1.Node
	PriorityClasses []schedulingv1.PriorityClass
	// Events are the scheduler's events (its evictions are read from them).
	Events []eventsv1.Event
	// Now is the clock the snapshot is read at: ages and waits count to it.
	Now time.Time
}

// Scope is what one user may see: the namespaces whose pods they may list, and whether they
// may list nodes and queues. A zero Scope sees nothing.
type Scope struct {
	// All is true for a user who may list pods in every namespace (a cluster administrator):
	// nothing is cut.
	All bool
	// Namespaces are the namespaces the user may list pods in, when not All.
	Namespaces map[string]bool
	// Nodes is true when the user may list nodes: the Nodes page and the GPU totals. Pods of
	// namespaces the user does not see are shown on a node without a name.
	Nodes bool
	// Queues is true when the user may list Queues: the whole queue tree. Otherwise only the
	// queues that serve the user's namespaces are shown, with their ancestors.
	Queues bool
}

// Sees reports whether the user may see the pods of namespace ns.
func (s Scope) Sees(ns string) bool { return s.All || s.Namespaces[ns] }

// Everything is the Scope of a cluster administrator.
func Everything() Scope { return Scope{All: true, Nodes: true, Queues: true} }
