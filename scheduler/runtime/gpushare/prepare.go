package gpushare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Environment variables of a fractional pod's GPU container, the keys of its GPU ConfigMap. The
// webhook wires them into the container at admission (NVIDIA_VISIBLE_DEVICES required, the MPS
// limits optional).
const (
	EnvVisibleDevices = v1alpha1.GPUConfigMapVisibleDevicesKey
	EnvMPSMemoryLimit = v1alpha1.GPUConfigMapMPSMemoryLimitKey
	EnvMPSThreads     = v1alpha1.GPUConfigMapMPSThreadsKey
)

// Env is the GPU environment of a fractional pod on the GPU uuid: the device, and on a node whose
// agent runs MPS, the pod's memory limit (memMiB) and its share of the GPU's threads (milli, in
// percent rounded up).
func Env(uuid string, mps bool, milli, memMiB int64) map[string]string {
	env := map[string]string{EnvVisibleDevices: uuid}
	if mps {
		if memMiB > 0 {
			env[EnvMPSMemoryLimit] = "0=" + strconv.FormatInt(memMiB, 10) + "M"
		}
		if milli > 0 {
			env[EnvMPSThreads] = strconv.FormatInt(min((milli+9)/10, 100), 10)
		}
	}
	return env
}

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
// share where it is, then writes the pod's GPU ConfigMap (name configMap, owned by the pod so it
// goes with it; skipped when the pod names none). It returns the pod's resourceVersion after
// the change, for the binding's precondition.
func (m *Manager) Prepare(ctx context.Context, pod PodRef, configMap string, g Grant, slot int, env map[string]string) (string, error) {
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
	if configMap != "" {
		// A user's ConfigMap of that name: the pod is not told it has a GPU it cannot reach.
		cur, err := m.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, configMap, metav1.GetOptions{})
		if err == nil && cur.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
			return "", fmt.Errorf("GPU ConfigMap %s/%s: %w", pod.Namespace, configMap, ErrNotOurs)
		}
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
	if configMap != "" {
		if err := m.writeConfigMap(ctx, pod, configMap, env); err != nil {
			return "", err
		}
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

func (m *Manager) writeConfigMap(ctx context.Context, pod PodRef, name string, env map[string]string) error {
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: pod.Namespace, OwnerReferences: []metav1.OwnerReference{owner},
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		},
		Data: env,
	}
	cms := m.client.CoreV1().ConfigMaps(pod.Namespace)
	_, err := cms.Create(ctx, want, metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating GPU ConfigMap %s/%s: %w", pod.Namespace, name, err)
		}
		return nil
	}
	// A previous attempt (maybe by another leader) wrote it: make it say what it must now. A
	// ConfigMap of that name that fairway did not make is its author's: it is never written over
	// (the chart's admission policy refuses that too).
	cur, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading GPU ConfigMap %s/%s: %w", pod.Namespace, name, err)
	}
	if cur.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
		return fmt.Errorf("GPU ConfigMap %s/%s: %w", pod.Namespace, name, ErrNotOurs)
	}
	if maps.Equal(cur.Data, env) && len(cur.OwnerReferences) == 1 && cur.OwnerReferences[0].UID == pod.UID {
		return nil
	}
	cur.Data = env
	cur.OwnerReferences = want.OwnerReferences
	if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating GPU ConfigMap %s/%s: %w", pod.Namespace, name, err)
	}
	return nil
}
