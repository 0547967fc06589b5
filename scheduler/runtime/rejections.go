package runtime

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Kubelet rejections. The kubelet admits a pod fairway bound only if the node really has room
// for it; when it has not (a device plugin reports fewer healthy GPUs than the node's
// allocatable says, a pod fairway does not see holds them, its affinity no longer matches) it
// fails the pod at once: phase Failed, status.reason naming the cause (kubelet's
// lifecycle.PodAdmitResult: "OutOfnvidia.com/gpu", "OutOfcpu", "UnexpectedAdmissionError",
// "NodeAffinity", ...). A failed pod holds nothing, so the snapshot would see the node as free as
// before and place the controller's replacement there again: a loop of rejected binds.
//
// rejections breaks the loop. For a rejection for a resource ("OutOf<resource>") the snapshot
// takes the node's allocatable of that resource to be what its pods used when the kubelet
// refused more: nothing more of it is placed there, and what pods free later is free again. For
// any other admission failure the node is taken as cordoned. Either correction lasts a backoff
// (rejectBackoff, doubling with each rejection on the same node and resource up to
// maxRejectBackoff) or until the node's own allocatable of the resource changes, whichever comes
// first; then fairway tries the node again. The pod itself is not fairway's to bring back: its
// controller makes a new one (a ReplicaSet, a Job within its backoffLimit) and fairway places
// that one like any pending pod; a bare pod gets an event saying it was rejected and will not
// come back.
type rejections struct {
	nodes map[string]*nodeRejections
	// seen are the pods already counted, so that the Failed pod's later updates do not count
	// again; entries go after seenFor.
	seen map[types.UID]time.Time
	// quiet, while the snapshot is rebuilt, only marks rejected pods seen.
	quiet bool
}

// rejectBackoff is how long a node stays corrected after its first rejection for a resource;
// maxRejectBackoff bounds the doubling; a node rejects afresh (the backoff starts again) once
// its last rejection for the resource is older than rejectForget.
const (
	rejectBackoff    = 30 * time.Second
	maxRejectBackoff = 10 * time.Minute
	rejectForget     = 30 * time.Minute
	seenFor          = time.Hour
)

// ReasonKubeletRejected is the event reason on a pod the kubelet rejected.
const ReasonKubeletRejected = "KubeletRejected"

// kubeletOutOfPrefix starts the status.reason of a pod the kubelet refused for lack of a
// resource ("OutOf" + the resource name, kubelet's lifecycle.InsufficientResourceError).
const kubeletOutOfPrefix = "OutOf"

// kubeletAdmissionReasons are the other status.reasons with which the kubelet fails a pod at
// admission because of the node (kubelet lifecycle predicate and device manager).
var kubeletAdmissionReasons = map[string]bool{
	"UnexpectedAdmissionError": true, // the device manager could not allocate (GPUs gone)
	"NodeAffinity":             true,
	"NodeName":                 true,
	"NodePorts":                true,
	"InvalidNodeInfo":          true,
}

// wholeNode is the key of a correction that is not about one resource: the node is cordoned.
const wholeNode corev1.ResourceName = ""

type nodeRejections struct {
	byResource map[corev1.ResourceName]*correction
}

// correction is what the snapshot is told about a node after a rejection.
type correction struct {
	strikes int
	last    time.Time
	until   time.Time
	// allocatable is the node's own allocatable of the resource when the kubelet refused (to
	// notice that it changed); used is what its pods used then, the corrected allocatable.
	allocatable resource.Quantity
	used        resource.Quantity
}

func newRejections() *rejections {
	return &rejections{nodes: map[string]*nodeRejections{}, seen: map[types.UID]time.Time{}}
}

// Rejection describes a pod the kubelet refused, as observe found it.
type Rejection struct {
	Node     string
	Reason   string
	Message  string
	Resource corev1.ResourceName // "" when the reason is not a resource
	Backoff  time.Duration
}

// kubeletRejection reads why the kubelet refused a pod of fairway's, if it did.
func kubeletRejection(pod *corev1.Pod) (corev1.ResourceName, bool) {
	if pod.Spec.SchedulerName != v1alpha1.SchedulerName || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodFailed {
		return "", false
	}
	r := pod.Status.Reason
	if res, ok := strings.CutPrefix(r, kubeletOutOfPrefix); ok && res != "" {
		return corev1.ResourceName(res), true
	}
	return wholeNode, kubeletAdmissionReasons[r]
}

// observe records pod if the kubelet rejected it and it was not counted yet. n is the node's
// object and sn the snapshot's node (what its pods use), either nil when unknown. It returns
// the rejection, or ok false.
func (r *rejections) observe(pod *corev1.Pod, n *corev1.Node, sn *snapshot.Node, now time.Time) (Rejection, bool) {
	res, rejected := kubeletRejection(pod)
	if !rejected {
		return Rejection{}, false
	}
	if _, dup := r.seen[pod.UID]; dup {
		return Rejection{}, false
	}
	r.seen[pod.UID] = now
	if r.quiet {
		return Rejection{}, false
	}
	for uid, at := range r.seen {
		if now.Sub(at) > seenFor {
			delete(r.seen, uid)
		}
	}
	node := pod.Spec.NodeName
	nr := r.nodes[node]
	if nr == nil {
		nr = &nodeRejections{byResource: map[corev1.ResourceName]*correction{}}
		r.nodes[node] = nr
	}
	c := nr.byResource[res]
	if c == nil || now.Sub(c.last) > rejectForget {
		c = &correction{}
		nr.byResource[res] = c
	}
	c.strikes++
	c.last = now
	backoff := rejectBackoff << min(c.strikes-1, 10)
	backoff = min(backoff, maxRejectBackoff)
	c.until = now.Add(backoff)
	if res != wholeNode && n != nil {
		c.allocatable = n.Status.Allocatable[res]
		c.used = usedOn(sn, res, c.allocatable)
	}
	return Rejection{Node: node, Reason: pod.Status.Reason, Message: pod.Status.Message, Resource: res, Backoff: backoff}, true
}

