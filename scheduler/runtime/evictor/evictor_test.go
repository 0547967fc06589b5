package evictor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

type events struct {
	victim, beneficiary []string
	// related are the objects the victim events were related to ("-" for none).
	related []string
}

func refString(r *corev1.ObjectReference) string {
	if r == nil {
		return "-"
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func (e *events) Victim(pod types.NamespacedName, _ types.UID, related *corev1.ObjectReference, reason, note string) {
	e.victim = append(e.victim, pod.Name+" "+reason+": "+note)
	e.related = append(e.related, refString(related))
}

func (e *events) Beneficiary(ref *corev1.ObjectReference, reason, note string) {
	e.beneficiary = append(e.beneficiary, refString(ref)+" "+reason+": "+note)
}

func victim() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "train-b-1", UID: "v-uid"}, Spec: corev1.PodSpec{NodeName: "n1"}}
}

func reclaim() *Request {
	b := snapshot.GangKey{Namespace: "team-a", Name: "train", PodGroup: true}
	return &Request{Eviction: engine.Eviction{Pod: types.NamespacedName{Namespace: "team-b", Name: "train-b-1"}, Node: "n1",
		Reason: engine.EvictReclaim, Message: "reclaimed for gang team-a/train of queue team-a, which is below its guarantee",
		Beneficiary: &b, GracePeriod: 30 * time.Second}, UID: "v-uid", Queue: "team-b", FromEngine: true}
}

// actions lists the fake's calls as verb/subresource, with dry-run evictions marked.
func actions(cs *fake.Clientset) string {
	var verbs []string
	for _, a := range cs.Actions() {
		v := a.GetVerb() + "/" + a.GetSubresource()
		if c, ok := a.(k8stesting.CreateAction); ok {
			if ev, ok := c.GetObject().(*policyv1.Eviction); ok && ev.DeleteOptions != nil && len(ev.DeleteOptions.DryRun) > 0 {
				v += "(dry-run)"
			}
		}
		verbs = append(verbs, v)
	}
	return strings.Join(verbs, ",")
}

func condition(t *testing.T, a k8stesting.Action) corev1.PodCondition {
	t.Helper()
	var body struct {
		Status struct{ Conditions []corev1.PodCondition } `json:"status"`
	}
	if err := json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	return body.Status.Conditions[0]
}

// The condition comes first, then the eviction (Eviction API) with the engine's grace period,
// then the condition again (the API server's eviction replaces its reason), then the events.
func TestEvictOrderConditionEvictionEvents(t *testing.T) {
	cs := fake.NewClientset(victim())
	ev := &events{}
	e := New(cs, func(cache.Outcome) { t.Error("no outcome expected") }, Options{Events: ev})
	if err := e.Evict(context.Background(), reclaim()); err != nil {
		t.Fatal(err)
	}
	if got := actions(cs); got != "patch/status,create/eviction,patch/status" {
		t.Fatalf("API calls %v, want the status patch, the eviction, the status patch", got)
	}
	for _, i := range []int{0, 2} {
		c := condition(t, cs.Actions()[i])
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue || c.Reason != "FairwayReclaim" || c.Message != "Reclaimed for gang team-a/train of queue team-a, which is below its guarantee" {
			t.Errorf("condition %d: %+v", i, c)
		}
	}
	evic := cs.Actions()[1].(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	if o := evic.DeleteOptions; *o.GracePeriodSeconds != 30 || *o.Preconditions.UID != "v-uid" || len(o.DryRun) != 0 || evic.Name != "train-b-1" {
		t.Errorf("eviction %+v", evic)
	}
	if len(ev.victim) != 1 || ev.victim[0] != "train-b-1 Reclaim: Reclaimed for gang team-a/train of queue team-a, which is below its guarantee" ||
		ev.related[0] != "PodGroup team-a/train" ||
		len(ev.beneficiary) != 1 || !strings.HasPrefix(ev.beneficiary[0], "PodGroup team-a/train EvictingForThis: Evicting team-b/train-b-1 on node n1") {
		t.Errorf("events: victim %v related %v beneficiary %v", ev.victim, ev.related, ev.beneficiary)
	}
}

// A pod evicted with a grace period of 0 is deleted by the eviction itself, which sets
// DisruptionTarget in the same request, and killed at once: fairway writes no condition, before
// or after, only the eviction and the events (one request per victim, not three, in a large
// reclaim of such pods).
func TestEvictGraceZeroWritesNoCondition(t *testing.T) {
	cs := fake.NewClientset(victim())
	ev := &events{}
	e := New(cs, func(cache.Outcome) { t.Error("no outcome expected") }, Options{Events: ev})
	r := reclaim()
	r.GracePeriod = 0
	if err := e.Evict(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := actions(cs); got != "create/eviction" {
		t.Fatalf("API calls %v, want the eviction only", got)
	}
	if len(ev.victim) != 1 || !strings.Contains(ev.victim[0], "Reclaimed for gang team-a/train") || len(ev.beneficiary) != 1 {
		t.Errorf("events: victim %v beneficiary %v; want the why on the victim's", ev.victim, ev.beneficiary)
	}
}

// A budget that refuses a grace-0 eviction finds nothing to take back: no condition was set.
func TestEvictGraceZeroRefusedLeavesNoCondition(t *testing.T) {
	cs := fake.NewClientset(victim())
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, budgetRefusal() })
	e := New(cs, func(cache.Outcome) {}, Options{Events: &events{}})
	r := reclaim()
	r.GracePeriod = 0
	err := e.Evict(context.Background(), r)
	if !isBudgetErr(err) {
		t.Fatalf("err %v, want the budget's refusal", err)
	}
	if got := actions(cs); got != "create/eviction" {
		t.Fatalf("API calls %v, want the refused eviction only", got)
	}
}

