package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PolicyLevel is one queue's policy as ResolvePolicy reads it: the queue's name (for messages)
// and its spec.policy (nil when it sets none).
type PolicyLevel struct {
	Queue  string
	Policy *QueuePolicy
}

// PolicyChain lists the policies of queue and of its ancestors, the queue first, for
// ResolvePolicy. get returns a queue's spec, nil when the queue does not exist; the walk stops
// there, or where the parents loop (the scheduler reports both on the queue).
func PolicyChain(queue string, get func(name string) (*QueueSpec, error)) ([]PolicyLevel, error) {
	var chain []PolicyLevel
	seen := map[string]bool{}
	for name := queue; name != "" && !seen[name]; {
		seen[name] = true
		spec, err := get(name)
		if err != nil {
			return nil, err
		}
		if spec == nil {
			break
		}
		chain = append(chain, PolicyLevel{Queue: name, Policy: spec.Policy})
		name = spec.Parent
	}
	return chain, nil
}

// EffectivePolicy is the policy that applies to one kind of work in one queue, each rule taken
// from the nearest queue that sets it (QueuePolicy). The webhook and the scheduler both resolve
// policies with ResolvePolicy, so a pod is refused at admission for exactly the rules the
// scheduler would place it by.
type EffectivePolicy struct {
	// Kind is the kind of work the policy was resolved for.
	Kind WorkloadKind
	// Set is true when some queue of the ancestry has a policy: CPUOnGPUNodes then defaults to
	// false. A queue tree without policies behaves as fairway did before policies existed.
	Set bool
	// GPUTypes is the allow-list, sorted; nil when every type is open.
	GPUTypes []string
	// DefaultGPU is added to pods that ask for no GPU; nil for none.
	DefaultGPU *DefaultGPU
	// MaxGPUsPerPod caps one pod's GPU (a share counts its fraction); nil for no cap.
	MaxGPUsPerPod *resource.Quantity
	// Borrowing is Allowed or Never (the default is Allowed).
	Borrowing BorrowingPolicy
	// CPUOnGPUNodes lets pods without GPUs onto GPU nodes.
	CPUOnGPUNodes bool
	// PriorityClass is the class pods of the kind get when they choose none: a queue's
	// priorityClassName, else DefaultPriorityClass of the kind ("" for the cluster's default).
	PriorityClass string
	// Preemptibility is what pods of the kind are when they choose neither it nor a class: a
	// queue's preemptibility, else DefaultPreemptibility of the kind ("" to follow priority).
	Preemptibility Preemptibility
	// From names, per rule (the JSON field name), the queue whose policy set it.
	From map[string]string
}

// Rule names, as EffectivePolicy.From and messages use them.
const (
	RuleGPUTypes      = "gpuTypes"
	RuleDefaultGPU    = "defaultGPU"
	RuleMaxGPUsPerPod = "maxGPUsPerPod"
	RuleBorrowing     = "borrowing"
	RuleCPUOnGPUNodes = "cpuOnGPUNodes"
	RulePriorityClass = "priorityClassName"
	RulePreemptible   = "preemptibility"
)

// ResolvePolicy resolves the policy of kind for a queue, given the policies of the queue and its
// ancestors, the queue first and the root last.
func ResolvePolicy(kind WorkloadKind, chain []PolicyLevel) EffectivePolicy {
	p := EffectivePolicy{Kind: kind, Borrowing: BorrowingAllowed,
		PriorityClass: DefaultPriorityClass(kind), Preemptibility: DefaultPreemptibility(kind)}
	set := func(rule, queue string) bool {
		if _, done := p.From[rule]; done {
			return false
		}
		if p.From == nil {
			p.From = map[string]string{}
		}
		p.From[rule] = queue
		return true
	}
	apply := func(queue string, r *PolicyRules) {
		if len(r.GPUTypes) > 0 && set(RuleGPUTypes, queue) {
			p.GPUTypes = slices.Sorted(slices.Values(r.GPUTypes))
		}
		if r.DefaultGPU != nil && set(RuleDefaultGPU, queue) {
			p.DefaultGPU = r.DefaultGPU
		}
		if r.MaxGPUsPerPod != nil && set(RuleMaxGPUsPerPod, queue) {
			q := r.MaxGPUsPerPod.DeepCopy()
			p.MaxGPUsPerPod = &q
		}
		if r.Borrowing != nil && *r.Borrowing != "" && set(RuleBorrowing, queue) {
			p.Borrowing = *r.Borrowing
		}
		if r.CPUOnGPUNodes != nil && set(RuleCPUOnGPUNodes, queue) {
			p.CPUOnGPUNodes = *r.CPUOnGPUNodes
		}
		if r.PriorityClassName != nil && *r.PriorityClassName != "" && set(RulePriorityClass, queue) {
			p.PriorityClass = *r.PriorityClassName
		}
		if r.Preemptibility != nil && *r.Preemptibility != "" && set(RulePreemptible, queue) {
			p.Preemptibility = *r.Preemptibility
		}
	}
	for _, l := range chain {
		if l.Policy == nil {
			continue
		}
		p.Set = true
		for i := range l.Policy.Workloads {
			if w := &l.Policy.Workloads[i]; w.Kind == kind {
				apply(l.Queue, &w.PolicyRules)
			}
		}
		apply(l.Queue, &l.Policy.PolicyRules)
	}
	if !p.Set {
		p.CPUOnGPUNodes = true
	}
	return p
}

// AllowsGPUType reports whether pods under the policy may use GPUs of type t (a node's
// fairway.dev/gpu-type; "" for a GPU node without one, which an allow-list closes).
func (p *EffectivePolicy) AllowsGPUType(t string) bool {
	if p.GPUTypes == nil {
		return true
	}
	_, ok := slices.BinarySearch(p.GPUTypes, t)
	return ok
}

// Describe is a rule's origin for messages: `queue team-a's policy for notebook pods`.
func (p *EffectivePolicy) Describe(rule string) string {
	return fmt.Sprintf("queue %s's policy for %s pods", p.From[rule], p.Kind)
}

// GPUTypesText lists the allowed types for messages ("T4, L4").
func (p *EffectivePolicy) GPUTypesText() string {
	return strings.Join(p.GPUTypes, ", ")
}

// KindOf is the pod's kind of work as the webhook wrote it (WorkloadKindAnnotation); KindPod
// when the pod has none or one fairway does not know.
func KindOf(pod *corev1.Pod) WorkloadKind {
	k := WorkloadKind(pod.Annotations[WorkloadKindAnnotation])
	if slices.Contains(WorkloadKinds, k) {
		return k
	}
	return KindPod
}
