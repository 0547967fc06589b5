package gpushare

import (
	"context"
	"encoding/json"
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
	// Loan is true for a pod placed on loan on an idle interactive pod's GPU: Prepare also
	// records fairway.dev/loan, so that a restarted scheduler finds the loan as a loan.
	Loan bool
}

// Prepare readies a fractional pod for its GPU before it is bound: it writes the pod's GPU
// ConfigMap (name configMap, owned by the pod so it goes with it; skipped when the pod names
// none) and records the slot, the GPU and the group on the pod (and that it is a loan), so that
// a restarted scheduler finds its share where it is.
func (m *Manager) Prepare(ctx context.Context, pod PodRef, configMap string, g Grant, slot int, env map[string]string) error {
	if configMap != "" {
		if err := m.writeConfigMap(ctx, pod, configMap, env); err != nil {
			return err
		}
	}
	b := v1alpha1.PodBinding{GPUIndexes: []int{slot}, GPUUUID: g.UUID, Group: g.Group, Loan: pod.Loan, Slot: -1}
	ann := b.Annotations()
	// Written even when the agent has not reported the GPU yet: a UUID from an earlier
	// placement must not outlive it.
	ann[v1alpha1.GPUUUIDAnnotation] = g.UUID
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID,
		"labels":      b.Labels(),
		"annotations": ann,
	}})
	if err != nil {
		return err
	}
	if _, err := m.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("recording the GPU on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
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