// The events of an eviction name its beneficiary once, as the engine's message does: the
// victim's says "Preempted by pod ..." (not "Preempted by X because preempted by X"), and is
// related to the beneficiary's pod when the beneficiary is a gang of one pod, whose PodGroup is
// one the webhook made up; the beneficiary's event goes on that pod too.
func TestEvictionEventsNameTheBeneficiaryOnce(t *testing.T) {
	serve := types.NamespacedName{Namespace: "team-a", Name: "serve-6cc45dbb8-q8fk7"}
	for _, tc := range []struct {
		name          string
		gang          snapshot.GangKey
		pod           types.NamespacedName
		related, onto string
	}{
		{"one-pod gang", snapshot.GangKey{Namespace: "team-a", Name: "pod-serve-6cc45dbb8-3eb6c340", PodGroup: true}, serve,
			"Pod team-a/serve-6cc45dbb8-q8fk7", "Pod team-a/serve-6cc45dbb8-q8fk7"},
		{"gang", snapshot.GangKey{Namespace: "team-a", Name: "train", PodGroup: true}, types.NamespacedName{},
			"PodGroup team-a/train", "PodGroup team-a/train"},
		{"lone pod", snapshot.GangKey{Namespace: "team-a", Name: "debug"}, types.NamespacedName{},
			"Pod team-a/debug", "Pod team-a/debug"},
	} {
		cs := fake.NewClientset(victim())
		ev := &events{}
		e := New(cs, func(cache.Outcome) { t.Error("no outcome expected") }, Options{Events: ev})
		r := reclaim()
		r.Reason, r.Beneficiary = engine.EvictPreempt, &tc.gang
		if tc.pod.Name != "" {
			r.BeneficiaryPod = &tc.pod
		}
		r.Message = "preempted by pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve) of priority 100 in queue team-a (this pod has priority 50)"
		if err := e.Evict(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		want := "train-b-1 Preempt: Preempted by pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve) of priority 100 in queue team-a (this pod has priority 50)"
		if len(ev.victim) != 1 || ev.victim[0] != want || ev.related[0] != tc.related {
			t.Errorf("%s: victim events %q related to %q, want %q related to %q", tc.name, ev.victim, ev.related, want, tc.related)
		}
		if len(ev.beneficiary) != 1 || !strings.HasPrefix(ev.beneficiary[0], tc.onto+" EvictingForThis: Evicting team-b/train-b-1") {
			t.Errorf("%s: beneficiary events %q, want one on %s", tc.name, ev.beneficiary, tc.onto)
		}
	}
}

func budgetRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause}}
	return err
}

