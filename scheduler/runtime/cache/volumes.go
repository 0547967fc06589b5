package cache

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/component-helpers/storage/ephemeral"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// The engine does not evaluate volumes: the runtime turns a pending pod's claims into facts the
// snapshot already knows, as kube-scheduler's VolumeBinding plugin decides them in its
// PreFilter/Filter (FindPodVolumes):
//
//   - a bound claim adds its volume's required node affinity to the pod's;
//   - an unbound claim of a WaitForFirstConsumer class that fairway (or kube-scheduler) already
//     gave a node (volume.kubernetes.io/selected-node) pins the pod to that node;
//   - any other unbound claim of a WaitForFirstConsumer class allows the nodes of the static
//     volumes that could be bound to it, plus, when its class has a provisioner, the nodes of the
//     class's allowedTopologies (every node when it has none);
//   - a claim that cannot be used (missing, being deleted, unbound of an Immediate class, no
//     class and no volume, no volume and no provisioner, topologies matching no node) makes the
//     pod wait with a reason naming the claim (snapshot.VolumeProblemAnnotation).
//
// After the engine placed the pod, package volumebinder binds the static volumes and asks for
// the provisioning on the chosen node, and binds the pod once every claim is bound.

// ClaimNames returns the claims a pod uses: its persistentVolumeClaim volumes and the claims of
// its generic ephemeral volumes (named <pod>-<volume>).
func ClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, ephemeral.VolumeClaimName(pod, &v))
		}
	}
	return out
}

// VolumeLookup finds claims, volumes, classes and nodes (the informer stores). Objects are shared:
// never modify them.
type VolumeLookup interface {
	Claim(namespace, name string) *corev1.PersistentVolumeClaim
	Volume(name string) *corev1.PersistentVolume
	StorageClass(name string) *storagev1.StorageClass
	// VolumesOfClass returns the volumes whose storageClassName is class ("" for none).
	VolumesOfClass(class string) []*corev1.PersistentVolume
	// AnyNode reports whether some node satisfies match.
	AnyNode(match func(*corev1.Node) bool) bool
}

// ClaimState is what a claim means for placing its pod.
type ClaimState uint8

const (
	// ClaimBound: the claim is bound; its volume's node affinity constrains the pod.
	ClaimBound ClaimState = iota
	// ClaimSelectedNode: unbound, provisioning was asked for on a node (selected-node).
	ClaimSelectedNode
	// ClaimToBind: unbound of a WaitForFirstConsumer class; fairway binds or provisions it once
	// the pod is placed.
	ClaimToBind
	// ClaimProblem: the pod cannot be placed now; Problem says why.
	ClaimProblem
)

// ClaimInfo is one claim of a pending pod as the placement sees it.
type ClaimInfo struct {
	Claim *corev1.PersistentVolumeClaim
	Class *storagev1.StorageClass
	State ClaimState
	// Terms are the nodes the claim allows (ORed); nil means every node.
	Terms []corev1.NodeSelectorTerm
	// Problem is the reason of ClaimProblem, naming the claim.
	Problem string
}

// InspectClaim tells what the claim namespace/name of a pending pod means for its placement.
func InspectClaim(namespace, name string, vl VolumeLookup) ClaimInfo {
	ref := namespace + "/" + name
	c := vl.Claim(namespace, name)
	if c == nil {
		return ClaimInfo{State: ClaimProblem, Problem: fmt.Sprintf("PersistentVolumeClaim %s does not exist", ref)}
	}
	ci := ClaimInfo{Claim: c}
	if c.DeletionTimestamp != nil {
		ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s is being deleted", ref)
		return ci
	}
	if c.Spec.VolumeName != "" {
		v := vl.Volume(c.Spec.VolumeName)
		if v == nil {
			ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolume %s of PersistentVolumeClaim %s does not exist", c.Spec.VolumeName, ref)
			return ci
		}
		ci.State = ClaimBound
		if na := v.Spec.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) > 0 {
			ci.Terms = na.Required.NodeSelectorTerms
		}
		return ci
	}
	className := volumehelpers.GetPersistentVolumeClaimClass(c)
	if className == "" {
		// No class: the PV controller binds it (Immediate) to a volume without a class, if any.
		if len(candidateVolumes(c, vl)) == 0 {
			ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s has no storage class and no PersistentVolume without a class matches it (size, access modes, volume mode, selector)", ref)
		} else {
			ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s has no storage class; waiting for the PersistentVolume controller to bind it", ref)
		}
		return ci
	}
	class := vl.StorageClass(className)
	if class == nil {
		ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("StorageClass %q of PersistentVolumeClaim %s does not exist", className, ref)
		return ci
	}
	ci.Class = class
	if class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s (StorageClass %s, volumeBindingMode Immediate) is not bound yet; waiting for its volume", ref, className)
		return ci
	}
	if node := c.Annotations[volumehelpers.AnnSelectedNode]; node != "" {
		ci.State = ClaimSelectedNode
		ci.Terms = []corev1.NodeSelectorTerm{NodeNameTerm(node)}
		return ci
	}
	ci.State = ClaimToBind
	everywhere := false
	var terms []corev1.NodeSelectorTerm
	for _, v := range candidateVolumes(c, vl) {
		na := v.Spec.NodeAffinity
		if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
			everywhere = true
			break
		}
		terms = append(terms, na.Required.NodeSelectorTerms...)
	}
	if !everywhere && class.Provisioner != volumehelpers.NotSupportedProvisioner {
		if len(class.AllowedTopologies) == 0 {
			everywhere = true
		} else {
			topo := TopologyTerms(class.AllowedTopologies)
			sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: topo})
			if err != nil {
				ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("StorageClass %s of PersistentVolumeClaim %s: allowedTopologies: %v", className, ref, err)
				return ci
			}
			if len(terms) == 0 && !vl.AnyNode(sel.Match) {
				ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s: no node is in the allowedTopologies of StorageClass %s (%s)", ref, className, describeTopologies(class.AllowedTopologies))
				return ci
			}
			terms = append(terms, topo...)
		}
	}
	switch {
	case everywhere:
		ci.Terms = nil
	case len(terms) == 0:
		ci.State, ci.Problem = ClaimProblem, fmt.Sprintf("PersistentVolumeClaim %s: no PersistentVolume of StorageClass %s matches it (size, access modes, volume mode, selector) and the class has no provisioner (%s)", ref, className, volumehelpers.NotSupportedProvisioner)
	default:
		ci.Terms = terms
	}
	return ci
}

