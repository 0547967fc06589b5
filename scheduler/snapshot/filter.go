package snapshot

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
)

// FilterClass is a set of node constraints (node selector, required node affinity, tolerations)
// shared by every pod that carries the same ones. The snapshot evaluates a class once per node
// and keeps the answer as a bitset, updated when a node changes, so that finding a node for a pod
// is a walk over set bits rather than a selector match per node.
type FilterClass struct {
	key          string
	NodeSelector map[string]string
	NodeAffinity *corev1.NodeAffinity
	Tolerations  []corev1.Toleration
	// PinnedType is the GPU type the class's selector or affinity requires, when it names exactly
	// one; the pod's demand is then counted in that type's queue dimension.
	PinnedType string
	// Unsupported is set when the pods use a constraint the engine does not evaluate.
	Unsupported *Problem

	required  nodeaffinity.RequiredNodeAffinity
	refs      int
	bits      bitset.Set
	bitsValid bool
}

// FitCode is why a node does not fit a pod; FitOK when it does.
type FitCode uint8

// Fit codes, most specific first.
const (
	FitOK FitCode = iota
	FitUnschedulable
	FitTaint
	FitAffinity
)

// String is the human text of the code, used in "0/5 nodes fit" reasons.
func (c FitCode) String() string {
	switch c {
	case FitUnschedulable:
		return "node is cordoned"
	case FitTaint:
		return "untolerated taint"
	case FitAffinity:
		return "node selector/affinity mismatch"
	}
	return "fits"
}

var noLogger = logr.Discard()

// isSchedulingTaint: NoSchedule and NoExecute taints keep pods off, except fairway's own
// hold taint (v1alpha1.HoldTaintKey, and the key older versions gave it), which is there to keep
// other schedulers' pods off capacity held for a gang; among fairway's gangs the holds themselves
// decide who gets it.
func isSchedulingTaint(t *corev1.Taint) bool {
	return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !v1alpha1.IsHoldTaintKey(t.Key)
}

// Matches evaluates the class's constraints against a node with the upstream helpers: cordon
// (tolerated only by the node.kubernetes.io/unschedulable taint's toleration, as kube-scheduler
// does), NoSchedule and NoExecute taints, node selector and required node affinity. The string is
// a detail for humans when the node does not match (the taint).
func (c *FilterClass) Matches(n *Node) (FitCode, string) {
	if n.Obj == nil {
		return FitAffinity, "node unknown"
	}
	if n.Unschedulable {
		t := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
		if !corev1helpers.TolerationsTolerateTaint(noLogger, c.Tolerations, &t, false) {
			return FitUnschedulable, ""
		}
	}
	if len(n.Obj.Spec.Taints) > 0 {
		if t, bad := corev1helpers.FindMatchingUntoleratedTaint(noLogger, n.Obj.Spec.Taints, c.Tolerations, isSchedulingTaint, false); bad {
			return FitTaint, t.ToString()
		}
	}
	if len(c.NodeSelector) > 0 || c.NodeAffinity != nil {
		ok, err := c.required.Match(n.Obj)
		if err != nil || !ok {
			return FitAffinity, ""
		}
	}
	return FitOK, ""
}

// classInput is the part of a pod spec a class is made of; its JSON form is the class key.
type classInput struct {
	NodeSelector map[string]string    `json:"s,omitempty"`
	NodeAffinity *corev1.NodeAffinity `json:"a,omitempty"`
	Tolerations  []corev1.Toleration  `json:"t,omitempty"`
	Unsupported  string               `json:"u,omitempty"`
	// Blocked is the runtime's reason (SchedulingProblemAnnotation), verbatim.
	Blocked string `json:"b,omitempty"`
	// Volume is the runtime's volume reason (VolumeProblemAnnotation), verbatim.
	Volume string `json:"v,omitempty"`
}

