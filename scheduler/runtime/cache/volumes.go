package cache

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// The engine does not evaluate volumes. A pod that uses a PersistentVolumeClaim is given to the
// snapshot with its bound volume's required node affinity added to its own, so that it is placed
// only where the volume can be mounted; a pod whose claim is missing or not bound yet is reported
// unschedulable with the reason (fairway does not bind volumes the way kube-scheduler's
// VolumeBinding plugin does for WaitForFirstConsumer classes).

// ClaimNames returns the claims a pod uses: its persistentVolumeClaim volumes and the claims of
// its generic ephemeral volumes (named <pod>-<volume>).
func ClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// VolumeLookup finds claims and volumes (the informer stores).
type VolumeLookup interface {
	Claim(namespace, name string) *corev1.PersistentVolumeClaim
	Volume(name string) *corev1.PersistentVolume
}

// WithVolumeConstraints returns the pod as the snapshot must see it: the pod itself when it uses
// no claim, else a copy whose required node affinity includes every bound volume's, or that
// carries snapshot.SchedulingProblemAnnotation when a claim cannot be used yet. Only pending pods
// are rewritten; a bound pod is where it is.
func WithVolumeConstraints(pod *corev1.Pod, vl VolumeLookup) *corev1.Pod {
	claims := ClaimNames(pod)
	if len(claims) == 0 || pod.Spec.NodeName != "" {
		return pod
	}
	var terms []corev1.NodeSelectorTerm
	problem := ""
	for _, name := range claims {
		c := vl.Claim(pod.Namespace, name)
		switch {
		case c == nil:
			problem = fmt.Sprintf("PersistentVolumeClaim %s/%s does not exist", pod.Namespace, name)
		case c.Spec.VolumeName == "":
			problem = fmt.Sprintf("PersistentVolumeClaim %s/%s is not bound to a volume yet; fairway places pods only on bound volumes (use a storage class with volumeBindingMode Immediate)", pod.Namespace, name)
		default:
			v := vl.Volume(c.Spec.VolumeName)
			if v == nil {
				problem = fmt.Sprintf("PersistentVolume %s of claim %s/%s does not exist", c.Spec.VolumeName, pod.Namespace, name)
				break
			}
			if na := v.Spec.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) > 0 {
				terms = andTerms(terms, na.Required.NodeSelectorTerms)
			}
		}
		if problem != "" {
			break
		}
	}
	if problem == "" && len(terms) == 0 {
		return pod
	}
	out := pod.DeepCopy()
	if problem != "" {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[snapshot.SchedulingProblemAnnotation] = problem
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
