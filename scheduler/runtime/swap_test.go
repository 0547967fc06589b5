package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A swap request reaches the idle pod as its annotation, once: a pod that carries it already
// (the engine repeats it each cycle its borrower waits) is not patched again.
func TestSwapRequestsAnnotateTheIdlePod(t *testing.T) {
	nb := testutil.MakePod("research", "nb").Obj()
	cs := fake.NewClientset(nb)
	asked := prometheus.NewCounter(prometheus.CounterOpts{Name: "asked"})
	a := newSwapAsker(cs, asked)
	idle := time.Date(2026, 3, 1, 7, 0, 0, 250000000, time.UTC)
	key := types.NamespacedName{Namespace: "research", Name: "nb"}
	current := func(k types.NamespacedName) (string, bool) {
		p, err := cs.CoreV1().Pods(k.Namespace).Get(context.Background(), k.Name, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		return p.Annotations[v1alpha1.GPUSwapRequestAnnotation], true
	}
	var errs []error
	a.ask(context.Background(), []engine.SwapRequest{{Pod: key, IdleSince: idle}, {Pod: types.NamespacedName{Namespace: "research", Name: "gone"}, IdleSince: idle}},
		current, func(err error) { errs = append(errs, err) })
	eventually(t, "the request written", func() bool {
		v, _ := current(key)
		return v == v1alpha1.FormatGPUSwapRequest(idle)
	})
	patches := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "patch" {
			patches++
		}
	}
	a.ask(context.Background(), []engine.SwapRequest{{Pod: key, IdleSince: idle}}, current, nil)
	time.Sleep(50 * time.Millisecond)
	after := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "patch" {
			after++
		}
	}
	if patches != 1 || after != 1 || len(errs) != 0 {
		t.Errorf("patches %d then %d, errors %v: want one patch, none for a gone pod or a repeat", patches, after, errs)
	}
	if n := promtestutil.ToFloat64(asked); n != 1 {
		t.Errorf("%v requests counted, want the one written", n)
	}
}

// A request written but not yet seen by the informer is not written again (nor counted again)
// at the next cycles; one for the pod's next idle period is.
func TestSwapRequestWrittenOnceWhileTheInformerLags(t *testing.T) {
	nb := testutil.MakePod("research", "nb").Obj()
	cs := fake.NewClientset(nb)
	asked := prometheus.NewCounter(prometheus.CounterOpts{Name: "asked"})
	a := newSwapAsker(cs, asked)
	key := types.NamespacedName{Namespace: "research", Name: "nb"}
	stale := func(types.NamespacedName) (string, bool) { return "", true } // the informer lags
	idle := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	for range 5 {
		a.ask(context.Background(), []engine.SwapRequest{{Pod: key, IdleSince: idle}}, stale, nil)
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "the request counted", func() bool { return promtestutil.ToFloat64(asked) >= 1 })
	a.ask(context.Background(), []engine.SwapRequest{{Pod: key, IdleSince: idle.Add(time.Hour)}}, stale, nil)
	eventually(t, "the next period's request counted", func() bool { return promtestutil.ToFloat64(asked) >= 2 })
	time.Sleep(50 * time.Millisecond)
	patches := 0
	for _, act := range cs.Actions() {
		if act.GetVerb() == "patch" {
			patches++
		}
	}
	if n := promtestutil.ToFloat64(asked); patches != 2 || n != 2 {
		t.Errorf("%d patches, %v counted; want one per idle period, 2", patches, n)
	}
}