func readClass(pod *corev1.Pod) (classInput, string) {
	in := classInput{NodeSelector: pod.Spec.NodeSelector, Tolerations: pod.Spec.Tolerations}
	if a := pod.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			in.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: na.RequiredDuringSchedulingIgnoredDuringExecution}
		}
	}
	in.Unsupported = unsupported(pod)
	in.Blocked = pod.Annotations[SchedulingProblemAnnotation]
	in.Volume = pod.Annotations[VolumeProblemAnnotation]
	if len(in.NodeSelector) == 0 && in.NodeAffinity == nil && len(in.Tolerations) == 0 && in.Unsupported == "" && in.Blocked == "" && in.Volume == "" {
		return in, ""
	}
	b, err := json.Marshal(in)
	if err != nil {
		// Cannot happen for these types; fall back to a key that never collides.
		return in, fmt.Sprintf("%s/%s", pod.Namespace, pod.Name)
	}
	return in, string(b)
}

// unsupported names the constraints of a pod that the engine does not evaluate
// (v1alpha1.UnevaluatedConstraints). Requirements are refused rather than ignored, so a pod is
// never placed where its spec forbids.
func unsupported(pod *corev1.Pod) string {
	return strings.Join(v1alpha1.UnevaluatedConstraints(pod), ", ")
}

func newClass(in classInput, key string) *FilterClass {
	c := &FilterClass{key: key, NodeSelector: in.NodeSelector, NodeAffinity: in.NodeAffinity, Tolerations: in.Tolerations}
	if len(in.NodeSelector) > 0 || in.NodeAffinity != nil {
		c.required = nodeaffinity.NewRequiredNodeAffinity(in.NodeSelector, &corev1.Affinity{NodeAffinity: in.NodeAffinity})
	}
	switch {
	case in.Volume != "":
		c.Unsupported = &Problem{Code: ProblemVolume, Message: in.Volume}
	case in.Blocked != "":
		c.Unsupported = &Problem{Code: ProblemUnsupported, Message: in.Blocked}
	case in.Unsupported != "":
		c.Unsupported = &Problem{Code: ProblemUnsupported, Message: "uses " + in.Unsupported + ", which fairway does not evaluate; remove it or use a node selector, node affinity or a topology constraint"}
	}
	c.PinnedType = pinnedType(in)
	return c
}

// pinnedType returns the single GPU type a class requires, or "".
func pinnedType(in classInput) string {
	if v, ok := in.NodeSelector[v1alpha1.GPUTypeLabel]; ok {
		return v
	}
	if in.NodeAffinity == nil {
		return ""
	}
	terms := in.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, e := range terms[0].MatchExpressions {
		if e.Key == v1alpha1.GPUTypeLabel && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}

// internClass returns the shared class for a pod's constraints, counting one more user.
func (s *Snapshot) internClass(pod *corev1.Pod) *FilterClass {
	in, key := readClass(pod)
	c, ok := s.classes[key]
	if !ok {
		c = newClass(in, key)
		s.classes[key] = c
	}
	c.refs++
	return c
}

func (s *Snapshot) releaseClass(c *FilterClass) {
	if c == nil {
		return
	}
	if c.refs--; c.refs <= 0 {
		delete(s.classes, c.key)
	}
}

// ClassNodes returns the set of nodes whose constraints the class satisfies (see Matches). The
// set is computed on first use and then kept up to date as nodes change; callers must not modify
// it.
func (s *Snapshot) ClassNodes(c *FilterClass) bitset.Set {
	if !c.bitsValid {
		c.bits = make(bitset.Set, (len(s.nodes)+63)/64)
		for _, n := range s.nodes {
			if n != nil {
				if code, _ := c.Matches(n); code == FitOK {
					c.bits.Add(n.ID)
				}
			}
		}
		c.bitsValid = true
	}
	return c.bits
}

// refreshClassBits re-evaluates every computed class on one node (added, changed or removed).
func (s *Snapshot) refreshClassBits(n *Node, removed bool) {
	for _, c := range s.classes {
		if !c.bitsValid {
			continue
		}
		if removed {
			c.bits.Remove(n.ID)
			continue
		}
		if code, _ := c.Matches(n); code == FitOK {
			c.bits.Add(n.ID)
		} else {
			c.bits.Remove(n.ID)
		}
	}
}
