package swap

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// PodWriter is the agent's Writer: it patches fairway.dev/gpu-swap onto the pod (metadata) and
// the GPUSwapCondition through pods/status, each a strategic merge with the pod's UID as a
// precondition, off the controller's loop, retried with back-off; events go through recorder
// (events.k8s.io, the API controller-runtime's managers record with).
type PodWriter struct {
	client   client.Client
	recorder events.EventRecorder
	log      logr.Logger

	mu      sync.Mutex
	pending map[types.NamespacedName]*wantedSwap
	kick    chan struct{}
}

type wantedSwap struct {
	uid       types.UID
	state     *fairwayv1alpha1.GPUSwap
	cond      *Condition
	attempts  int
	notBefore time.Time
}

// NewPodWriter returns a writer patching through c.
func NewPodWriter(c client.Client, recorder events.EventRecorder, log logr.Logger) *PodWriter {
	return &PodWriter{client: c, recorder: recorder, log: log, pending: map[types.NamespacedName]*wantedSwap{}, kick: make(chan struct{}, 1)}
}

// Write implements Writer; a later Write for the same pod replaces an unwritten one, keeping
// its condition when the later one has none.
func (w *PodWriter) Write(pod *corev1.Pod, state *fairwayv1alpha1.GPUSwap, cond *Condition) {
	key := client.ObjectKeyFromObject(pod)
	w.mu.Lock()
	if prev := w.pending[key]; prev != nil && prev.uid == pod.UID && cond == nil {
		cond = prev.cond
	}
	w.pending[key] = &wantedSwap{uid: pod.UID, state: state, cond: cond}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

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
func (w *PodWriter) Start(ctx context.Context) error {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-retry.C:
		}
		if next := w.flush(ctx); next > 0 {
			retry.Reset(next)
		}
	}
}

// NeedLeaderElection is false: every node's agent writes its own pods.
func (w *PodWriter) NeedLeaderElection() bool { return false }

func (w *PodWriter) flush(ctx context.Context) time.Duration {
	w.mu.Lock()
	due := map[types.NamespacedName]*wantedSwap{}
	now := time.Now()
	var next time.Duration
	for key, s := range w.pending {
		if wait := s.notBefore.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		due[key] = s
	}
	w.mu.Unlock()
	for key, s := range due {
		err := w.patch(ctx, key, s)
		w.mu.Lock()
		switch cur := w.pending[key]; {
		case cur != s:
			next = time.Millisecond // replaced while written
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err) && s.attempts > 3:
			delete(w.pending, key)
		default:
			s.attempts++
			backoff := min(time.Duration(1<<min(s.attempts, 5))*250*time.Millisecond, 10*time.Second)
			s.notBefore = time.Now().Add(backoff)
			if next == 0 || backoff < next {
				next = backoff
			}
		}
		w.mu.Unlock()
		if err != nil && !apierrors.IsNotFound(err) {
			w.log.Error(err, "Writing GPU swap state", "pod", klog.KRef(key.Namespace, key.Name))
		}
	}
	return next
}

func (w *PodWriter) patch(ctx context.Context, key types.NamespacedName, s *wantedSwap) error {
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
