package runtime

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// These tests wire the whole runtime to fake clients: tiny checks that the loop, the workers
// and their outcomes fit together. The proof that the runtime works is the e2e suite, against a
// real API server.

func startRuntime(t *testing.T, cs *fake.Clientset, objs ...apiruntime.Object) *Runtime {
	t.Helper()
	return startRuntimeWithClock(t, cs, nil, objs...)
}

// startRuntimeWithClock starts a runtime whose loop runs on clk (nil: the wall clock).
func startRuntimeWithClock(t *testing.T, cs *fake.Clientset, clk clock.WithTicker, objs ...apiruntime.Object) *Runtime {
	t.Helper()
	return startRuntimeWithOptions(t, cs, Options{
		CyclePeriod: 50 * time.Millisecond, Debounce: time.Millisecond, StatusInterval: time.Hour,
		Engine: engine.Options{EvictionGracePeriod: time.Second}, Clock: clk,
	}, objs...)
}

func startRuntimeWithOptions(t *testing.T, cs *fake.Clientset, opts Options, objs ...apiruntime.Object) *Runtime {
	t.Helper()
	crd := crfake.NewClientBuilder().WithScheme(scheme()).WithRuntimeObjects(objs...).Build()
	rt, err := New(Clients{Scheduling: cs, Status: cs, Events: cs, CRD: crd}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, run := range []func(context.Context) error{rt.inf.Start, rt.loop.Start, rt.binder.Start, rt.evictor.Start, rt.holdTaint.Start, rt.gpu.Start, rt.runEvents} {
		go func() { _ = run(ctx) }()
	}
	return rt
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runCycles steps the loop's fake clock until n more cycles have run. The loop waits on the
// fake clock only (its period, its debounce), so a step makes it go; it is repeated because a
// step that comes before the loop set its timer wakes nothing.
func runCycles(t *testing.T, rt *Runtime, clk *clocktesting.FakeClock, n int64) {
	t.Helper()
	want := rt.loop.cycles.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for rt.loop.cycles.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d cycles did not run within 10s", n)
		}
		clk.Step(rt.opts.Debounce)
		time.Sleep(time.Millisecond)
	}
}

// A binding the API server refuses is forgotten; a later cycle binds the pod again.
func TestFailedBindingIsRetriedByALaterCycle(t *testing.T) {
	pod := testutil.MakePod("a", "p").Queue("a").GPU(1).Obj()
	pod.Spec.SchedulerName = "fairway"
	pod.UID = "p-uid"
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(8, "H100").Obj(), pod)
	var attempts atomic.Int32
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		if attempts.Add(1) == 1 {
			return true, nil, apierrors.NewBadRequest("not today")
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		p, _ := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "a", b.Name)
		bound := p.(*corev1.Pod).DeepCopy()
		bound.Spec.NodeName = b.Target.Name
		return true, nil, cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), bound, "a")
	})
	rt := startRuntime(t, cs, testutil.MakeQueue("a").Obj())
	eventually(t, "the pod bound on the second attempt", func() bool {
		p, err := cs.CoreV1().Pods("a").Get(context.Background(), "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "n1"
	})
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d binding attempts, want 2", n)
	}
	if !rt.loop.built.Load() {
		t.Error("the loop never built its snapshot")
	}
}

