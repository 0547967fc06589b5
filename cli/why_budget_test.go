package cli_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// `fairway why` on a pod whose guarantee a PodDisruptionBudget delays shows the engine's reason
// as it names the rule and the object: the budget, and either when the claimant's
// reclaim.budgetTimeout overrides it (borrowed pods) or that nothing does (a move of pods within
// their guarantee). The messages are the engine's, from the scenarios' goldens
// (guarantee-budget-timeout, guarantee-never-moves-pod-its-budget-protects); the code is read
// from the condition, the message shown as written.
func TestWhyGuaranteeWaitsForBudget(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 30, 0, time.UTC)
	cases := []struct {
		name, message string
		want          []string
	}{{
		name: "borrowed pods until the timeout",
		message: "0/1 nodes fit pod owner/o0 (1 GPU, 1 CPU, 1Gi memory): 1 not enough free GPUs (1 needed); reclaim: no eviction " +
			"makes room: 8 pods wait for PodDisruptionBudget borrower/t-pdb, which allows no more disruptions now (the API server " +
			"refused an eviction; retried after 2026-01-02T00:01:00Z); queue owner's guarantee overrides the budgets of over-quota " +
			"pods at 2026-01-02T00:01:00Z (reclaim.budgetTimeout 1m0s)",
		want: []string{"PodDisruptionBudget borrower/t-pdb", "overrides the budgets of over-quota pods at 2026-01-02T00:01:00Z",
			"spec.reclaim.budgetTimeout"},
	}, {
		name: "a move of pods within their guarantee",
		message: "0/2 nodes fit pod owner/big (2 GPU, 1 CPU, 1Gi memory): 2 not enough free GPUs (2 needed); reclaim: 0/2 nodes fit " +
			"pod owner/big (2 GPU, 1 CPU, 1Gi memory) even after evictions in progress: 2 not enough free GPUs (2 needed); moving pods " +
			"instead: 1 pods may only move (they belong to queue keeper, which is not above its guaranteed quota), and their " +
			"PodDisruptionBudget keeper/train-pdb allows no disruption now: a move keeps its pods' budgets, which no " +
			"reclaim.budgetTimeout overrides, so the gang waits until the budget allows a disruption",
		want: []string{"PodDisruptionBudget keeper/train-pdb allows no disruption now", "queue keeper, which is not above its guaranteed quota",
			"no reclaim.budgetTimeout overrides", "within their own queue's guarantee is never overridden"},
	}}
	for _, c := range cases {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "owner", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
				Labels: map[string]string{fairwayv1.QueueLabel: "owner"}},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: fairwayv1.PodScheduledMessage(fairwayv1.ReasonWaitingForBudget, c.message),
			}}},
		}
		v := cli.BuildWhy(&cli.WhySnapshot{Pod: pod, Pods: []corev1.Pod{*pod}}, now)
		if v.Reason != string(fairwayv1.ReasonWaitingForBudget) || v.Message != c.message {
			t.Errorf("%s: reason %q, message %q; want %s and the engine's message", c.name, v.Reason, v.Message, fairwayv1.ReasonWaitingForBudget)
		}
		var b strings.Builder
		if err := cli.PrintWhy(&b, v); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(strings.Fields(b.String()), " ")
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output\n%s\nwant it to contain %q", c.name, b.String(), w)
			}
		}
	}
}
