//go:build e2e

package e2e

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
)

// noPods is a gpushare.PodReader that knows no pod (Prepare does not read the cache).
type noPods struct{}

func (noPods) Pod(string, string) *corev1.Pod { return nil }

// TestBindingFence shows on a real API server what keeps a new leader from writing a fractional
// pod's GPU over the binding of a leader killed while it bound the pod (TestSchedulerCrashSafety
// saw shares summing to 1.33 GPUs on one GPU): Prepare writes the GPU only onto the pod's version
// the placement was planned from, and the binding names the version Prepare left, so whichever
// binding wins, the pod's GPU annotations are that binding's.
func TestBindingFence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(startEnvtest(t))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newPod := func(name string) *corev1.Pod {
		p, err := cs.CoreV1().Pods("a").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	bind := func(p *corev1.Pod, node, rv string) error {
		return cs.CoreV1().Pods("a").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID, ResourceVersion: rv},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	m := gpushare.New(cs, noPods{}, gpushare.Options{Namespace: "fairway-system"})

	// The killed leader prepared slot 1 and bound the pod to n2; the new leader planned slot 3
	// on n1 from the pod's version before.
	p := newPod("zombie")
	planned := p.ResourceVersion
	if _, err := m.Prepare(ctx, gpushare.PodRef{Namespace: "a", Name: p.Name, UID: p.UID, ResourceVersion: planned}, gpushare.Grant{UUID: "GPU-1", Group: "n2-1"}, 1); err != nil {
		t.Fatalf("the old leader's Prepare: %v", err)
	}
	if err := bind(p, "n2", ""); err != nil {
		t.Fatal(err)
	}
	_, err := m.Prepare(ctx, gpushare.PodRef{Namespace: "a", Name: p.Name, UID: p.UID, ResourceVersion: planned}, gpushare.Grant{UUID: "GPU-7", Group: "n1-3"}, 3)
	if !errors.Is(err, gpushare.ErrPodChanged) {
		t.Fatalf("Prepare from a version before the binding: %v, want ErrPodChanged", err)
	}
	got, err := cs.CoreV1().Pods("a").Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "n2" || got.Annotations[fairwayv1.GPUIndexAnnotation] != "1" || got.Annotations[fairwayv1.GPUUUIDAnnotation] != "GPU-1" {
		t.Errorf("the bound pod: node %q, annotations %v; want n2 with its GPU 1", got.Spec.NodeName, got.Annotations)
	}

	// The other order: the new leader prepares and binds first; the old leader's binding, made
	// from the version before, is refused.
	q := newPod("fenced")
	before := q.ResourceVersion
	rv, err := m.Prepare(ctx, gpushare.PodRef{Namespace: "a", Name: q.Name, UID: q.UID, ResourceVersion: before}, gpushare.Grant{UUID: "GPU-7", Group: "n1-3"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(q, "n2", before); !apierrors.IsConflict(err) {
		t.Errorf("a binding from the version before Prepare: %v, want a Conflict", err)
	}
	if err := bind(q, "n1", rv); err != nil {
		t.Errorf("the binding from the version Prepare left: %v", err)
	}
	t.Logf("Prepare from a stale version refused; a binding from a stale version refused (Conflict); the binding from Prepare's version accepted")
}
