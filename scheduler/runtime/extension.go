package runtime

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/pipelines"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Extension is the runtime's extension point: a component that keeps stand-in pods of its own in
// the snapshot and acts on what the engine decides about them. Pipeline admission is the one
// today (package pipelines: a held run's peak, a staged run's next stage). The loop, which owns
// the snapshot, calls it from its goroutine only:
//
//   - Rebuild, after a snapshot is built from the caches: put the stand-ins back;
//   - PodSeen, after a pod from the API server reached the snapshot;
//   - Apply, for a change of one of the extension's own objects (an Argo Workflow);
//   - Decided, after each cycle's Schedule, with the result to read (never to change);
//   - Owns, for each binding of the result: the engine's bindings of stand-ins are the
//     extension's decisions, which the loop never hands to the binder.
type Extension interface {
	Rebuild(snap *snapshot.Snapshot, now time.Time)
	PodSeen(snap *snapshot.Snapshot, pod *corev1.Pod, now time.Time)
	Apply(snap *snapshot.Snapshot, key types.NamespacedName, now time.Time)
	Decided(snap *snapshot.Snapshot, res *engine.Result, now time.Time)
	Owns(pod types.NamespacedName) bool
}

var _ Extension = (*pipelines.Runs)(nil)
