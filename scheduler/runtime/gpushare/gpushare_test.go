package gpushare

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

func TestNames(t *testing.T) {
	short := SlotKey{Node: "h100-0", Slot: 3}
	if got := ReservationName(short); got != "fairway-gpu-h100-0-3" {
		t.Errorf("ReservationName = %s", got)
	}
	if got := GroupID(short); got != "h100-0-3" {
		t.Errorf("GroupID = %s", got)
	}
	long := SlotKey{Node: strings.Repeat("node-with-a-very-long-name.", 9) + "example", Slot: 7}
	for _, k := range []SlotKey{short, long} {
		if errs := validation.IsDNS1123Subdomain(ReservationName(k)); len(errs) > 0 {
			t.Errorf("reservation name %q: %v", ReservationName(k), errs)
		}
		if errs := validation.IsValidLabelValue(GroupID(k)); len(errs) > 0 {
			t.Errorf("group id %q: %v", GroupID(k), errs)
		}
	}
	other := long
	other.Slot = 6
	if ReservationName(long) == ReservationName(other) || GroupID(long) == GroupID(other) {
		t.Error("shortened names of two slots collide")
	}
}

// pods is the informer cache as the manager sees it; agent plays the gpu-agent.
type pods struct {
	mu sync.Mutex
	m  map[string]*corev1.Pod
}

func (p *pods) Pod(ns, name string) *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[ns+"/"+name]
}

func (p *pods) set(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[pod.Namespace+"/"+pod.Name] = pod
}

// newManager returns a manager whose created reservations reach the cache, and get a UUID from
// the "agent" unless noAgent.
func newManager(t *testing.T, noAgent bool) (*Manager, *fake.Clientset, *pods) {
	cs := fake.NewClientset()
	cache := &pods{m: map[string]*corev1.Pod{}}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		obj.UID = "resv-uid" // as the API server would
		pod := obj.DeepCopy()
		go func() {
			cache.set(pod.DeepCopy())
			if noAgent {
				return
			}
			time.Sleep(10 * time.Millisecond)
			pod.Annotations[v1alpha1.GPUUUIDAnnotation] = "GPU-physical-5"
			pod.Annotations[v1alpha1.GPUIndexAnnotation] = "5"
			cache.set(pod)
		}()
		return false, nil, nil // let the tracker store it too
	})
	m := New(cs, cache, Options{Namespace: "fairway-system", Image: "pause", PriorityClassName: "system-node-critical", Timeout: 300 * time.Millisecond, Poll: time.Millisecond})
	return m, cs, cache
}

func TestAcquireCreatesTheReservationAndWaitsForItsGPU(t *testing.T) {
	m, cs, _ := newManager(t, false)
	k := SlotKey{Node: "n1", Slot: 2}
	g, done, err := m.Acquire(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if g.UUID != "GPU-physical-5" || g.Group != "n1-2" || g.Reservation.Name != "fairway-gpu-n1-2" {
		t.Errorf("grant %+v", g)
	}
	p, err := cs.CoreV1().Pods("fairway-system").Get(context.Background(), "fairway-gpu-n1-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := p.Spec.Containers[0].Resources.Limits[v1alpha1.ResourceGPU]
	if p.Spec.NodeName != "n1" || gpu.Value() != 1 || p.Labels[v1alpha1.ReservationLabel] != "true" ||
		p.Annotations[snapshot.ReservationSlotAnnotation] != "2" || p.Spec.PriorityClassName != "system-node-critical" ||
		len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("reservation pod: %+v", p)
	}
	// A second pod on the slot reuses the reservation.
	g2, done2, err := m.Acquire(context.Background(), k)
	if err != nil || g2.UUID != g.UUID {
		t.Fatalf("second acquire: %+v %v", g2, err)
	}
	done2()
	creates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d reservations created, want 1", creates)
	}
}

// A create that the API server applied but whose answer was a timeout made the reservation: the
// Manager looks before it gives up, and uses it. Given up, the slot would be planned again
// under a reservation that holds its GPU.
func TestAcquireUsesAReservationWhoseCreateTimedOut(t *testing.T) {
	m, cs, cache := newManager(t, false)
	m.opts.Settle = 20 * time.Millisecond
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		obj.UID = "resv-uid"
		if err := cs.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), obj.DeepCopy(), obj.Namespace); err != nil {
			return true, nil, err
		}
		obj.Annotations[v1alpha1.GPUUUIDAnnotation] = "GPU-physical-5"
		cache.set(obj)
		return true, nil, apierrors.NewTimeoutError("deadline", 0)
	})
	g, done, err := m.Acquire(context.Background(), SlotKey{Node: "n1", Slot: 2})
	if err != nil {
		t.Fatal(err)
	}
	done()
	if g.UUID != "GPU-physical-5" {
		t.Errorf("grant %+v", g)
	}
}

