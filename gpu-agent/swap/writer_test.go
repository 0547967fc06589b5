package swap

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/podwrite"
)

// startWriter runs a PodWriter on c until the test ends.
func startWriter(t *testing.T, c client.Client) *PodWriter {
	t.Helper()
	w := newPodWriter(c, nil, podwrite.Options{Log: testr.New(t), BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func waitWritten(t *testing.T, w *PodWriter) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pods still wait for a write", w.Pending())
		}
		time.Sleep(time.Millisecond)
	}
}

func getPod(t *testing.T, c client.Client, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func swapCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == fairwayv1alpha1.GPUSwapCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// The writer puts the swap state on the pod and the condition in its status, leaving the
// kubelet's conditions alone; a later state without a condition keeps the unwritten condition
// of an earlier one (the swap's outcome), and a nil state removes the annotation.
func TestPodWriterWritesStateAndCondition(t *testing.T) {
	nb := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb", UID: "uid-nb"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	c := fake.NewClientBuilder().WithObjects(nb).WithStatusSubresource(&corev1.Pod{}).Build()
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	w := NewPodWriter(c, nil, testr.New(t))
	// Before Start: both writes wait, and only the second is written, with the first's condition.
	w.Write(nb, &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwappedOut, Bytes: 1 << 30},
		&Condition{Swapped: true, Reason: "SwappedOut", Message: "1 GiB on the host", At: at})
	w.Write(nb, &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwappedOut, Bytes: 2 << 30}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitWritten(t, w)

	p := getPod(t, c, "nb")
	state, ok, err := fairwayv1alpha1.GPUSwapOf(p.Annotations)
	if err != nil || !ok || state.State != fairwayv1alpha1.GPUSwappedOut || state.Bytes != 2<<30 {
		t.Errorf("swap state = %+v, %v, %v; want SwappedOut of 2 GiB", state, ok, err)
	}
	cond := swapCondition(p)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "SwappedOut" || !cond.LastTransitionTime.Time.Equal(at) {
		t.Errorf("swap condition = %+v, want True SwappedOut at %v", cond, at)
	}
	if len(p.Status.Conditions) != 2 {
		t.Errorf("conditions = %+v, want Ready kept beside the swap condition", p.Status.Conditions)
	}

	w.Write(nb, nil, &Condition{Reason: "Restored", Message: "back on the GPU", At: at.Add(time.Minute)})
	waitWritten(t, w)
	p = getPod(t, c, "nb")
	if v, ok := p.Annotations[fairwayv1alpha1.GPUSwapAnnotation]; ok {
		t.Errorf("swap annotation = %q after a nil state, want none", v)
	}
	if cond := swapCondition(p); cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "Restored" {
		t.Errorf("swap condition = %+v, want False Restored", cond)
	}
}

// uidPrecondition answers a patch whose metadata.uid is not the stored pod's with a conflict,
// as the API server does (the fake client applies it as a change instead).
func uidPrecondition(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var body struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return err
	}
	var cur corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
		return err
	}
	if body.Metadata.UID != cur.UID {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", body.Metadata.UID, cur.UID))
	}
	return c.Patch(ctx, obj, patch, opts...)
}

// A pod that is gone, or was re-created under the same name (another UID), is not written,
// and not retried for good.
func TestPodWriterSkipsGoneAndRecreatedPods(t *testing.T) {
	now := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb", UID: "uid-new"}}
	var conflicts atomic.Int32
	c := fake.NewClientBuilder().WithObjects(now).WithStatusSubresource(&corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := uidPrecondition(ctx, c, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				conflicts.Add(1)
			}
			return err
		}}).Build()
	w := startWriter(t, c)
	old := now.DeepCopy()
	old.UID = "uid-old"
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gone", UID: "uid-gone"}}
	state := &fairwayv1alpha1.GPUSwap{State: fairwayv1alpha1.GPUSwapEligible, Bytes: 1 << 30}
	w.Write(old, state, nil)
	w.Write(gone, state, nil)
	waitWritten(t, w)
	if v, ok := getPod(t, c, "nb").Annotations[fairwayv1alpha1.GPUSwapAnnotation]; ok {
		t.Errorf("the re-created pod got the old one's swap state %q", v)
	}
	if n := conflicts.Load(); n != 5 {
		t.Errorf("the write of the old pod met %d conflicts, want 5 (four retries, then dropped)", n)
	}
}
