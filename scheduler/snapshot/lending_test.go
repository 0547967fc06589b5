package snapshot_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func TestPodInfoIdleLending(t *testing.T) {
	observed := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	p := testutil.MakePod("a", "nb").Queue("a").Fraction("0.5").Priority(100).
		Annotation(v1alpha1.IdleGPUMemoryAnnotation, "1234").Annotation(v1alpha1.GPUIdleObservedAnnotation, v1alpha1.FormatGPUIdleObserved(observed)).Obj()
	p.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(observed.Truncate(time.Second)), Message: "idle"}}
	info := snapshot.PodInfoFromPod(p)
	if !info.Interactive || !info.Idle || !info.IdleChanged.Equal(observed) || info.IdleMemMiB != 1234 || info.Loan || info.BorrowOptIn {
		t.Errorf("notebook: %+v", info)
	}
	b := testutil.MakePod("b", "train").Queue("b").Fraction("0.5").Priority(50).
		Annotation(v1alpha1.BorrowIdleGPUAnnotation, "true").Annotation(v1alpha1.LoanAnnotation, "true").
		Annotation(v1alpha1.IdleGPUMemoryAnnotation, "oops").Obj()
	info = snapshot.PodInfoFromPod(b)
	if info.Interactive || info.Idle || info.IdleMemMiB != -1 || !info.Loan || !info.BorrowOptIn {
		t.Errorf("borrower: %+v", info)
	}
	nb := testutil.MakePod("c", "nb").Queue("c").Fraction("0.5").Priority(10).Annotation(v1alpha1.WorkloadKindAnnotation, "notebook").Obj()
	if !v1alpha1.IsInteractive(nb) {
		t.Errorf("a notebook is interactive whatever its priority (the gpu-agent's rule)")
	}
}

// A loan found running (a restarted scheduler) is restored as a loan on the GPU it names: apart
// from the GPU's shares, charged to its queue as loaned, not allocated.
func TestLoanRestoredApartFromShares(t *testing.T) {
	s := snapshot.New()
	mustNoErr(t, s.UpsertNode(testutil.MakeNode("n1").GPUs(1, "A100").Inventory(80000).Obj()))
	mustNoErr(t, s.UpsertQueue(testutil.MakeQueue("a").Obj()))
	mustNoErr(t, s.UpsertQueue(testutil.MakeQueue("b").Obj()))
	mustNoErr(t, s.UpsertPod(testutil.MakePod("a", "nb").Queue("a").Fraction("0.5").Priority(100).Node("n1").GPUIndex(0).Obj()))
	mustNoErr(t, s.UpsertPod(testutil.MakePod("b", "train").Queue("b").Fraction("0.25").Priority(50).Node("n1").GPUIndex(0).
		Annotation(v1alpha1.LoanAnnotation, "true").Obj()))
	mustVerify(t, s)
	g := s.Node("n1").Slot(0)
	if g.UsedMilli != 500 || g.Sharers != 1 || g.Loans != 1 || g.LoanMemMiB != 20000 {
		t.Errorf("slot %+v, want the notebook's share and one loan apart", *g)
	}
	if n := s.Node("n1"); n.UsedMilliGPU != 500 || n.Loans != 1 {
		t.Errorf("node GPU use %d, loans %d; want 500, 1", n.UsedMilliGPU, n.Loans)
	}
	q := s.Queue("b")
	if q.Allocated.At(snapshot.DimGPU) != 0 || q.Loaned.At(snapshot.DimGPU) != 250 {
		t.Errorf("queue b allocated %d loaned %d; want 0 and 250", q.Allocated.At(snapshot.DimGPU), q.Loaned.At(snapshot.DimGPU))
	}
	if !s.Task(key("b", "train")).GPUs.Loan {
		t.Errorf("the task is not a loan")
	}
	s.DeletePod(key("b", "train"))
	mustVerify(t, s)
	if g := s.Node("n1").Slot(0); g.Loans != 0 || g.LoanMemMiB != 0 {
		t.Errorf("slot %+v after the loan left", *g)
	}
}

// An idleness change of a pod takes effect without changing its accounting.
func TestIdleUpdateInPlace(t *testing.T) {
	s := snapshot.New()
	mustNoErr(t, s.UpsertNode(testutil.MakeNode("n1").GPUs(1, "A100").Inventory(80000).Obj()))
	mustNoErr(t, s.UpsertQueue(testutil.MakeQueue("a").Obj()))
	p := testutil.MakePod("a", "nb").Queue("a").Fraction("0.5").Priority(100).Node("n1").GPUIndex(0).Obj()
	mustNoErr(t, s.UpsertPod(p))
	version := s.Node("n1").Version
	p = p.DeepCopy()
	p.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	mustNoErr(t, s.UpsertPod(p))
	if tk := s.Task(key("a", "nb")); !tk.Idle || s.Node("n1").Version == version {
		t.Errorf("idle %v, node version %d (was %d)", tk.Idle, s.Node("n1").Version, version)
	}
	mustVerify(t, s)
}

func TestLendingPolicyInherited(t *testing.T) {
	s := snapshot.New()
	yes, never, ten := true, v1alpha1.BorrowNever, int32(3)
	dept := testutil.MakeQueue("dept").Obj()
	dept.Spec.IdleLending = &v1alpha1.IdleLending{Lend: &yes, MaxLoansPerGPU: &ten, MinIdleTime: &metav1.Duration{Duration: time.Minute}}
	leaf := testutil.MakeQueue("leaf").Parent("dept").Obj()
	leaf.Spec.IdleLending = &v1alpha1.IdleLending{Borrow: &never}
	mustNoErr(t, s.UpsertQueue(dept))
	mustNoErr(t, s.UpsertQueue(leaf))
	mustNoErr(t, s.UpsertQueue(testutil.MakeQueue("other").Obj()))
	want := snapshot.LendingPolicy{Lend: true, Borrow: v1alpha1.BorrowNever, MinIdleTime: time.Minute, MaxLoansPerGPU: 3}
	if got := s.Queue("leaf").Lending; got != want {
		t.Errorf("leaf policy %+v, want %+v", got, want)
	}
	if got := s.Queue("other").Lending; got != snapshot.DefaultLendingPolicy {
		t.Errorf("default policy %+v", got)
	}
	// Changing only the policy is seen.
	no := false
	dept = dept.DeepCopy()
	dept.Spec.IdleLending.Lend = &no
	mustNoErr(t, s.UpsertQueue(dept))
	if s.Queue("leaf").Lending.Lend {
		t.Errorf("lend switched off on the department, still on for the leaf")
	}
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
