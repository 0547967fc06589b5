// Package volumebinder makes the volumes of the engine's placements true before their pods are
// bound, as kube-scheduler's VolumeBinding plugin does in Reserve/PreBind (AssumePodVolumes,
// BindPodVolumes): for each unbound claim of a WaitForFirstConsumer class it binds a matching
// static volume on the chosen node (PV spec.claimRef and pv.kubernetes.io/bound-by-controller,
// which the PV controller completes) or asks for provisioning there
// (volume.kubernetes.io/selected-node on the claim), then waits until every claim is bound, and
// only then hands the pods to the pod binder.
//
// The bindings of one gang from one cycle wait together: none of its pods is bound before every
// member's volumes are ready, and when one member's volumes fail, all of them go back to pending
// (their assumed placements, which hold their nodes meanwhile, are forgotten by the loop). Pods
// whose claims are all bound already go straight to the pod binder.
package volumebinder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Lookup reads the informer caches.
type Lookup interface {
	cache.VolumeLookup
	Node(name string) *corev1.Node
	Pod(namespace, name string) *corev1.Pod
}

// Options configure a Binder.
type Options struct {
	// Timeout bounds the wait for a gang's claims to be bound (a provisioner at work). 10
	// minutes when 0, kube-scheduler's default (bindTimeoutSeconds).
	Timeout time.Duration
	// Poll is how often the caches are read while waiting. 250ms when 0.
	Poll time.Duration
	// Observer is told of failures (metrics and the pod's FailedBinding event); optional.
	Observer binder.Observer
	// Waiting, optional, is told once per pod that it is placed and waits for its claims (the
	// "volumes pending" state a user sees as an event); note names the node and the claims.
	Waiting func(r *binder.Request, note string)
	Log     logr.Logger
}

// ReasonVolumeBinding is the failure reason given to the Observer.
const ReasonVolumeBinding binder.FailureReason = "VolumeBinding"

// Binder is the volume stage in front of the pod binder. It implements manager.Runnable
// (leader only).
type Binder struct {
	client kubernetes.Interface
	lookup Lookup
	next   func(...binder.Request)
	report func(cache.Outcome)
	opts   Options

	mu       sync.Mutex
	ctx      context.Context
	started  chan struct{}
	inFlight map[types.NamespacedName]bool
	// chosen are the static volumes groups in flight picked, by name: two claims placed in the
	// same moment never take the same volume (kube-scheduler's assume cache).
	chosen map[string]types.NamespacedName
}

// New returns a volume stage that writes through cs, reads lookup, hands ready bindings to next
// and reports failures to report.
func New(cs kubernetes.Interface, lookup Lookup, next func(...binder.Request), report func(cache.Outcome), opts Options) *Binder {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Binder{client: cs, lookup: lookup, next: next, report: report, opts: opts,
		started: make(chan struct{}), inFlight: map[types.NamespacedName]bool{}, chosen: map[string]types.NamespacedName{}}
}

// NeedLeaderElection is true: only the leader binds.
func (b *Binder) NeedLeaderElection() bool { return true }

