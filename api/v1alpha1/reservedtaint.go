package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ReservedTaintKey is the NoSchedule taint the scheduler puts on a node while capacity there is
// held for one of its gangs (capacity it frees by evictions, or gathers for a gang that waited
// too long), and takes off when the gang is bound or the hold lapses. kube-scheduler honours
// taints but not the holds in fairway's memory, nor the nominatedNodeName of pods it does not
// schedule, so without the taint other schedulers' pods take the room and the victims were
// evicted for nothing (docs/coexistence.md). fairway's engine treats the taint as tolerated by
// its own pods; the gpu-agent's DaemonSet tolerates it; other pods that must still land on a
// reserved node (a DaemonSet's) tolerate it with ReservedToleration.
const ReservedTaintKey = Prefix + "reserved"

// ReservedTaint is the taint of a node reserved for the gang namespace/name.
func ReservedTaint(namespace, name string) corev1.Taint {
	return corev1.Taint{Key: ReservedTaintKey, Value: ReservedTaintValue(namespace, name), Effect: corev1.TaintEffectNoSchedule}
}

// ReservedToleration tolerates fairway's reservations, whatever gang they are for.
func ReservedToleration() corev1.Toleration {
	return corev1.Toleration{Key: ReservedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// ReservedTaintValue names the gang in a taint's value, for `kubectl describe node`:
// "namespace.name", cut to the 63 characters a taint value may have (taint values follow the
// label-value rules, which allow no "/"). It is a hint for people only: nothing decides by it.
func ReservedTaintValue(namespace, name string) string {
	v := namespace + "." + name
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	// A value ends with an alphanumeric character.
	return strings.TrimRight(v, "-_.")
}
