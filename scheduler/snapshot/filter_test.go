package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// fairway's own hold taint keeps other schedulers off capacity held for a gang; fairway's pods,
// which the holds arbitrate, do not see it, nor the key older versions gave it (a node may still
// carry it until the taint reconciler removes it). Any other NoSchedule taint still keeps them off.
func TestHoldTaintTolerated(t *testing.T) {
	node := func(taints ...corev1.Taint) *Node {
		return &Node{Obj: &corev1.Node{Spec: corev1.NodeSpec{Taints: taints}}}
	}
	var c FilterClass
	if code, detail := c.Matches(node(v1alpha1.HoldTaint("team-a", "train"))); code != FitOK {
		t.Errorf("a node held for a gang: %v (%s); want it to fit fairway's pods", code, detail)
	}
	other := corev1.Taint{Key: "dedicated", Value: "infer", Effect: corev1.TaintEffectNoSchedule}
	if code, _ := c.Matches(node(v1alpha1.HoldTaint("team-a", "train"), other)); code != FitTaint {
		t.Errorf("a held node with another taint: %v; want %v", code, FitTaint)
	}
	retired := corev1.Taint{Key: v1alpha1.RetiredHoldTaintKey, Value: "team-a.train", Effect: corev1.TaintEffectNoSchedule}
	if code, detail := c.Matches(node(retired)); code != FitOK {
		t.Errorf("a node with the retired hold taint key: %v (%s); want it to fit fairway's pods", code, detail)
	}
}
