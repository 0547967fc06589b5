package gpushare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// PodRef names the pod a binding is for.
type PodRef struct {
	Namespace, Name string
	UID             types.UID
	// ResourceVersion is the pod's version the placement was planned from; "" checks none.
	// Prepare writes the pod's GPU only if the pod has not changed since (an older leader,
	// killed while it bound the pod elsewhere, may have bound it meanwhile), and the binding
	// then names the version Prepare left (Binding.ResourceVersion), so that the pod's GPU
	// annotations always belong to the binding that won.
	ResourceVersion string
	// Loan is true for a pod placed on loan on an idle interactive pod's GPU: Prepare also
	// records fairway.dev/loan, so that a restarted scheduler finds the loan as a loan.
	Loan bool
}

// ErrPodChanged: the pod changed since the placement was planned (PodRef.ResourceVersion); it
// may be bound already. The placement is given up and planned again from the pod as it is.
var ErrPodChanged = errors.New("the pod changed since its placement was planned")

// Prepare readies a fractional pod for its GPU before it is bound: it records the slot, the GPU
// and the group on the pod (and that it is a loan), so that a restarted scheduler finds its
// share where it is and the gpu-agent's device plugin gives the container that GPU when the
// kubelet admits the pod (binding keys: only fairway's identities may write them). It returns
// the pod's resourceVersion after the change, for the binding's precondition.
func (m *Manager) Prepare(ctx context.Context, pod PodRef, g Grant, slot int) (string, error) {
	b := v1alpha1.PodBinding{GPUIndexes: []int{slot}, GPUUUID: g.UUID, Group: g.Group, Loan: pod.Loan, Slot: -1}
	ann := b.Annotations()
	// Written even when the agent has not reported the GPU yet: a UUID from an earlier
	// placement must not outlive it.
	ann[v1alpha1.GPUUUIDAnnotation] = g.UUID
	meta := map[string]any{"uid": pod.UID, "labels": b.Labels(), "annotations": ann}
	if pod.ResourceVersion != "" {
		meta["resourceVersion"] = pod.ResourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return "", err
	}
	pods := m.client.CoreV1().Pods(pod.Namespace)
	got, err := pods.Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) && pod.ResourceVersion != "" {
		// Ours, from an attempt whose answer was lost, or someone else's change.
		cur, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if gerr != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" || !prepared(cur, b, ann) {
			return "", fmt.Errorf("recording the GPU on pod %s/%s: %w", pod.Namespace, pod.Name, ErrPodChanged)
		}
		got, err = cur, nil
	}
	if err != nil {
		return "", fmt.Errorf("recording the GPU on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if got.Spec.NodeName != "" {
		// Bound by someone else in between, with no version to check (ResourceVersion "").
		return "", fmt.Errorf("recording the GPU on pod %s/%s: %w", pod.Namespace, pod.Name, ErrPodChanged)
	}
	return got.ResourceVersion, nil
}

// prepared reports whether pod carries the binding keys a Prepare writes.
func prepared(pod *corev1.Pod, b v1alpha1.PodBinding, ann map[string]string) bool {
	for k, v := range ann {
		if pod.Annotations[k] != v {
			return false
		}
	}
	for k, v := range b.Labels() {
		if pod.Labels[k] != v {
			return false
		}
	}
	return true
}
