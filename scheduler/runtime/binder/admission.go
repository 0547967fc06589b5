package binder

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The kubelet calls the share device plugin's Allocate with slot IDs only, not with the pod it
// is admitting (gpu-agent/shareplugin). The plugin answers for the share pod of its node that is
// bound and not admitted yet; with two such pods it has to guess which one the kubelet admits
// first, and the kubelet orders a batch of new pods by creation time, not by binding. A wrong
// guess gives each pod the other's GPU and memory limit. So, as HAMi does, the binder lets one
// share pod per node be bound and not yet admitted: the next waits until the kubelet has taken
// the previous one (it has container statuses, has left Pending, or is gone), or until
// Options.AdmissionWait has passed (a kubelet that never answers must not stop a node's shares
// for good; the agent reports a pod that got another GPU than the scheduler's).

// DefaultAdmissionWait is Options.AdmissionWait's default.
const DefaultAdmissionWait = 30 * time.Second

// admissionGate holds one lock per node for the share bindings there. A node's entry lives only
// while a binding holds or waits for its lock: nodes come and go (autoscaling), and a map of
// every node ever seen would only grow.
type admissionGate struct {
	mu    sync.Mutex
	nodes map[string]*nodeLock
}

// nodeLock is a node's lock: a one-slot channel, so that a waiter can give up when its context
// ends; users counts the bindings that hold or wait for it.
type nodeLock struct {
	slot  chan struct{}
	users int
}

// lock takes node's lock, or fails when ctx ends first.
func (g *admissionGate) lock(ctx context.Context, node string) error {
	g.mu.Lock()
	if g.nodes == nil {
		g.nodes = map[string]*nodeLock{}
	}
	l := g.nodes[node]
	if l == nil {
		l = &nodeLock{slot: make(chan struct{}, 1)}
		g.nodes[node] = l
	}
	l.users++
	g.mu.Unlock()
	select {
	case l.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		g.leave(node, l)
		return ctx.Err()
	}
}

// unlock gives node's lock back; the caller holds it.
func (g *admissionGate) unlock(node string) {
	g.mu.Lock()
	l := g.nodes[node]
	g.mu.Unlock()
	<-l.slot
	g.leave(node, l)
}

// leave drops one user of l, and node's entry with its last.
func (g *admissionGate) leave(node string, l *nodeLock) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l.users--
	if l.users == 0 {
		delete(g.nodes, node)
	}
}

// admitted reports whether the kubelet has taken pod p (nil: gone) past admission.
func admitted(p *corev1.Pod) bool {
	return p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending ||
		len(p.Status.ContainerStatuses) > 0 || len(p.Status.InitContainerStatuses) > 0
}

// waitAdmitted waits until the informer shows r's pod admitted by its node's kubelet, at most
// Options.AdmissionWait. Without a pod reader it does not wait.
func (b *Binder) waitAdmitted(ctx context.Context, r *Request) {
	if b.opts.Pods == nil {
		return
	}
	deadline := time.NewTimer(b.opts.AdmissionWait)
	defer deadline.Stop()
	tick := time.NewTicker(b.opts.AdmissionPoll)
	defer tick.Stop()
	for {
		if p := b.opts.Pods.Pod(r.Pod.Namespace, r.Pod.Name); admitted(p) || (p != nil && p.UID != r.UID) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			b.opts.Log.Info("The kubelet has not admitted a share pod; binding the node's next share anyway",
				"pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "node", r.Node, "waited", b.opts.AdmissionWait)
			return
		case <-tick.C:
		}
	}
}
