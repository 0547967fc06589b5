package runtime

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
)

const (
	// sweepEvery is how often the loop looks for pods left on deleted nodes.
	sweepEvery = time.Second
	// sweepAgain is how long a node whose pods were handed to the evictor waits before it is
	// looked at again (if pods are still there then).
	sweepAgain = 5 * time.Second
)

// orphans deletes fairway's pods that were left on a deleted node for longer than the grace
// period, after confirming with the API server that the node is gone. Their gangs then run below
// their minimum (and are evicted whole by the engine after its grace period) or wait, and their
// owners re-create them. It is the loop's: one goroutine, no lock.
type orphans struct {
	inf     *cache.Informers
	api     kubernetes.Interface
	evictor *evictor.Evictor
	grace   time.Duration
	log     logr.Logger

	// since are nodes deleted while fairway's pods were bound to them, and since when.
	since     map[string]time.Time
	lastSweep time.Time
}

func newOrphans(inf *cache.Informers, api kubernetes.Interface, ev *evictor.Evictor, grace time.Duration, log logr.Logger) *orphans {
	return &orphans{inf: inf, api: api, evictor: ev, grace: grace, log: log, since: map[string]time.Time{}}
}

// nodeGone notes that node is missing at now, if fairway's pods are bound to it and it was not
// noted already.
func (o *orphans) nodeGone(node string, now time.Time) {
	if _, ok := o.since[node]; ok || len(o.inf.PodsByIndex(cache.IndexNode, node)) == 0 {
		return
	}
	o.since[node] = now
}

// nodeBack forgets node: it exists (again).
func (o *orphans) nodeBack(node string) { delete(o.since, node) }

// sweep hands the pods left on nodes gone for longer than the grace period to the evictor, at
// most once per sweepEvery.
func (o *orphans) sweep(ctx context.Context, now time.Time) {
	if now.Sub(o.lastSweep) < sweepEvery {
		return
	}
	o.lastSweep = now
	for node, since := range o.since {
		if now.Sub(since) < o.grace {
			continue
		}
		pods := o.inf.PodsByIndex(cache.IndexNode, node)
		if len(pods) == 0 {
			delete(o.since, node)
			continue
		}
		var reqs []evictor.Request
		for _, p := range pods {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			reqs = append(reqs, evictor.Request{
				Eviction: engine.Eviction{Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, Node: node,
					Reason: evictor.ReasonNodeDeleted, Message: "node " + node + " was deleted"},
				UID: p.UID, Queue: queueOf(p), Framework: frameworkOf(p), Kind: kindOf(p),
			})
		}
		if len(reqs) == 0 {
			continue
		}
		o.since[node] = now.Add(sweepAgain - o.grace)
		go func() {
			// Off the loop: one read to be sure the node is gone, not just missing from a cache.
			if _, err := o.api.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				o.log.Info("Deleting fairway's pods left on a deleted node", "node", node, "pods", len(reqs))
				o.evictor.Submit(reqs...)
			}
		}()
	}
}
