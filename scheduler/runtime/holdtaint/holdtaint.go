// Package holdtaint keeps other schedulers off the nodes where fairway holds capacity for a
// gang, with the hold taint, the NoSchedule taint v1alpha1.HoldTaintKey (docs/coexistence.md).
//
// The engine's holds live in fairway's memory: kube-scheduler does not see them, and it honours
// the nominatedNodeName only of pods of its own scheduling queue, so room fairway frees by
// evictions would go to the first pod kube-scheduler tries there, and the victims would have
// been evicted for nothing. A taint is what every scheduler honours. fairway's engine treats it
// as tolerated by its own pods (the holds arbitrate between its gangs).
//
// The Reconciler is level-driven: the loop sets, after each cycle, which nodes should carry the
// taint (Set), and a worker makes each node's taint match, from the node informer's cache,
// writing only when it differs. The evictor taints a node itself (Ensure) before it evicts a pod
// to free room there, so that the room is never free and untainted. A new leader starts from the
// holds of its own snapshot (none), so the taints a previous leader left are removed by its
// first cycles: no taint outlives the scheduler that needs it by more than a restart.
//
// Versions before the rename of the taint wrote it as v1alpha1.RetiredHoldTaintKey. The
// Reconciler removes that key wherever it syncs a node, so a node an older scheduler left
// tainted is cleaned once after an upgrade (the loop asks for a sync of every node that carries
// it), and a held node ends with the current key only.
package holdtaint

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/keymutex"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// cacheLag is how long a write of the reconciler is trusted over a node cache that does not show
// it yet: the informer's event follows the write within milliseconds, and a second write in the
// meantime would only conflict.
const cacheLag = 10 * time.Second

// Reconciler taints and untaints nodes. It implements manager.Runnable (leader only).
type Reconciler struct {
	client kubernetes.Interface
	// node reads a node from the informer cache (nil when unknown).
	node  func(name string) *corev1.Node
	log   logr.Logger
	queue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// want is the taint value each held node should carry; a node not in it should carry
	// none.
	want map[string]string
	// wrote is the state each node was last written to, and when (see cacheLag).
	wrote map[string]written

	// nodeLock serializes the syncs of one node: the evictors of several pods of a node and the
	// worker would otherwise write it at once, all but one in conflict.
	nodeLock keymutex.KeyMutex

	writes atomic.Int64
}

type written struct {
	value   string
	tainted bool
	at      time.Time
}

// New returns a reconciler patching nodes through cs, reading them with node (the informer
// cache).
func New(cs kubernetes.Interface, node func(string) *corev1.Node, log logr.Logger) *Reconciler {
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &Reconciler{client: cs, node: node, log: log, want: map[string]string{}, wrote: map[string]written{}, nodeLock: keymutex.NewHashed(0),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "holdtaints"})}
}

// NeedLeaderElection is true: only the leader holds capacity.
func (r *Reconciler) NeedLeaderElection() bool { return true }

// Writes is the number of node writes (taints added and removed) so far.
func (r *Reconciler) Writes() int64 { return r.writes.Load() }

// Tainted reports whether a node carries fairway's hold taint, and its value. The retired key
// does not count: see Retired.
func Tainted(n *corev1.Node) (string, bool) {
	if n == nil {
		return "", false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.HoldTaintKey {
			return t.Value, true
		}
	}
	return "", false
}

// Retired reports whether a node carries the hold taint under the key of older versions
// (v1alpha1.RetiredHoldTaintKey), which a sync removes.
func Retired(n *corev1.Node) bool {
	return n != nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.RetiredHoldTaintKey })
}

// Set makes want (node -> taint value) the nodes to taint, and queues the nodes named in sync
// for a check: those whose taint, as the loop last saw it, differs from what they should have.
// want is the reconciler's afterwards.
func (r *Reconciler) Set(want map[string]string, sync ...string) {
	r.mu.Lock()
	r.want = want
	r.mu.Unlock()
	for _, n := range sync {
		r.queue.Add(n)
	}
}

// Ensure taints node for the gang whose taint value is value, now: it returns once the API
// server has the taint (or the node had it already). The evictor calls it before an eviction
// that frees room for the gang.
func (r *Reconciler) Ensure(ctx context.Context, node, value string) error {
	r.mu.Lock()
	if _, ok := r.want[node]; !ok {
		r.want[node] = value
	}
	r.mu.Unlock()
	return r.sync(ctx, node)
}

// Start runs the worker until ctx ends.
func (r *Reconciler) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		node, quit := r.queue.Get()
		if quit {
			return nil
		}
		if err := r.sync(ctx, node); err != nil && ctx.Err() == nil {
			r.log.Error(err, "Hold taint of a node not updated; retrying", "node", node)
			r.queue.AddRateLimited(node)
		} else {
			r.queue.Forget(node)
		}
		r.queue.Done(node)
	}
}

// sync makes the node's taint what want says, and removes the retired key. It writes only when the node differs, with the
// node's resourceVersion as precondition; on a conflict it reads the node again.
func (r *Reconciler) sync(ctx context.Context, name string) error {
	r.nodeLock.LockKey(name)
	defer func() { _ = r.nodeLock.UnlockKey(name) }()
	r.mu.Lock()
	value, taint := r.want[name]
	w, wrote := r.wrote[name]
	r.mu.Unlock()
	if wrote && w.tainted == taint && (!taint || w.value == value) && time.Since(w.at) < cacheLag {
		n := r.node(name)
		if v, has := Tainted(n); has == taint && (!taint || v == value) && !Retired(n) {
			r.mu.Lock()
			delete(r.wrote, name) // the cache caught up
			r.mu.Unlock()
		}
		return nil
	}
	n := r.node(name)
	first := true
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !first || n == nil {
			var err error
			if n, err = r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		taints, changed := withHoldTaint(n.Spec.Taints, value, taint)
		if !changed {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return err
		}
		if _, err := r.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		r.writes.Add(1)
		r.mu.Lock()
		r.wrote[name] = written{value: value, tainted: taint, at: time.Now()}
		r.mu.Unlock()
		if taint {
			r.log.V(1).Info("Node tainted for a gang's hold", "node", name, "gang", value)
		} else {
			r.log.V(1).Info("Hold taint removed", "node", name)
		}
		return nil
	})
	switch {
	case apierrors.IsNotFound(err):
		r.mu.Lock()
		delete(r.wrote, name)
		r.mu.Unlock()
		return nil // the node is gone, and its taint with it
	case err != nil:
		return fmt.Errorf("updating the hold taint of node %s: %w", name, err)
	}
	return nil
}

// withHoldTaint returns taints with fairway's hold taint set to value (taint) or removed, and
// whether that changed anything. The retired key is removed either way. The other taints keep
// their order.
func withHoldTaint(taints []corev1.Taint, value string, taint bool) ([]corev1.Taint, bool) {
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == v1alpha1.RetiredHoldTaintKey })
	changed := len(out) != len(taints)
	i := slices.IndexFunc(out, func(t corev1.Taint) bool { return t.Key == v1alpha1.HoldTaintKey })
	switch {
	case taint && i >= 0 && out[i].Effect == corev1.TaintEffectNoSchedule:
		// tainted already, for this gang or another: the holds decide
	case taint:
		if i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
		out, changed = append(out, corev1.Taint{Key: v1alpha1.HoldTaintKey, Value: value, Effect: corev1.TaintEffectNoSchedule}), true
	case i >= 0:
		out, changed = slices.Delete(out, i, i+1), true
	}
	if !changed {
		return taints, false
	}
	if out == nil {
		out = []corev1.Taint{}
	}
	return out, true
}
