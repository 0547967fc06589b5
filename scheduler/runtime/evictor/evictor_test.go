package evictor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

type events struct{ victim, beneficiary []string }

func (e *events) Victim(pod types.NamespacedName, _ types.UID, reason, note string) {
	e.victim = append(e.victim, pod.Name+" "+reason+": "+note)
}

func (e *events) Beneficiary(g snapshot.GangKey, reason, note string) {
	e.beneficiary = append(e.beneficiary, g.String()+" "+reason+": "+note)
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

// The condition comes first, then the deletion with the engine's grace period, then the events.
func TestEvictOrderConditionDeleteEvents(t *testing.T) {
	cs := fake.NewClientset(victim())
	ev := &events{}
	e := New(cs, func(cache.Outcome) { t.Error("no outcome expected") }, Options{Events: ev})
	if err := e.Evict(context.Background(), reclaim()); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
	}
	if strings.Join(verbs, ",") != "patch/status,delete/" {
		t.Fatalf("API calls %v, want the status patch then the deletion", verbs)
	}
	patch := cs.Actions()[0].(k8stesting.PatchAction)
	var body struct {
		Status struct{ Conditions []corev1.PodCondition } `json:"status"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	c := body.Status.Conditions[0]
	if c.Type != corev1.DisruptionTarget || c.Reason != "FairwayReclaim" || !strings.HasPrefix(c.Message, "Reclaimed by team-a/train: reclaimed for gang") {
		t.Errorf("condition %+v", c)
	}
	del := cs.Actions()[1].(k8stesting.DeleteAction).GetDeleteOptions()
	if *del.GracePeriodSeconds != 30 || *del.Preconditions.UID != "v-uid" {
		t.Errorf("delete options %+v", del)
	}
	if len(ev.victim) != 1 || !strings.Contains(ev.victim[0], "Reclaimed by team-a/train because reclaimed for gang") ||
		len(ev.beneficiary) != 1 || !strings.Contains(ev.beneficiary[0], "Evicting team-b/train-b-1 on node n1") {
		t.Errorf("events: victim %v beneficiary %v", ev.victim, ev.beneficiary)
	}
}

func TestEvictionFailureIsReported(t *testing.T) {
	cases := map[string]struct {
		deleteErr error
		report    bool
	}{
		"server error": {apierrors.NewInternalError(errFake), true},
		"pod gone":     {apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "train-b-1"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(victim())
			cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.deleteErr })
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