// A pod under a budget is asked for with a dry run first: a refusal then leaves it untouched
// and is reported as blocked, not retried.
func TestBudgetRefusalOnDryRunTouchesNothing(t *testing.T) {
	cs := fake.NewClientset(victim())
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, budgetRefusal() })
	var got []cache.Outcome
	e := New(cs, func(o cache.Outcome) { got = append(got, o) }, Options{Transient: func(error) bool { return true }})
	r := reclaim()
	r.Budgets = []types.NamespacedName{{Namespace: "team-b", Name: "web-pdb"}}
	e.done(r, e.Evict(context.Background(), r))
	if a := actions(cs); a != "create/eviction(dry-run)" {
		t.Errorf("API calls %v, want one dry-run eviction (a budget's refusal is not retried)", a)
	}
	if len(got) != 1 || got[0].Kind != cache.EvictionBlocked || got[0].Budget != r.Budgets[0] || got[0].UID != "v-uid" {
		t.Errorf("outcomes %+v", got)
	}
}

// A refusal of the real eviction (the budget changed after the dry run) sets the condition back
// to False.
func TestBudgetRefusalRevertsCondition(t *testing.T) {
	cs := fake.NewClientset(victim())
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction); len(ev.DeleteOptions.DryRun) > 0 {
			return true, nil, nil
		}
		return true, nil, budgetRefusal()
	})
	var got []cache.Outcome
	e := New(cs, func(o cache.Outcome) { got = append(got, o) }, Options{})
	r := reclaim()
	r.Budgets = []types.NamespacedName{{Namespace: "team-b", Name: "web-pdb"}}
	e.done(r, e.Evict(context.Background(), r))
	if a := actions(cs); a != "create/eviction(dry-run),patch/status,create/eviction,patch/status" {
		t.Fatalf("API calls %v", a)
	}
	if c := condition(t, cs.Actions()[3]); c.Status != corev1.ConditionFalse || c.Reason != ConditionEvictionRefused {
		t.Errorf("condition after the refusal %+v", c)
	}
	if len(got) != 1 || got[0].Kind != cache.EvictionBlocked {
		t.Errorf("outcomes %+v", got)
	}
}

func TestEvictionFailureIsReported(t *testing.T) {
	cases := map[string]struct {
		evictErr error
		report   bool
	}{
		"server error": {apierrors.NewInternalError(errFake), true},
		"pod gone":     {apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "train-b-1"), false},
		"new pod":      {apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "train-b-1", errFake), false},
		"namespace terminating": {func() error {
			err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "train-b-1", errFake)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
			return err
		}(), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(victim())
			cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.evictErr })
			var got []cache.Outcome
			e := New(cs, func(o cache.Outcome) { got = append(got, o) }, Options{Backoff: wait.Backoff{Steps: 1}})
			r := reclaim()
			e.done(r, e.Evict(context.Background(), r))
			if tc.report != (len(got) == 1) {
				t.Fatalf("outcomes %v, want reported=%v", got, tc.report)
			}
			if tc.report && (got[0].Kind != cache.EvictionFailed || got[0].UID != "v-uid") {
				t.Errorf("outcome %+v", got[0])
			}
		})
	}
}

var errFake = &fakeErr{}

type fakeErr struct{}

func (*fakeErr) Error() string { return "etcd is sad" }

