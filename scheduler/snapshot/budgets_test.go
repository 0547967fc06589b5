package snapshot_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A pod's budgets survive its updates (the runtime sets them after each, but a task the
// snapshot replaces must not lose them meanwhile); an unknown budget is refused; a deleted one
// counts for nothing; a block stands until its time.
func TestPodBudgets(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(4, "").Obj()); err != nil {
		t.Fatal(err)
	}
	p := testutil.MakePod("serve", "web-0").Queue("serve").GPU(1).Node("n1").Obj()
	if err := s.UpsertPod(p); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "serve", Name: "web-0"}
	pdb := types.NamespacedName{Namespace: "serve", Name: "web-pdb"}
	if err := s.SetPodBudgets(key, []types.NamespacedName{pdb}); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("an unknown budget: %v, want ErrNotFound", err)
	}
	b := s.UpsertBudget(pdb, 1)
	if err := s.SetPodBudgets(key, []types.NamespacedName{pdb}); err != nil {
		t.Fatal(err)
	}
	moved := p.DeepCopy()
	moved.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3") // resized: the task is replaced
	if err := s.UpsertPod(moved); err != nil {
		t.Fatal(err)
	}
	if s.Task(key).Req.MilliCPU != 3000 {
		t.Fatalf("the update was not applied: %+v", s.Task(key).Req)
	}
	if got := s.Task(key).Budgets; len(got) != 1 || got[0] != b {
		t.Errorf("budgets after an update: %v", got)
	}
	now := testutil.Epoch
	if err := s.BlockBudget(pdb, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !b.BlockedAt(now) || b.BlockedAt(now.Add(time.Minute)) {
		t.Errorf("blocked until %v: at now %v, a minute later %v", b.BlockedUntil(), b.BlockedAt(now), b.BlockedAt(now.Add(time.Minute)))
	}
	if s.UpsertBudget(pdb, 0); !b.BlockedAt(now) || b.Allowed != 0 {
		t.Errorf("an update of the budget keeps its block: %+v", b)
	}
	s.DeleteBudget(pdb)
	if !b.Gone() || b.BlockedAt(now) || s.Budget(pdb) != nil {
		t.Errorf("a deleted budget counts for nothing: %+v", b)
	}
}

// The grace cap is inherited from the nearest ancestor that sets one; none means no cap.
func TestEvictionGraceCap(t *testing.T) {
	s := snapshot.New()
	dept := testutil.MakeQueue("dept").Obj()
	dept.Spec.MaxEvictionGracePeriod = &metav1.Duration{Duration: 5 * time.Minute}
	own := testutil.MakeQueue("own").Parent("dept").Obj()
	own.Spec.MaxEvictionGracePeriod = &metav1.Duration{Duration: time.Minute}
	for _, q := range []*v1alpha1.Queue{dept, testutil.MakeQueue("child").Parent("dept").Obj(), own, testutil.MakeQueue("free").Obj()} {
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]time.Duration{"dept": 5 * time.Minute, "child": 5 * time.Minute, "own": time.Minute, "free": snapshot.NoGraceCap} {
		if got := s.Queue(name).MaxEvictionGrace; got != want {
			t.Errorf("queue %s: cap %v, want %v", name, got, want)
		}
	}
	if g := s.Queue("child").EvictionGrace(10 * time.Minute); g != 5*time.Minute {
		t.Errorf("a 10m grace under a 5m cap: %v", g)
	}
	if g := s.Queue("free").EvictionGrace(10 * time.Minute); g != 10*time.Minute {
		t.Errorf("no cap: %v", g)
	}
}