// adjust returns the node object the snapshot should read: n itself when no correction holds,
// else a copy with the corrections applied. Corrections that expired or whose resource's
// allocatable changed are dropped.
func (r *rejections) adjust(n *corev1.Node, now time.Time) *corev1.Node {
	nr := r.nodes[n.Name]
	if nr == nil {
		return n
	}
	var out *corev1.Node
	for res, c := range nr.byResource {
		if !now.Before(c.until) {
			continue // kept (for the doubling) until rejectForget, but no longer applied
		}
		if res == wholeNode {
			if out == nil {
				out = n.DeepCopy()
			}
			out.Spec.Unschedulable = true
			continue
		}
		alloc, ok := n.Status.Allocatable[res]
		if !ok || alloc.Cmp(c.allocatable) != 0 {
			c.until = now // the node's own figure changed: believe it again
			continue
		}
		if out == nil {
			out = n.DeepCopy()
		}
		out.Status.Allocatable[res] = c.used
	}
	for res, c := range nr.byResource {
		if now.Sub(c.last) > rejectForget {
			delete(nr.byResource, res)
		}
	}
	if len(nr.byResource) == 0 {
		delete(r.nodes, n.Name)
	}
	if out == nil {
		return n
	}
	return out
}

// expired returns the nodes with a correction that ended since the last call, so that the
// snapshot reads them again; it is called every cycle and costs nothing when nothing is corrected.
func (r *rejections) expired(now time.Time, into []string) []string {
	for name, nr := range r.nodes {
		for _, c := range nr.byResource {
			if !c.until.IsZero() && !now.Before(c.until) {
				into = append(into, name)
				c.until = time.Time{} // told once
				break
			}
		}
	}
	return into
}

// usedOn is what the pods on the snapshot's node use of res: the node's figure the kubelet
// found too small. A GPU counts as used when any pod holds it, whole or shared (the kubelet gave
// it to a reservation pod). It is never above the node's allocatable alloc.
func usedOn(n *snapshot.Node, res corev1.ResourceName, alloc resource.Quantity) resource.Quantity {
	var used resource.Quantity
	if n == nil {
		return *resource.NewQuantity(0, alloc.Format)
	}
	switch res {
	case corev1.ResourceCPU:
		used = *resource.NewMilliQuantity(n.Used.MilliCPU, resource.DecimalSI)
	case corev1.ResourceMemory:
		used = *resource.NewQuantity(n.Used.Memory, resource.BinarySI)
	case corev1.ResourcePods:
		used = *resource.NewQuantity(n.Used.Pods, resource.DecimalSI)
	case v1alpha1.ResourceGPU:
		busy := n.Floating
		for i := range n.Slots {
			s := &n.Slots[i]
			if s.Owners > 0 || s.Sharers > 0 || s.Reserved > 0 || s.Loans > 0 {
				busy++
			}
		}
		used = *resource.NewQuantity(busy, resource.DecimalSI)
	default:
		used = *resource.NewQuantity(n.Used.Scalars[res], resource.DecimalSI)
	}
	if used.Cmp(alloc) > 0 {
		return alloc.DeepCopy()
	}
	return used
}

// kubeletRejected records a failed pod the kubelet rejected, has the snapshot read its node
// with the correction, and tells the pod why.
func (l *loop) kubeletRejected(p *corev1.Pod) {
	now := l.clock.Now()
	rj, ok := l.rejects.observe(p, l.rt.inf.Node(p.Spec.NodeName), l.snap.Node(p.Spec.NodeName), now)
	if !ok {
		return
	}
	l.apply(cache.Key{Kind: cache.KindNode, Name: rj.Node})
	recreated := metav1.GetControllerOf(p) != nil
	l.log.Info("The kubelet rejected a pod fairway bound; its node is backed off", "pod", klog.KObj(p), "node", rj.Node,
		"reason", rj.Reason, "resource", rj.Resource, "backoff", rj.Backoff, "controlled", recreated)
	l.rt.metrics.BindingErrors.WithLabelValues(ReasonKubeletRejected).Inc()
	what := "fairway places no pod there"
	if rj.Resource != wholeNode {
		what = "fairway takes the node to have no more " + string(rj.Resource) + " than its pods use, and places no more of it there"
	}
	next := "its controller makes a new pod, which fairway places elsewhere meanwhile"
	if !recreated {
		next = "nothing recreates a pod without a controller: create it again"
	}
	l.rt.events.rec.Eventf(podRef(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p.UID), nil, corev1.EventTypeWarning,
		ReasonKubeletRejected, "Schedule", "The kubelet of node %s rejected the pod (%s: %s); %s for %s or until the node's allocatable changes; %s",
		rj.Node, rj.Reason, rj.Message, what, rj.Backoff, next)
}