// Evictions are worked off in the order they were submitted, a pod at most once at a time.
func TestSubmitOrderAndDedup(t *testing.T) {
	e := New(fake.NewClientset(), func(cache.Outcome) {}, Options{})
	a, b := reclaim(), reclaim()
	b.Pod.Name = "train-b-2"
	e.Submit(*a, *b, *a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, _ := e.queue.Next(ctx)
	second, _ := e.queue.Next(ctx)
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	third, left := e.queue.Next(short)
	if first.Pod.Name != "train-b-1" || second.Pod.Name != "train-b-2" || left {
		t.Errorf("order %s, %s; then %q left (the duplicate of train-b-1 must be dropped)", first.Pod.Name, second.Pod.Name, third.Pod.Name)
	}
}

// A loan goes back to the notebook that lent its GPU through the Eviction API, with the loan's
// grace period and no dry run (the pod goes either way).
func TestLoanReturnIsAnEviction(t *testing.T) {
	cs := fake.NewClientset(victim())
	e := New(cs, func(cache.Outcome) { t.Error("no outcome expected") }, Options{})
	r := reclaim()
	r.Reason, r.Beneficiary, r.GracePeriod = engine.EvictLoanReturn, nil, 5*time.Second
	r.Budgets = []types.NamespacedName{{Namespace: "team-b", Name: "web-pdb"}}
	if err := e.Evict(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := actions(cs); got != "patch/status,create/eviction,patch/status" {
		t.Fatalf("API calls %v, want the condition, the eviction, the condition", got)
	}
	for _, i := range []int{0, 2} {
		if c := condition(t, cs.Actions()[i]); c.Reason != "FairwayLoanReturn" || c.Status != corev1.ConditionTrue {
			t.Errorf("condition %d: %+v", i, c)
		}
	}
	evic := cs.Actions()[1].(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	if o := evic.DeleteOptions; *o.GracePeriodSeconds != 5 || *o.Preconditions.UID != "v-uid" || len(o.DryRun) != 0 {
		t.Errorf("eviction options %+v", o)
	}
}

// A budget that refuses a loan return does not keep the GPU from its owner: the pod on loan is
// deleted with the loan's grace, an event says why, and nothing is reported as blocked.
func TestLoanReturnPastARefusingBudget(t *testing.T) {
	cs := fake.NewClientset(victim())
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, budgetRefusal() })
	ev := &events{}
	e := New(cs, func(o cache.Outcome) { t.Errorf("outcome %+v, want none", o) }, Options{Events: ev})
	r := reclaim()
	r.Reason, r.Beneficiary, r.GracePeriod = engine.EvictLoanReturn, nil, 5*time.Second
	r.Budgets = []types.NamespacedName{{Namespace: "team-b", Name: "web-pdb"}}
	err := e.Evict(context.Background(), r)
	e.done(r, err)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(cs); got != "patch/status,create/eviction,delete/" {
		t.Fatalf("API calls %v, want the condition, the refused eviction, the deletion", got)
	}
	if o := cs.Actions()[2].(k8stesting.DeleteAction).GetDeleteOptions(); *o.GracePeriodSeconds != 5 || *o.Preconditions.UID != "v-uid" {
		t.Errorf("delete options %+v", o)
	}
	if len(ev.victim) != 2 || !strings.HasPrefix(ev.victim[0], "train-b-1 "+ReasonLoanReturnedPastBudget+": ") ||
		!strings.HasPrefix(ev.victim[1], "train-b-1 LoanReturn: ") {
		t.Errorf("victim events %q", ev.victim)
	}
}

// An eviction that overrides a budget (the claimant waited its reclaim.budgetTimeout) asks the
// Eviction API, and deletes the pod with its grace when the budget still refuses; the condition
// comes first and names the budget, the event says it was overridden.
func TestGuaranteeReclaimPastARefusingBudget(t *testing.T) {
	cs := fake.NewClientset(victim())
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, budgetRefusal() })
	ev := &events{}
	e := New(cs, func(o cache.Outcome) { t.Errorf("outcome %+v, want none", o) }, Options{Events: ev})
	r := reclaim()
	r.Budgets = []types.NamespacedName{{Namespace: "team-b", Name: "train-pdb"}}
	r.OverridesBudget = &r.Budgets[0]
	r.Message += "; PodDisruptionBudget team-b/train-pdb is overridden"
	err := e.Evict(context.Background(), r)
	e.done(r, err)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(cs); got != "patch/status,create/eviction,delete/" {
		t.Fatalf("API calls %v, want the condition, the refused eviction, the deletion (no dry run)", got)
	}
	if c := condition(t, cs.Actions()[0]); c.Reason != "FairwayReclaim" || !strings.Contains(c.Message, "team-b/train-pdb") {
		t.Errorf("condition %+v, want FairwayReclaim naming the budget", c)
	}
	if o := cs.Actions()[2].(k8stesting.DeleteAction).GetDeleteOptions(); *o.GracePeriodSeconds != 30 || *o.Preconditions.UID != "v-uid" {
		t.Errorf("delete options %+v", o)
	}
	if len(ev.victim) != 2 || !strings.HasPrefix(ev.victim[0], "train-b-1 "+ReasonGuaranteePastBudget+": PodDisruptionBudget team-b/train-pdb") {
		t.Errorf("victim events %q", ev.victim)
	}
}