// A reservation whose slot no fractional pod uses (left by a scheduler that died between
// creating it and binding its pod) is deleted.
func TestOrphanReservationIsReleased(t *testing.T) {
	resv := testutil.MakePod("fairway-system", "fairway-gpu-n1-0").Reservation("n1", 0, 3).Obj()
	resv.UID = "resv-uid"
	resv.Spec.SchedulerName = "fairway"
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(8, "H100").Obj(), resv)
	startRuntime(t, cs)
	eventually(t, "the orphan reservation deleted", func() bool {
		_, err := cs.CoreV1().Pods("fairway-system").Get(context.Background(), resv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// A release the API server refused is asked again releaseRetry (5s) later, not at every cycle:
// the loop's fake clock is stepped past it.
func TestRefusedReservationReleaseIsAskedAgainLater(t *testing.T) {
	resv := testutil.MakePod("fairway-system", "fairway-gpu-n1-0").Reservation("n1", 0, 3).Obj()
	resv.UID, resv.Spec.SchedulerName = "resv-uid", "fairway"
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(8, "H100").Obj(), resv)
	var deletes atomic.Int32
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		if deletes.Add(1) == 1 {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), a.(k8stesting.DeleteAction).GetName(), errors.New("not now"))
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	rt := startRuntimeWithClock(t, cs, clk)
	eventually(t, "the snapshot built", func() bool { return rt.loop.built.Load() })
	runCycles(t, rt, clk, 1)
	eventually(t, "a first release asked", func() bool { return deletes.Load() >= 1 })

	runCycles(t, rt, clk, 5)
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n := deletes.Load(); n != 1 {
			t.Fatalf("%d deletions of the reservation within %v of the refused one, want 1", n, releaseRetry)
		}
	}
	clk.Step(releaseRetry)
	runCycles(t, rt, clk, 1)
	eventually(t, "the reservation deleted on the second request", func() bool {
		_, err := cs.CoreV1().Pods("fairway-system").Get(context.Background(), resv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// Fairway's pods left on a deleted node are deleted once the node has been gone for the orphan
// grace period (30s), not before: the loop's fake clock is stepped past it.
func TestPodsLeftOnADeletedNodeAreDeletedAfterTheGrace(t *testing.T) {
	pod := testutil.MakePod("a", "p").Queue("a").GPU(1).Node("n1").Obj()
	pod.Spec.SchedulerName, pod.UID = "fairway", "p-uid"
	pod.Status.Phase = corev1.PodRunning
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(8, "H100").Obj(), pod)
	var deletes atomic.Int32
	cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, apiruntime.Object, error) {
		deletes.Add(1)
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	rt := startRuntimeWithClock(t, cs, clk, testutil.MakeQueue("a").Obj())
	eventually(t, "the snapshot built", func() bool { return rt.loop.built.Load() })

	if err := cs.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node gone from the cache", func() bool { return rt.inf.Node("n1") == nil })
	runCycles(t, rt, clk, 3) // the loop takes the deletion in

	clk.Step(rt.opts.OrphanGrace - time.Second)
	runCycles(t, rt, clk, 3)
	// The workers that would delete run on the wall clock: give them a moment to (not) act.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n := deletes.Load(); n != 0 {
			t.Fatalf("%d pod deletions before the orphan grace period ended", n)
		}
	}
	clk.Step(2 * time.Second)
	runCycles(t, rt, clk, 1)
	eventually(t, "the pod left on the deleted node deleted", func() bool {
		_, err := cs.CoreV1().Pods("a").Get(context.Background(), "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// The state metrics are taken at most every stateGap after cycles that bind, and the state
// after the last such cycle is published when the gap ends, with no cycle after it: the loop's
// period is an hour here, so only the state timer can take it.
func TestStateMetricsFollowTheLastCycleWithinTheGap(t *testing.T) {
	newPod := func(name string) *corev1.Pod {
		p := testutil.MakePod("a", name).Queue("a").GPU(1).Obj()
		p.Spec.SchedulerName, p.UID = "fairway", types.UID(name+"-uid")
		return p
	}
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(8, "H100").Obj(), newPod("p1"))
	var bound sync.Map
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		if a.GetSubresource() == "binding" {
			bound.Store(a.(k8stesting.CreateAction).GetObject().(*corev1.Binding).Name, true)
			return true, nil, nil
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	rt := startRuntimeWithOptions(t, cs, Options{CyclePeriod: time.Hour, Debounce: time.Millisecond, StatusInterval: time.Hour, Clock: clk},
		testutil.MakeQueue("a").Obj())
	whole := func() int {
		if st := rt.metrics.State(); st != nil {
			for _, n := range st.NodeGPUs {
				if n.Node == "n1" {
					return n.Whole
				}
			}
		}
		return -1
	}
	isBound := func(name string) func() bool {
		return func() bool { _, ok := bound.Load(name); return ok }
	}
	eventually(t, "p1 bound", isBound("p1"))
	eventually(t, "the state after p1's binding", func() bool { return whole() == 1 })

	// p2 binds within the gap: the state waits for it to end.
	if _, err := cs.CoreV1().Pods("a").Create(context.Background(), newPod("p2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !isBound("p2")(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("p2 not bound within 10s")
		}
		clk.Step(time.Millisecond) // the debounce
	}
	// Cycles that p2's binding wakes (its event, its informer update) run too, still within the
	// gap; then the loop is idle.
	for quiet, cycles := 0, rt.loop.cycles.Load(); quiet < 20; time.Sleep(2 * time.Millisecond) {
		clk.Step(time.Millisecond)
		if n := rt.loop.cycles.Load(); n != cycles {
			quiet, cycles = 0, n
		} else {
			quiet++
		}
	}
	if got := whole(); got != 1 {
		t.Fatalf("state taken again within %v of the last: %d whole GPUs, want still 1", stateGap, got)
	}
	cycles := rt.loop.cycles.Load()
	clk.Step(stateGap)
	eventually(t, "the state after p2's binding, when the gap ended", func() bool { return whole() == 2 })
	if n := rt.loop.cycles.Load(); n != cycles {
		t.Errorf("%d cycles ran after the gap; the state timer alone should have taken the state", n-cycles)
	}
}

func TestMain(m *testing.M) {
	// Fake clients answer no streaming list; the informers list and watch instead.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}