// Start records the context the waits run under and blocks until it ends.
func (b *Binder) Start(ctx context.Context) error {
	b.mu.Lock()
	b.ctx = ctx
	close(b.started)
	b.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedsVolumes reports whether a pod has a claim that is not bound yet.
func NeedsVolumes(pod *corev1.Pod, vl cache.VolumeLookup) bool {
	if pod == nil || len(pod.Spec.Volumes) == 0 {
		return false
	}
	for _, name := range cache.ClaimNames(pod) {
		if c := vl.Claim(pod.Namespace, name); c == nil || c.Spec.VolumeName == "" {
			return true
		}
	}
	return false
}

// Submit takes one cycle's bindings; it never blocks. The bindings of gangs without unbound
// claims go to the pod binder at once; every other gang waits for its volumes as a whole.
func (b *Binder) Submit(reqs ...binder.Request) {
	// Most cycles bind no pod with an unbound claim: their bindings go on as they came, without
	// being grouped by gang (a map and a slice per gang, every cycle).
	if !slices.ContainsFunc(reqs, func(r binder.Request) bool {
		return NeedsVolumes(b.lookup.Pod(r.Pod.Namespace, r.Pod.Name), b.lookup)
	}) {
		if len(reqs) > 0 {
			b.next(reqs...)
		}
		return
	}
	var direct []binder.Request
	groups := map[snapshot.GangKey][]binder.Request{}
	var order []snapshot.GangKey
	needs := map[snapshot.GangKey]bool{}
	for _, r := range reqs {
		if _, ok := groups[r.Gang]; !ok {
			order = append(order, r.Gang)
		}
		groups[r.Gang] = append(groups[r.Gang], r)
		if NeedsVolumes(b.lookup.Pod(r.Pod.Namespace, r.Pod.Name), b.lookup) {
			needs[r.Gang] = true
		}
	}
	for _, g := range order {
		if !needs[g] {
			direct = append(direct, groups[g]...)
			continue
		}
		members := b.admit(groups[g])
		if len(members) > 0 {
			go b.run(members)
		}
	}
	if len(direct) > 0 {
		b.next(direct...)
	}
}

// admit marks a group's pods in flight, leaving out those already waiting (their first
// attempt's outcome settles them).
func (b *Binder) admit(reqs []binder.Request) []binder.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := reqs[:0:0]
	for _, r := range reqs {
		if b.inFlight[r.Pod] {
			b.opts.Log.V(1).Info("Volume binding already in flight; not submitting it again", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name))
			continue
		}
		b.inFlight[r.Pod] = true
		out = append(out, r)
	}
	return out
}

func (b *Binder) done(reqs []binder.Request, volumes []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range reqs {
		delete(b.inFlight, r.Pod)
	}
	for _, v := range volumes {
		delete(b.chosen, v)
	}
}

// claimRef is one claim a group waits for.
type claimRef struct {
	pod       *binder.Request
	namespace string
	name      string
	// provisioning is set when fairway asked for provisioning on the pod's node: the claim must
	// keep its selected-node until bound (a provisioner that gives up removes it) once the cache
	// has shown it (seen).
	provisioning, seen bool
}

func (b *Binder) run(reqs []binder.Request) {
	<-b.started
	b.mu.Lock()
	ctx := b.ctx
	b.mu.Unlock()
	begin := time.Now()
	var picked []string
	err := b.bindGroup(ctx, reqs, &picked)
	b.done(reqs, picked)
	if err == nil {
		if v := b.opts.Log.V(2); v.Enabled() {
			v.Info("Volumes ready; binding the pods", "gang", reqs[0].Gang.String(), "pods", len(reqs), "took", time.Since(begin).Round(time.Millisecond))
		}
		b.next(reqs...)
		return
	}
	if ctx.Err() == nil {
		b.opts.Log.Info("Volume binding failed; the pods go back to pending", "gang", reqs[0].Gang.String(), "pods", len(reqs), "err", err.Error())
	}
	for i := range reqs {
		r := &reqs[i]
		if b.opts.Observer != nil && ctx.Err() == nil {
			b.opts.Observer.Failed(r, ReasonVolumeBinding, err)
		}
		b.report(cache.Outcome{Kind: cache.BindFailed, Pod: r.Pod, UID: r.UID})
	}
}

