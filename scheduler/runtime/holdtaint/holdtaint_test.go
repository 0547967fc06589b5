package holdtaint

import (
	"context"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// A node is tainted once for its gang, keeps its other taints, is not written again while it
// carries the taint, and is untainted when no gang holds it any more; a node that is gone is no
// error.
func TestReconciler(t *testing.T) {
	ctx := context.Background()
	other := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}})
	// The "cache" is the API itself here: no lag.
	get := func(name string) *corev1.Node {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return n
	}
	r := New(cs, get, logr.Discard())
	taints := func() []corev1.Taint { return get("n1").Spec.Taints }

	value := v1alpha1.HoldTaintValue("team-a", "train")
	if err := r.Ensure(ctx, "n1", value); err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{other, v1alpha1.HoldTaint("team-a", "train")}
	if diff := cmp.Diff(want, taints()); diff != "" {
		t.Fatalf("taints after Ensure (-want +got):\n%s", diff)
	}
	r.wrote = map[string]written{} // as if the cache had caught up
	if err := r.Ensure(ctx, "n1", value); err != nil {
		t.Fatal(err)
	}
	r.Set(map[string]string{"n1": value})
	if err := r.sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got := r.Writes(); got != 1 {
		t.Errorf("%d writes for one hold, want 1", got)
	}

	r.Set(map[string]string{})
	if err := r.sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.Taint{other}, taints()); diff != "" {
		t.Errorf("taints after the release (-want +got):\n%s", diff)
	}
	if got := r.Writes(); got != 2 {
		t.Errorf("%d writes after the release, want 2", got)
	}
	if err := r.Ensure(ctx, "gone", value); err != nil {
		t.Errorf("tainting a node that is gone: %v", err)
	}
}

// The evictions of several pods of one node taint it at once: one write.
func TestReconcilerConcurrentEnsure(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	var stale corev1.Node // the cache has not seen the taint yet
	stale.Name = "n1"
	r := New(cs, func(string) *corev1.Node { return &stale }, logr.Discard())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := r.Ensure(ctx, "n1", "team-a.train"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := r.Writes(); got != 1 {
		t.Errorf("%d writes for 8 evictions on one node, want 1", got)
	}
}

// A node an older scheduler left tainted with the retired key loses it at its first sync, whether
// or not a gang holds capacity there now; a held node ends with the current key only.
func TestReconcilerRemovesRetiredKey(t *testing.T) {
	ctx := context.Background()
	other := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	retired := corev1.Taint{Key: v1alpha1.RetiredHoldTaintKey, Value: "old.gang", Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "idle"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{retired, other}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{retired}}},
	)
	get := func(name string) *corev1.Node {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	r := New(cs, get, logr.Discard())
	if !Retired(get("idle")) {
		t.Fatal("Retired does not see the retired key")
	}
	if _, ok := Tainted(get("idle")); ok {
		t.Fatal("Tainted counts the retired key as the hold taint")
	}
	r.Set(map[string]string{"held": "team-a.train"})
	for _, n := range []string{"idle", "held"} {
		if err := r.sync(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]corev1.Taint{other}, get("idle").Spec.Taints); diff != "" {
		t.Errorf("taints of the idle node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{v1alpha1.HoldTaint("team-a", "train")}, get("held").Spec.Taints); diff != "" {
		t.Errorf("taints of the held node (-want +got):\n%s", diff)
	}
	r.wrote = map[string]written{} // as if the cache had caught up
	for _, n := range []string{"idle", "held"} {
		if err := r.sync(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Writes(); got != 2 {
		t.Errorf("%d writes, want 2 (one per node, none once clean)", got)
	}
}
