package v1alpha1

import corev1 "k8s.io/api/core/v1"

// UnevaluatedConstraints names the scheduling requirements of a pod that fairway's scheduler does
// not evaluate: required inter-pod affinity and anti-affinity, DoNotSchedule topology spread
// constraints. The webhook leaves pods that carry one to kube-scheduler
// (with a warning), and the scheduler reports those that name it anyway as ReasonUnsupported
// rather than place them where their spec forbids; both read this one list, so they never
// disagree about which pods those are. Preferences (preferred affinities, ScheduleAnyway spreads)
// are soft and not listed. Dynamic resource claims are evaluated (docs/dra.md). The result is empty when fairway evaluates everything the pod requires.
func UnevaluatedConstraints(pod *corev1.Pod) []string {
	var what []string
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			what = append(what, "required inter-pod affinity")
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			what = append(what, "required inter-pod anti-affinity")
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			what = append(what, "topology spread constraints (DoNotSchedule)")
			break
		}
	}
	return what
}