// candidateVolumes returns the volumes that could be bound to the claim on some node: what
// FindMatchingVolume accepts without a node, with the access modes the scheduler path checks.
func candidateVolumes(c *corev1.PersistentVolumeClaim, vl VolumeLookup) []*corev1.PersistentVolume {
	var out []*corev1.PersistentVolume
	one := make([]*corev1.PersistentVolume, 1)
	for _, v := range vl.VolumesOfClass(volumehelpers.GetPersistentVolumeClaimClass(c)) {
		one[0] = v
		if m, err := volumehelpers.FindMatchingVolume(c, one, nil, nil, false, true); err == nil && m != nil && volumehelpers.CheckAccessModes(c, v) {
			out = append(out, v)
		}
	}
	return out
}

// NodeNameTerm is the node selector term that matches exactly the node name.
func NodeNameTerm(name string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}
}

// TopologyTerms turns a class's allowedTopologies into node selector terms (ORed terms of ANDed
// "label In values" requirements, the meaning the StorageClass API gives them).
func TopologyTerms(topo []corev1.TopologySelectorTerm) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, 0, len(topo))
	for _, t := range topo {
		var term corev1.NodeSelectorTerm
		for _, e := range t.MatchLabelExpressions {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
				Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
		}
		out = append(out, term)
	}
	return out
}

func describeTopologies(topo []corev1.TopologySelectorTerm) string {
	var terms []string
	for _, t := range topo {
		var reqs []string
		for _, e := range t.MatchLabelExpressions {
			reqs = append(reqs, e.Key+" in ["+strings.Join(e.Values, ",")+"]")
		}
		terms = append(terms, strings.Join(reqs, " and "))
	}
	return strings.Join(terms, " or ")
}

// WithVolumeConstraints returns the pod as the snapshot must see it: the pod itself when it uses
// no claim (or none that constrains it), else a copy whose required node affinity includes every
// claim's allowed nodes, or that carries snapshot.VolumeProblemAnnotation when a claim cannot be
// used now. Only pending pods are rewritten; a bound pod is where it is.
func WithVolumeConstraints(pod *corev1.Pod, vl VolumeLookup) *corev1.Pod {
	if pod.Spec.NodeName != "" || len(pod.Spec.Volumes) == 0 {
		return pod
	}
	var terms []corev1.NodeSelectorTerm
	var problems []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var name string
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = ephemeral.VolumeClaimName(pod, v)
		default:
			continue
		}
		ci := InspectClaim(pod.Namespace, name, vl)
		if v.Ephemeral != nil && ci.Claim != nil {
			// A claim of that name that the ephemeral volume controller did not make for this
			// pod is never used (kube-scheduler refuses it too).
			if err := ephemeral.VolumeIsForPod(pod, ci.Claim); err != nil {
				problems = append(problems, "ephemeral volume "+v.Name+": "+err.Error())
				continue
			}
		}
		if ci.State == ClaimProblem {
			problems = append(problems, ci.Problem)
			continue
		}
		if ci.Terms != nil {
			terms = andTerms(terms, ci.Terms)
		}
	}
	if len(problems) == 0 && len(terms) == 0 {
		return pod
	}
	out := pod.DeepCopy()
	if len(problems) > 0 {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[snapshot.VolumeProblemAnnotation] = strings.Join(problems, "; ")
		return out
	}
	if out.Spec.Affinity == nil {
		out.Spec.Affinity = &corev1.Affinity{}
	}
	if out.Spec.Affinity.NodeAffinity == nil {
		out.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	} else {
		req := na.RequiredDuringSchedulingIgnoredDuringExecution
		req.NodeSelectorTerms = andTerms(req.NodeSelectorTerms, terms)
	}
	return out
}

// andTerms returns node selector terms that match where both a and b match: terms are ORed and
// a term's requirements ANDed, so the result is every pairwise union. nil a means "anywhere".
func andTerms(a, b []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	if a == nil {
		return b
	}
	out := make([]corev1.NodeSelectorTerm, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			t := corev1.NodeSelectorTerm{
				MatchExpressions: slices.Concat(x.MatchExpressions, y.MatchExpressions),
				MatchFields:      slices.Concat(x.MatchFields, y.MatchFields),
			}
			out = append(out, t)
		}
	}
	return out
}
