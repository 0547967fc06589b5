package reserve

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
func TestReserver(t *testing.T) {
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

	value := v1alpha1.ReservedTaintValue("team-a", "train")
	if err := r.Ensure(ctx, "n1", value); err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{other, v1alpha1.ReservedTaint("team-a", "train")}
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
		t.Errorf("%d writes for one reservation, want 1", got)
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
		t.Errorf("reserving a node that is gone: %v", err)
	}
}

// The evictions of several pods of one node reserve it at once: one write.
func TestReserverConcurrentEnsure(t *testing.T) {
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
