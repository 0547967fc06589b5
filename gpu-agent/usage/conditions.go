package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/podwrite"
)

type wantedCondition struct {
	uid types.UID
	t   Transition
}

// ConditionWriter patches fairway.dev/GPUIdle onto pods through the pods/status subresource.
// Set never blocks the poll loop: the latest wanted state of each pod is kept and written at
// once, retried with back-off on failure (package podwrite). Only the condition is sent (a
// strategic merge keyed by condition type), so the kubelet's own conditions are untouched, and
// the pod's UID is a precondition, so a re-created pod of the same name is never patched.
//
// Before the condition, the pod itself is annotated (a separate patch: a pods/status patch
// cannot change metadata) with the observation time to the microsecond,
// fairway.dev/gpu-idle-observed (lastTransitionTime keeps only seconds, and the scheduler times
// how fast a lent GPU goes back from the moment the agent saw the work), and, before a
// condition turns True, with fairway.dev/idle-gpu-memory-used, so that the scheduler never sees
// an idle pod without it.
type ConditionWriter struct {
	client client.Client
	log    logr.Logger
	queue  *podwrite.Queue[wantedCondition]
}

// NewConditionWriter returns a writer that patches through c.
func NewConditionWriter(c client.Client, log logr.Logger) *ConditionWriter {
	w := &ConditionWriter{client: c, log: log}
	w.queue = podwrite.New(w.patch, podwrite.Options{Name: "gpu-idle-conditions", Log: log})
	return w
}

// Set asks for pod's condition to reflect t; a later Set for the same pod replaces it.
func (w *ConditionWriter) Set(pod *corev1.Pod, t Transition) {
	w.queue.Set(client.ObjectKeyFromObject(pod), wantedCondition{uid: pod.UID, t: t})
}

// Pending reports how many pods still wait for a write.
func (w *ConditionWriter) Pending() int { return w.queue.Pending() }

// Start writes until ctx ends. It implements manager.Runnable.
func (w *ConditionWriter) Start(ctx context.Context) error { return w.queue.Start(ctx) }

// NeedLeaderElection is false: every node's agent writes its own pods.
func (w *ConditionWriter) NeedLeaderElection() bool { return false }

func (w *ConditionWriter) patch(ctx context.Context, key types.NamespacedName, c wantedCondition) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	// The annotations go first: once the condition says idle the scheduler may lend the GPU,
	// and it must then know how much memory stays resident; and when it changes, the scheduler
	// reads its exact time with it (v1alpha1.GPUIdleObserved). Annotations are metadata, which
	// a pods/status patch cannot change.
	annotations := map[string]string{fairwayv1alpha1.GPUIdleObservedAnnotation: fairwayv1alpha1.FormatGPUIdleObserved(c.t.At)}
	if c.t.Idle && c.t.IdleMemoryKnown {
		annotations[fairwayv1alpha1.IdleGPUMemoryAnnotation] = strconv.FormatUint(c.t.IdleMemoryMiB, 10)
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": c.uid, "annotations": annotations}})
	if err != nil {
		return fmt.Errorf("encoding the GPU idle annotations patch: %w", err)
	}
	if err := w.client.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("annotating %s with its GPU idle observation: %w", key, err)
	}
	status := corev1.ConditionFalse
	if c.t.Idle {
		status = corev1.ConditionTrue
	}
	body := map[string]any{
		"metadata": map[string]any{"uid": c.uid},
		"status": map[string]any{
			"conditions": []corev1.PodCondition{{
				Type:               fairwayv1alpha1.GPUIdleCondition,
				Status:             status,
				Reason:             c.t.Reason,
				Message:            c.t.Message,
				LastTransitionTime: metav1.NewTime(c.t.At),
				LastProbeTime:      metav1.NewTime(c.t.At),
			}},
		},
	}
	data, err = json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding condition patch: %w", err)
	}
	if err := w.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("patching %s status: %w", key, err)
	}
	w.log.V(1).Info("GPU idle condition written", "pod", klog.KRef(key.Namespace, key.Name), "idle", c.t.Idle, "reason", c.t.Reason,
		"latency", time.Since(c.t.At).String())
	return nil
}
