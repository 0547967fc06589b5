package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// HoldTaintKey is the hold taint: the NoSchedule taint the scheduler puts on a node while it
// holds capacity there for one of its gangs (capacity it frees by evictions, or gathers for a
// gang that waited too long), and takes off when the gang is bound or the hold lapses.
// kube-scheduler honours taints but not the holds in fairway's memory, nor the nominatedNodeName
// of pods it does not schedule, so without the taint other schedulers' pods take the room and
// the victims were evicted for nothing (docs/coexistence.md). fairway's engine treats the taint
// as tolerated by its own pods; the gpu-agent's DaemonSet tolerates it; other pods that must
// still land on a held node (a DaemonSet's) tolerate it with HoldToleration.
const HoldTaintKey = Prefix + "held"

// RetiredHoldTaintKey is the key versions before the rename gave the hold taint. Nothing sets it
// any more; the scheduler's taint reconciler removes it from the nodes an older scheduler left it
// on, and the engine, like the older one, does not let it keep fairway's pods off a node
// (docs/coexistence.md, "Upgrading: the retired taint key").
const RetiredHoldTaintKey = Prefix + "reserved"

// IsHoldTaintKey reports whether key is the hold taint's, current or retired.
func IsHoldTaintKey(key string) bool { return key == HoldTaintKey || key == RetiredHoldTaintKey }

// HoldTaint is the hold taint of a node where capacity is held for the gang namespace/name.
func HoldTaint(namespace, name string) corev1.Taint {
	return corev1.Taint{Key: HoldTaintKey, Value: HoldTaintValue(namespace, name), Effect: corev1.TaintEffectNoSchedule}
}

// HoldToleration tolerates fairway's hold taint, whatever gang the hold is for.
func HoldToleration() corev1.Toleration {
	return corev1.Toleration{Key: HoldTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// HoldTaintValue names the gang in a hold taint's value, for `kubectl describe node`:
// "namespace.name", cut to the 63 characters a taint value may have (taint values follow the
// label-value rules, which allow no "/"). It is a hint for people only: nothing decides by it.
func HoldTaintValue(namespace, name string) string {
	v := namespace + "." + name
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	// A value ends with an alphanumeric character.
	return strings.TrimRight(v, "-_.")
}
