package podgroups

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Serving answers which queues serve a namespace, as the scheduler resolves it (spec.namespaces
// and spec.namespaceSelector, v1alpha1.NamespaceMatcher).
type Serving interface {
	// Serves reports whether queue exists and serves namespace ns.
	Serves(queue, ns string) bool
	// QueuesServing lists the queues that serve ns.
	QueuesServing(ns string) []string
}

// Follow decides whether a PodGroup the runtime derived must move to its namespace's queue, and
// returns the queue and priority class to write (ok false: keep the PodGroup as it is).
//
// A PodGroup's queue and priority class are written once, from its first pod, and win over its
// pods' labels: without this, a namespace an admin moves to another queue would strand its
// gangs, whose recreated pods (a Notebook's, a RayCluster's, a named gang's) name the new queue
// while the PodGroup still names the old one, which no longer serves the namespace; they would
// wait for ever with ForeignQueue. The rule:
//
//   - nothing moves while the PodGroup's queue still serves the namespace: a PodGroup is not
//     re-derived from whatever its pods say (a pod's labels do not move a gang another queue
//     still accepts);
//   - nothing moves while a pod of the gang still runs (bound to a node and not finished,
//     terminating pods included): it was admitted and is accounted under the old queue, and
//     moving the gang would charge the new queue for it, or let it escape the old queue's
//     reclaim. The PodGroup keeps the old queue until those pods are gone, then follows;
//   - then the gang follows its namespace: to the queue its newest pod names when that queue
//     serves the namespace (the webhook admitted that pod against the namespace's queue), else
//     to the one queue that serves the namespace, at once even when no pod is recreated yet;
//     with several queues serving it and no pod naming one, it stays (the snapshot's ForeignQueue
//     reason says why) until a pod names one.
//
// The priority class follows with the queue, from the newest pod that names the new queue, as
// Derive took both from one pod; it is kept when no pod names the queue. pods are all the pods of
// the gang, terminating ones included.
func Follow(pg *v1alpha1.PodGroup, pods []*corev1.Pod, serving Serving) (queue, class string, ok bool) {
	if pg.Spec.Queue == "" || serving.Serves(pg.Spec.Queue, pg.Namespace) {
		return "", "", false
	}
	if slices.ContainsFunc(pods, runs) {
		return "", "", false
	}
	newest := slices.Clone(pods)
	slices.SortStableFunc(newest, func(a, b *corev1.Pod) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	for _, p := range newest {
		if q := queueOf(p); p.DeletionTimestamp == nil && q != "" && serving.Serves(q, pg.Namespace) {
			return q, p.Spec.PriorityClassName, q != pg.Spec.Queue
		}
	}
	if qs := serving.QueuesServing(pg.Namespace); len(qs) == 1 {
		return qs[0], pg.Spec.PriorityClassName, true
	}
	return "", "", false
}

// runs: the pod is on a node and has not finished.
func runs(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
