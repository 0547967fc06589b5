package swap

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/podwrite"
)

// PodWriter is the agent's Writer: it patches fairway.dev/gpu-swap onto the pod (metadata) and
// the GPUSwapCondition through pods/status, each a strategic merge with the pod's UID as a
// precondition, off the controller's loop, the latest state of each pod retried with back-off
// (package podwrite); events go through recorder (events.k8s.io, the API controller-runtime's
// managers record with).
type PodWriter struct {
	client   client.Client
	recorder events.EventRecorder
	queue    *podwrite.Queue[wantedSwap]
}

type wantedSwap struct {
	uid   types.UID
	state *fairwayv1alpha1.GPUSwap
	cond  *Condition
}

// NewPodWriter returns a writer patching through c.
func NewPodWriter(c client.Client, recorder events.EventRecorder, log logr.Logger) *PodWriter {
	return newPodWriter(c, recorder, podwrite.Options{Name: "gpu-swap", Log: log})
}

// newPodWriter is NewPodWriter with the queue's options (tests shorten the back-off).
func newPodWriter(c client.Client, recorder events.EventRecorder, opts podwrite.Options) *PodWriter {
	w := &PodWriter{client: c, recorder: recorder}
	w.queue = podwrite.New(w.patch, opts)
	return w
}

// Write implements Writer; a later Write for the same pod replaces an unwritten one, keeping
// its condition when the later one has none: the condition records a swap's outcome, which a
// later state (a new eligibility) must not lose before it is written.
func (w *PodWriter) Write(pod *corev1.Pod, state *fairwayv1alpha1.GPUSwap, cond *Condition) {
	w.queue.Update(client.ObjectKeyFromObject(pod), func(prev wantedSwap, pending bool) wantedSwap {
		if pending && prev.uid == pod.UID && cond == nil {
			cond = prev.cond
		}
		return wantedSwap{uid: pod.UID, state: state, cond: cond}
	})
}

// Pending reports how many pods still wait for a write.
func (w *PodWriter) Pending() int { return w.queue.Pending() }

// Event implements Writer.
func (w *PodWriter) Event(pod *corev1.Pod, warning bool, reason, message string) {
	if w.recorder == nil {
		return
	}
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	w.recorder.Eventf(pod, nil, t, reason, "Swap", "%s", message)
}

// Start writes until ctx ends. It implements manager.Runnable.
func (w *PodWriter) Start(ctx context.Context) error { return w.queue.Start(ctx) }

// NeedLeaderElection is false: every node's agent writes its own pods.
func (w *PodWriter) NeedLeaderElection() bool { return false }

func (w *PodWriter) patch(ctx context.Context, key types.NamespacedName, s wantedSwap) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	var value any // null removes the annotation
	if s.state != nil {
		value = fairwayv1alpha1.FormatGPUSwap(*s.state)
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": s.uid,
		"annotations": map[string]any{fairwayv1alpha1.GPUSwapAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encoding the GPU swap patch: %w", err)
	}
	if err := w.client.Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("annotating %s with its GPU swap state: %w", key, err)
	}
	if s.cond == nil {
		return nil
	}
	status := corev1.ConditionFalse
	if s.cond.Swapped {
		status = corev1.ConditionTrue
	}
	data, err = json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": s.uid},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: fairwayv1alpha1.GPUSwapCondition, Status: status, Reason: s.cond.Reason, Message: s.cond.Message,
			LastTransitionTime: metav1.NewTime(s.cond.At), LastProbeTime: metav1.NewTime(s.cond.At),
		}}},
	})
	if err != nil {
		return fmt.Errorf("encoding the GPU swap condition patch: %w", err)
	}
	if err := w.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("patching %s status with its GPU swap condition: %w", key, err)
	}
	return nil
}
