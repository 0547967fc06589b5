package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
)

// swapAsker writes the engine's swap requests (engine.Result.SwapRequests) onto the idle pods,
// as fairway.dev/gpu-swap-request, for the gpu-agent of their node. The engine repeats a request
// every cycle its borrower waits: a pod that already carries it, or whose patch is in flight or
// written but not yet seen by the informer, is left alone, so each request is written once.
type swapAsker struct {
	api kubernetes.Interface
	// asked counts the requests written (fairway_swap_requests_total); nil counts nothing.
	asked prometheus.Counter

	mu sync.Mutex
	// sent are the requests patched or being patched that the informer does not show yet.
	sent map[types.NamespacedName]string
}

func newSwapAsker(api kubernetes.Interface, asked prometheus.Counter) *swapAsker {
	return &swapAsker{api: api, asked: asked, sent: map[types.NamespacedName]string{}}
}

// ask patches each request not on its pod yet; current returns the pod's annotation now ("" when
// absent or the pod is gone). Patches run off the loop.
func (a *swapAsker) ask(ctx context.Context, reqs []engine.SwapRequest, current func(types.NamespacedName) (string, bool), onErr func(error)) {
	a.mu.Lock()
	for k, v := range a.sent {
		if have, ok := current(k); !ok || have == v {
			delete(a.sent, k) // seen written, or the pod is gone
		}
	}
	a.mu.Unlock()
	for _, r := range reqs {
		want := v1alpha1.FormatGPUSwapRequest(r.IdleSince)
		if have, ok := current(r.Pod); !ok || have == want {
			continue
		}
		a.mu.Lock()
		if a.sent[r.Pod] == want {
			a.mu.Unlock()
			continue
		}
		a.sent[r.Pod] = want
		a.mu.Unlock()
		go func() {
			err := a.patch(ctx, r.Pod, want)
			if err != nil {
				a.mu.Lock()
				if a.sent[r.Pod] == want {
					delete(a.sent, r.Pod) // asked again next cycle
				}
				a.mu.Unlock()
			}
			switch {
			case err == nil && a.asked != nil:
				a.asked.Inc()
			case err != nil && onErr != nil:
				onErr(err)
			}
		}()
	}
}

func (a *swapAsker) patch(ctx context.Context, pod types.NamespacedName, value string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.GPUSwapRequestAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encoding the swap request of %s: %w", pod, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := a.api.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("asking the gpu-agent to swap out pod %s: %w", pod, err)
	}
	return nil
}