// bindGroup makes the API writes of every member (AssumePodVolumes + BindPodVolumes), then waits
// until every claim is bound.
func (b *Binder) bindGroup(ctx context.Context, reqs []binder.Request, picked *[]string) error {
	var claims []*claimRef
	for i := range reqs {
		r := &reqs[i]
		pod := b.lookup.Pod(r.Pod.Namespace, r.Pod.Name)
		if pod == nil || pod.UID != r.UID {
			return fmt.Errorf("pod %s is gone", r.Pod)
		}
		node := b.lookup.Node(r.Node)
		if node == nil {
			return fmt.Errorf("node %s of pod %s is gone", r.Node, r.Pod)
		}
		for _, name := range cache.ClaimNames(pod) {
			ref := &claimRef{pod: r, namespace: pod.Namespace, name: name}
			prov, err := b.prepareClaim(ctx, pod, name, node, picked)
			if err != nil {
				return err
			}
			ref.provisioning = prov
			claims = append(claims, ref)
		}
	}
	if b.opts.Waiting != nil {
		waiting := map[*binder.Request][]string{}
		for _, c := range claims {
			if ok, _ := b.claimReady(c); !ok {
				waiting[c.pod] = append(waiting[c.pod], c.namespace+"/"+c.name)
			}
		}
		for i := range reqs {
			r := &reqs[i]
			if names := waiting[r]; len(names) > 0 {
				b.opts.Waiting(r, fmt.Sprintf("placed on node %s; waiting for PersistentVolumeClaim %s to be bound before binding", r.Node, strings.Join(names, ", ")))
			} else if len(waiting) > 0 {
				b.opts.Waiting(r, fmt.Sprintf("placed on node %s; waiting for the volumes of the other pods of its gang before binding", r.Node))
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, b.opts.Poll, true, func(context.Context) (bool, error) {
		for _, c := range claims {
			if p := b.lookup.Pod(c.pod.Pod.Namespace, c.pod.Pod.Name); p == nil || p.UID != c.pod.UID {
				return false, fmt.Errorf("pod %s was deleted while its volumes were prepared", c.pod.Pod)
			}
			ok, err := b.claimReady(c)
			if err != nil {
				return false, err
			}
			if !ok {
				last = fmt.Errorf("PersistentVolumeClaim %s/%s is not bound yet", c.namespace, c.name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) && last != nil {
		return fmt.Errorf("after %v: %w", b.opts.Timeout, last)
	}
	return err
}

// prepareClaim makes one claim of a placed pod bindable on node: nothing when it is bound or
// provisioning there already, else a static volume bound to it or provisioning asked for. It
// reports whether fairway relies on provisioning.
func (b *Binder) prepareClaim(ctx context.Context, pod *corev1.Pod, name string, node *corev1.Node, picked *[]string) (bool, error) {
	ref := pod.Namespace + "/" + name
	ci := cache.InspectClaim(pod.Namespace, name, b.lookup)
	switch ci.State {
	case cache.ClaimProblem:
		return false, errors.New(ci.Problem)
	case cache.ClaimBound:
		return false, nil
	case cache.ClaimSelectedNode:
		if sel := ci.Claim.Annotations[volumehelpers.AnnSelectedNode]; sel != node.Name {
			return false, fmt.Errorf("PersistentVolumeClaim %s is being provisioned on node %s, not %s", ref, sel, node.Name)
		}
		return true, nil
	}
	c := ci.Claim
	// A static volume first, as kube-scheduler does (findMatchingVolumes before
	// checkVolumeProvisions).
	b.mu.Lock()
	excluded := map[string]*corev1.PersistentVolume{}
	for v := range b.chosen {
		excluded[v] = nil
	}
	pv, err := volumehelpers.FindMatchingVolume(c, b.lookup.VolumesOfClass(volumehelpers.GetPersistentVolumeClaimClass(c)), node, excluded, false, true)
	if err == nil && pv != nil {
		b.chosen[pv.Name] = types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
		*picked = append(*picked, pv.Name)
	}
	b.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("PersistentVolumeClaim %s: %w", ref, err)
	}
	if pv != nil {
		return false, b.bindVolume(ctx, pv.Name, c)
	}
	if ci.Class.Provisioner == volumehelpers.NotSupportedProvisioner {
		return false, fmt.Errorf("PersistentVolumeClaim %s: no PersistentVolume of StorageClass %s is free on node %s", ref, ci.Class.Name, node.Name)
	}
	return true, b.selectNode(ctx, c, node.Name)
}

// bindVolume binds a static volume to the claim as the PV controller would (GetBindVolumeToClaim:
// claimRef with the claim's UID, bound-by-controller); the PV controller then binds the claim.
// It reads the full volume first: the cache holds a trimmed copy.
func (b *Binder) bindVolume(ctx context.Context, name string, c *corev1.PersistentVolumeClaim) error {
	ref := c.Namespace + "/" + c.Name
	pv, err := b.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading PersistentVolume %s for claim %s: %w", name, ref, err)
	}
	if pv.Spec.ClaimRef != nil && !volumehelpers.IsVolumeBoundToClaim(pv, c) {
		return fmt.Errorf("PersistentVolume %s chosen for claim %s was taken by %s/%s", name, ref, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
	}
	bound, dirty, err := volumehelpers.GetBindVolumeToClaim(pv, c)
	if err != nil {
		return fmt.Errorf("binding PersistentVolume %s to claim %s: %w", name, ref, err)
	}
	if !dirty {
		return nil
	}
	if _, err := b.client.CoreV1().PersistentVolumes().Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("binding PersistentVolume %s to claim %s: %w", name, ref, err)
	}
	b.opts.Log.V(1).Info("Bound a static volume to a claim", "volume", name, "claim", klog.KRef(c.Namespace, c.Name))
	return nil
}

// selectNode asks for the claim's provisioning on node: the selected-node annotation, written
// against the cached resourceVersion so that a claim changed since fails with a conflict.
func (b *Binder) selectNode(ctx context.Context, c *corev1.PersistentVolumeClaim, node string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}}}`, c.ResourceVersion, volumehelpers.AnnSelectedNode, node)
	_, err := b.client.CoreV1().PersistentVolumeClaims(c.Namespace).Patch(ctx, c.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("PersistentVolumeClaim %s/%s changed while fairway chose node %s for it: %w", c.Namespace, c.Name, node, err)
		}
		return fmt.Errorf("asking for the provisioning of PersistentVolumeClaim %s/%s on node %s: %w", c.Namespace, c.Name, node, err)
	}
	b.opts.Log.V(1).Info("Asked for the provisioning of a claim", "claim", klog.KRef(c.Namespace, c.Name), "node", node)
	return nil
}

// claimReady reports whether the claim is bound as kube-scheduler's checkBindings requires: the
// claim names its volume and carries bind-completed, and the volume names the claim. A claim
// whose provisioning fairway asked for and that lost its selected-node was given up by its
// provisioner: an error, so that the pod is placed again.
func (b *Binder) claimReady(c *claimRef) (bool, error) {
	ref := c.namespace + "/" + c.name
	claim := b.lookup.Claim(c.namespace, c.name)
	if claim == nil {
		return false, fmt.Errorf("PersistentVolumeClaim %s was deleted", ref)
	}
	if claim.Spec.VolumeName == "" {
		sel := claim.Annotations[volumehelpers.AnnSelectedNode]
		if c.provisioning && sel == c.pod.Node {
			c.seen = true
		}
		if c.provisioning && c.seen && sel != c.pod.Node {
			return false, fmt.Errorf("the provisioning of PersistentVolumeClaim %s on node %s was given up (selected-node removed)", ref, c.pod.Node)
		}
		return false, nil
	}
	if !metav1.HasAnnotation(claim.ObjectMeta, volumehelpers.AnnBindCompleted) {
		return false, nil
	}
	pv := b.lookup.Volume(claim.Spec.VolumeName)
	if pv == nil || !volumehelpers.IsVolumeBoundToClaim(pv, claim) {
		return false, nil
	}
	if node := b.lookup.Node(c.pod.Node); node != nil {
		if err := volumehelpers.CheckNodeAffinity(pv, node.Labels); err != nil {
			return false, fmt.Errorf("PersistentVolume %s of claim %s cannot be used on node %s: %w", pv.Name, ref, c.pod.Node, err)
		}
	}
	return true, nil
}
