package runtime

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
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
	crd := crfake.NewClientBuilder().WithScheme(scheme()).WithRuntimeObjects(objs...).Build()
	rt, err := New(Clients{Scheduling: cs, Status: cs, Events: cs, CRD: crd}, Options{
		CyclePeriod: 50 * time.Millisecond, Debounce: time.Millisecond, StatusInterval: time.Hour,
		Engine: engine.Options{EvictionGracePeriod: time.Second}, Clock: clk,
	})
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

func TestMain(m *testing.M) {
	// Fake clients answer no streaming list; the informers list and watch instead.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}
