package binder

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
)

// podCache stands in for the informer cache.
type podCache struct {
	mu sync.Mutex
	m  map[string]*corev1.Pod
}

func (c *podCache) Pod(ns, name string) *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[ns+"/"+name]
}

func (c *podCache) set(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[p.Namespace+"/"+p.Name] = p
}

// Two shares bound to one node: the second binding waits until the kubelet has admitted the
// first (the share device plugin could not tell them apart otherwise), and goes on once it has.
func TestShareBindingsWaitForTheKubeletPerNode(t *testing.T) {
	cache := &podCache{m: map[string]*corev1.Pod{}}
	var objs []runtime.Object
	for _, name := range []string{"a", "b"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID(name + "-uid")},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		objs = append(objs, p)
		cache.set(p.DeepCopy())
	}
	cs := fake.NewClientset(objs...)
	// Reservations get their GPU from the "agent" at once.
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" {
			return false, nil, nil
		}
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		obj.UID = "resv-uid" // as the API server would
		p := obj.DeepCopy()
		p.Annotations[v1alpha1.GPUUUIDAnnotation] = "GPU-0"
		cache.set(p)
		return false, nil, nil
	})
	var bindings atomic.Int32
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" {
			bindings.Add(1)
			return true, nil, nil
		}
		return false, nil, nil
	})
	gpu := gpushare.New(cs, cache, gpushare.Options{Namespace: "fairway-system", Image: "pause", Timeout: time.Second, Poll: time.Millisecond})
	rec := newRecorder()
	b := New(cs, rec.report, Options{Workers: 2, Backoff: quick, Observer: rec, GPU: gpu, Pods: cache, Log: testr.New(t),
		AdmissionWait: time.Minute, AdmissionPoll: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = b.Start(ctx) }()
	share := func(name string) Request {
		return Request{Binding: engine.Binding{Pod: types.NamespacedName{Namespace: "t", Name: name}, Node: "n1",
			Shared: &engine.SharedGPU{GPU: engine.GPU{Index: 0}, MilliGPU: 500}}, UID: types.UID(name + "-uid")}
	}
	b.Submit(share("a"), share("b"))
	rec.wait(t, 1)
	time.Sleep(100 * time.Millisecond)
	if len(rec.bound) != 1 {
		t.Fatalf("bound %v failed %v, want one share bound", rec.bound, rec.failed)
	}
	if n := bindings.Load(); n != 1 {
		t.Fatalf("%d bindings before the kubelet admitted the first share, want 1", n)
	}
	first := "a"
	if rec.bound[0] == "b" {
		first = "b"
	}
	p := cache.Pod("t", first).DeepCopy()
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main"}}
	cache.set(p)
	rec.wait(t, 1)
	if n := bindings.Load(); n != 2 || len(rec.bound) != 2 {
		t.Errorf("%d bindings, bound %v (failed %v) after the first was admitted, want both", n, rec.bound, rec.failed)
	}
}

func TestAdmitted(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"gone":               {nil, true},
		"pending, no status": {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false},
		"no phase yet":       {&corev1.Pod{}, true},
		"container status":   {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{}}}}, true},
		"failed admission":   {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true},
		"deleting":           {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, true},
	}
	for name, tc := range cases {
		if got := admitted(tc.pod); got != tc.want {
			t.Errorf("%s: admitted = %v, want %v", name, got, tc.want)
		}
	}
}

// size is the number of nodes with an entry in the gate.
func (g *admissionGate) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nodes)
}

// The gate keeps no entry for a node whose shares are all admitted, however many nodes it saw
// (nodes churn under autoscaling), while bindings on few nodes and many still exclude each other
// per node; a binding that gave up waiting leaves nothing behind either.
func TestAdmissionGateForgetsIdleNodes(t *testing.T) {
	var g admissionGate
	ctx := context.Background()
	for i := range 1000 {
		node := fmt.Sprintf("node-%d", i)
		if err := g.lock(ctx, node); err != nil {
			t.Fatal(err)
		}
		g.unlock(node)
	}
	if n := g.size(); n != 0 {
		t.Fatalf("%d node entries after 1000 nodes each bound and admitted a share, want 0", n)
	}

	// Concurrent bindings: 8 workers, on 4 busy nodes and 1000 others.
	var holders [4]atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				busy := (w + i) % len(holders)
				for _, node := range []string{fmt.Sprintf("busy-%d", busy), fmt.Sprintf("churn-%d", w*250+i)} {
					if err := g.lock(ctx, node); err != nil {
						t.Error(err)
						return
					}
					if node[0] == 'b' && holders[busy].Add(1) != 1 {
						t.Errorf("two bindings hold %s's lock", node)
					}
					time.Sleep(time.Microsecond)
					if node[0] == 'b' {
						holders[busy].Add(-1)
					}
					g.unlock(node)
				}
			}
		}()
	}
	wg.Wait()
	if n := g.size(); n != 0 {
		t.Fatalf("%d node entries after concurrent bindings on 1004 nodes ended, want 0", n)
	}

	// A binding that gives up waiting for a held lock.
	if err := g.lock(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := g.lock(waitCtx, "n1"); err == nil {
		t.Fatal("a second lock of n1 succeeded while the first was held")
	}
	if n := g.size(); n != 1 {
		t.Errorf("%d node entries while n1 is held, want 1", n)
	}
	g.unlock("n1")
	if n := g.size(); n != 0 {
		t.Errorf("%d node entries after n1's waiter gave up and its holder unlocked, want 0", n)
	}
}