func TestAcquireWithoutAgentTimesOut(t *testing.T) {
	m, _, _ := newManager(t, true)
	_, done, err := m.Acquire(context.Background(), SlotKey{Node: "n1", Slot: 0})
	if !errors.Is(err, ErrNoGPUReported) || done != nil {
		t.Fatalf("err %v done %v, want ErrNoGPUReported", err, done != nil)
	}
	if m.state(SlotKey{Node: "n1", Slot: 0}).inflight != 0 {
		t.Error("a failed acquire must hold nothing")
	}
}

func TestReleaseRefusesHeldOrOvertakenSlots(t *testing.T) {
	m, cs, _ := newManager(t, false)
	ctx := context.Background()
	k := SlotKey{Node: "n1", Slot: 1}
	gen := m.Generation(k)
	_, done, err := m.Acquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Release(ctx, k, ReservationName(k), "resv-uid", m.Generation(k)); ok || err != nil {
		t.Errorf("released a slot a binding holds: %v %v", ok, err)
	}
	done()
	if ok, _ := m.Release(ctx, k, ReservationName(k), "resv-uid", gen); ok {
		t.Error("released on a decision older than the last acquire")
	}
	if ok, err := m.Release(ctx, k, ReservationName(k), "resv-uid", m.Generation(k)); !ok || err != nil {
		t.Fatalf("release of an idle slot: %v %v", ok, err)
	}
	var del k8stesting.DeleteAction
	for _, a := range cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			del = d
		}
	}
	if del == nil || del.GetName() != "fairway-gpu-n1-1" || del.GetDeleteOptions().Preconditions == nil ||
		*del.GetDeleteOptions().Preconditions.UID != "resv-uid" || *del.GetDeleteOptions().GracePeriodSeconds != 0 {
		t.Errorf("delete action %+v", del)
	}
}

// TestPrepareRecordsTheGPU: the GPU the device plugin will give the pod is recorded on the pod
// (binding keys) and nowhere in its namespace: no ConfigMap is written, and an earlier
// release's GPU ConfigMap is left alone (its owner, the pod, takes it away).
func TestPrepareRecordsTheGPU(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nb", UID: "nb-uid"}}
	cs := fake.NewClientset(pod)
	m := New(cs, &pods{m: map[string]*corev1.Pod{}}, Options{Namespace: "fairway-system"})
	g := Grant{UUID: "GPU-7", Group: "n1-3"}
	if _, err := m.Prepare(context.Background(), PodRef{Namespace: "a", Name: "nb", UID: "nb-uid"}, g, 3); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().Pods("a").Get(context.Background(), "nb", metav1.GetOptions{})
	if got.Annotations[v1alpha1.GPUIndexAnnotation] != "3" || got.Annotations[v1alpha1.GPUUUIDAnnotation] != "GPU-7" || got.Labels[v1alpha1.GPUGroupLabel] != "n1-3" {
		t.Errorf("pod annotations %v labels %v", got.Annotations, got.Labels)
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "configmaps" {
			t.Errorf("Prepare touched a ConfigMap: %v", a)
		}
	}
}

func TestPrepareRecordsALoan(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "train", UID: "train-uid"}}
	cs := fake.NewClientset(pod)
	m := New(cs, &pods{m: map[string]*corev1.Pod{}}, Options{Namespace: "fairway-system"})
	if _, err := m.Prepare(context.Background(), PodRef{Namespace: "b", Name: "train", UID: "train-uid", Loan: true}, Grant{UUID: "GPU-7", Group: "n1-3"}, 3); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().Pods("b").Get(context.Background(), "train", metav1.GetOptions{})
	if got.Annotations[v1alpha1.LoanAnnotation] != "true" || got.Annotations[v1alpha1.GPUIndexAnnotation] != "3" {
		t.Errorf("pod annotations %v", got.Annotations)
	}
}
