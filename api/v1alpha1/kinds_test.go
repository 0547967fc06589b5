package v1alpha1_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// TestKindDefaults: each kind's default class and preemptibility, and a queue policy that
// overrides them for one kind, inherited from a parent and overridden by a child.
func TestKindDefaults(t *testing.T) {
	for _, k := range v1.WorkloadKinds {
		p := v1.ResolvePolicy(k, nil)
		if p.PriorityClass != v1.DefaultPriorityClass(k) || p.Preemptibility != v1.DefaultPreemptibility(k) {
			t.Errorf("%s without policies: class %q preemptibility %q, want the kind's defaults", k, p.PriorityClass, p.Preemptibility)
		}
	}
	if c, pr := v1.DefaultPriorityClass(v1.KindInference), v1.DefaultPreemptibility(v1.KindInference); c != v1.PriorityClassInference || pr != v1.NonPreemptible {
		t.Errorf("inference defaults = %q, %q", c, pr)
	}
	if pr := v1.DefaultPreemptibility(v1.KindTraining); pr != "" {
		t.Errorf("training preemptibility = %q, want priority to decide", pr)
	}

	dept := &v1.QueuePolicy{Workloads: []v1.WorkloadPolicy{{Kind: v1.KindInference, PolicyRules: v1.PolicyRules{
		Preemptibility: ptr.To(v1.Preemptible), PriorityClassName: ptr.To("dept-serving")}}}}
	team := &v1.QueuePolicy{Workloads: []v1.WorkloadPolicy{{Kind: v1.KindInference, PolicyRules: v1.PolicyRules{
		PriorityClassName: ptr.To("team-serving")}}}}
	p := v1.ResolvePolicy(v1.KindInference, []v1.PolicyLevel{{Queue: "team", Policy: team}, {Queue: "dept", Policy: dept}})
	if p.PriorityClass != "team-serving" || p.From[v1.RulePriorityClass] != "team" {
		t.Errorf("class %q from %q, want team-serving from team", p.PriorityClass, p.From[v1.RulePriorityClass])
	}
	if p.Preemptibility != v1.Preemptible || p.From[v1.RulePreemptible] != "dept" {
		t.Errorf("preemptibility %q from %q, want preemptible from dept", p.Preemptibility, p.From[v1.RulePreemptible])
	}
	if q := v1.ResolvePolicy(v1.KindTraining, []v1.PolicyLevel{{Queue: "team", Policy: team}, {Queue: "dept", Policy: dept}}); q.PriorityClass != v1.PriorityClassTraining {
		t.Errorf("training under inference rules: class %q", q.PriorityClass)
	}
}

// TestInferenceIsNotInteractive: inference replicas are non-preemptible but never lent.
func TestInferenceIsNotInteractive(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{v1.WorkloadKindAnnotation: string(v1.KindInference)},
		Labels:      map[string]string{v1.PreemptibilityLabel: string(v1.NonPreemptible)},
	}, Spec: corev1.PodSpec{Priority: ptr.To[int32](125)}}
	if v1.IsInteractive(pod) {
		t.Error("IsInteractive(inference replica) = true")
	}
	pod.Annotations[v1.WorkloadKindAnnotation] = string(v1.KindPod)
	if !v1.IsInteractive(pod) {
		t.Error("IsInteractive(non-preemptible plain pod) = false")
	}
}
