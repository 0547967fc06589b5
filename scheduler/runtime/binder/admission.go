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

// admissionGate holds one lock per node for the share bindings there.
type admissionGate struct {
	mu    sync.Mutex
	nodes map[string]chan struct{}
}

// lock takes node's lock, or fails when ctx ends first.
func (g *admissionGate) lock(ctx context.Context, node string) error {
	g.mu.Lock()
	if g.nodes == nil {
		g.nodes = map[string]chan struct{}{}
	}
	ch := g.nodes[node]
	if ch == nil {
		ch = make(chan struct{}, 1)
		g.nodes[node] = ch
	}
	g.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *admissionGate) unlock(node string) {
	g.mu.Lock()
	ch := g.nodes[node]
	g.mu.Unlock()
	<-ch
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
