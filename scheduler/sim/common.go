// Package sim replays workloads through fairway's scheduling engine in simulated time: the
// engine, the snapshot and the cycle are the scheduler's own (scheduler/engine,
// scheduler/snapshot); this package plays the rest of the cluster around them, as the runtime
// and the workload controllers would: it creates pods when they arrive, confirms the engine's
// bindings, deletes pods when they finish or once evicted, and recreates evicted pods that their
// controller would make again. docs/simulator.md describes the inputs and outputs.
package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// simEpoch is simulated time zero; fixed so that replays are deterministic.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// QueueObject is a top-level queue without quotas that serves the namespace of its name.
func QueueObject(name string) *v1alpha1.Queue {
	return &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(simEpoch)},
		Spec: v1alpha1.QueueSpec{Namespaces: []string{name}}}
}

func keyOf(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// binder confirms bindings as the runtime does: the bound pod comes back from the API server
// with its node, its GPU indexes and Running, and is upserted.
type binder struct {
	snap *snapshot.Snapshot
}

// bind applies one binding to the pod object and returns the milli-GPU it took.
func (b *binder) bind(obj *corev1.Pod, bd engine.Binding, now time.Time) (int64, error) {
	if obj.Name != bd.Pod.Name || obj.Namespace != bd.Pod.Namespace {
		return 0, fmt.Errorf("binding of %s for pod %s/%s", bd.Pod, obj.Namespace, obj.Name)
	}
	obj.Spec.NodeName = bd.Node
	obj.Status.Phase = corev1.PodRunning
	st := metav1.NewTime(now)
	obj.Status.StartTime = &st
	var idx []string
	for _, g := range bd.GPUs {
		idx = append(idx, strconv.Itoa(g.Index))
	}
	milli := int64(len(bd.GPUs)) * snapshot.MilliPerGPU
	if bd.Shared != nil {
		idx = append(idx, strconv.Itoa(bd.Shared.Index))
		milli += bd.Shared.MilliGPU
	}
	if len(idx) > 0 {
		obj.Annotations[v1alpha1.GPUIndexAnnotation] = strings.Join(idx, ",")
	}
	if err := b.snap.UpsertPod(obj); err != nil {
		return 0, fmt.Errorf("confirming binding of %s: %w", bd.Pod, err)
	}
	return milli, nil
}
