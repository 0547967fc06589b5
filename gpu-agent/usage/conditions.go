package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

type wantedCondition struct {
	uid types.UID
	t   Transition
	// attempts counts failed patches, for back-off.
	attempts  int
	notBefore time.Time
}

// ConditionWriter patches fairway.dev/GPUIdle onto pods through the pods/status subresource.
// Set never blocks the poll loop: the latest wanted state of each pod is kept and written by
// Start's loop at once, retried with back-off on failure. Only the condition is sent (a
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

	mu      sync.Mutex
	pending map[types.NamespacedName]*wantedCondition
	kick    chan struct{}
}

// NewConditionWriter returns a writer that patches through c.
func NewConditionWriter(c client.Client, log logr.Logger) *ConditionWriter {
	return &ConditionWriter{
		client:  c,
		log:     log,
		pending: map[types.NamespacedName]*wantedCondition{},
		kick:    make(chan struct{}, 1),
	}
}

// Set asks for pod's condition to reflect t; a later Set for the same pod replaces it.
func (w *ConditionWriter) Set(pod *corev1.Pod, t Transition) {
	w.mu.Lock()
	w.pending[client.ObjectKeyFromObject(pod)] = &wantedCondition{uid: pod.UID, t: t}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Pending reports how many pods still wait for a write.
func (w *ConditionWriter) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Start writes until ctx ends. It implements manager.Runnable.
func (w *ConditionWriter) Start(ctx context.Context) error {
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
func (w *ConditionWriter) NeedLeaderElection() bool { return false }

// flush writes every due condition and returns when to try again (0: nothing left).
func (w *ConditionWriter) flush(ctx context.Context) time.Duration {
	w.mu.Lock()
	due := map[types.NamespacedName]wantedCondition{}
	now := time.Now()
	var next time.Duration
	for key, c := range w.pending {
		if wait := c.notBefore.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		due[key] = *c
	}
	w.mu.Unlock()

	for key, c := range due {
		err := w.patch(ctx, key, c)
		w.mu.Lock()
		cur := w.pending[key]
		switch {
		case cur == nil || cur.t != c.t || cur.uid != c.uid:
			// Replaced while we wrote; the newer one goes next round.
			next = time.Millisecond
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err) && c.attempts > 3:
			delete(w.pending, key)
		default:
			cur.attempts++
			backoff := min(time.Duration(1<<min(cur.attempts, 5))*250*time.Millisecond, 10*time.Second)
			cur.notBefore = time.Now().Add(backoff)
			if next == 0 || backoff < next {
				next = backoff
			}
		}
		w.mu.Unlock()
		if err != nil && !apierrors.IsNotFound(err) {
			w.log.Error(err, "Writing GPU idle condition", "pod", klog.KRef(key.Namespace, key.Name))
		}
	}
	return next
}

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
