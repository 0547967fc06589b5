// Package lws recognises the pods of a LeaderWorkerSet (kubernetes-sigs/lws v0.6 to v0.8), the
// API multi-host model servers (vLLM, SGLang, TensorRT-LLM across nodes) run on. A
// LeaderWorkerSet makes replicas groups; each group is a leader pod (from the leader StatefulSet,
// named <lws>-<group>) and size-1 workers (from a StatefulSet per group, named after the leader).
// One group serves one copy of the model and is useless in part, so each group is one gang of
// leaderworkerset.sigs.k8s.io/size pods, with the leader a sub-group of its own: a group never
// starts without its leader. The LWS controller writes the size annotation on both pod templates
// and, on the workers', the leader's name, so every pod knows its group at admission, before the
// LWS webhook (which may run after fairway's) adds the group and worker indexes.
//
// With startupPolicy LeaderReady the controller creates the workers only once the leader is
// ready; a gang of the whole group would then never start, so, as LWS's own Volcano provider does,
// the gang's minimum is the leader alone and the workers join it. The LeaderWorkerSet is read for
// that; when it cannot be read the default policy (LeaderCreated) is assumed, with a warning.
//
// Groups are inference: fairway-inference and non-preemptible by default.
package lws

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Labels and annotations the LWS controller puts on pods (api/leaderworkerset/v1).
const (
	SetNameLabel         = "leaderworkerset.sigs.k8s.io/name"
	WorkerIndexLabel     = "leaderworkerset.sigs.k8s.io/worker-index"
	SizeAnnotation       = "leaderworkerset.sigs.k8s.io/size"
	LeaderNameAnnotation = "leaderworkerset.sigs.k8s.io/leader-name"
)

// Sub-groups of a group's gang.
const (
	LeaderSubGroup = "leader"
	WorkerSubGroup = "worker"
)

// LeaderReady is the startupPolicy under which workers wait for a ready leader.
const LeaderReady = "LeaderReady"

// Name is the framework name on the pods this adapter recognises.
const Name = "leaderworkerset"

// LeaderWorkerSetGVK is the kind whose startupPolicy Describe reads.
var LeaderWorkerSetGVK = schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}

// Adapter recognises LeaderWorkerSet pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
)

// New returns the LeaderWorkerSet adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{LeaderWorkerSetGVK}
}

// Recognize implements adapters.Adapter: a pod with the set's name label and the size annotation,
// which the LWS controller writes on both templates.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	_, sized := pod.Annotations[SizeAnnotation]
	return pod.Labels[SetNameLabel] != "" && sized
}

// Describe implements adapters.Adapter.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	size, err := strconv.ParseInt(pod.Annotations[SizeAnnotation], 10, 32)
	if err != nil || size < 1 {
		return adapters.Workload{}, fmt.Errorf("annotation %s %q: must be the group's pod count, a whole number of at least 1 (the LeaderWorkerSet controller writes it from spec.leaderWorkerTemplate.size)",
			SizeAnnotation, pod.Annotations[SizeAnnotation])
	}
	leader := pod.Annotations[LeaderNameAnnotation]
	sub := WorkerSubGroup
	if leader == "" {
		leader, sub = pod.Name, LeaderSubGroup
	}
	if leader == "" {
		return adapters.Workload{}, fmt.Errorf("a LeaderWorkerSet pod needs a name (the leader's) or annotation %s (a worker's); this one has neither", LeaderNameAnnotation)
	}
	w := adapters.Workload{
		Kind:     adapters.KindInference,
		PodGroup: adapters.GroupName("lws", leader),
		SubGroup: sub,
	}
	leaderReady := false
	set := pod.Labels[SetNameLabel]
	if lws, err := objects.Get(ctx, LeaderWorkerSetGVK, pod.Namespace, set); err != nil {
		w.Warnings = append(w.Warnings, fmt.Sprintf("fairway: cannot read LeaderWorkerSet %s/%s (%s); its group is started as one gang of %d, as under the default startupPolicy LeaderCreated",
			pod.Namespace, set, adapters.ReadFailure(err), size))
	} else {
		policy, _, _ := unstructured.NestedString(lws.Object, "spec", "startupPolicy")
		leaderReady = policy == LeaderReady
		w.QueueHint = adapters.QueueFromLabels(lws.GetLabels())
	}
	w.MinMember, w.SubGroups = Shape(int32(size), leaderReady)
	return w, nil
}

// Shape is the gang of one group of size pods: the whole group with the leader as a sub-group of
// 1, or the leader alone when workers wait for it (startupPolicy LeaderReady).
func Shape(size int32, leaderReady bool) (int32, []fairwayv1.SubGroup) {
	if leaderReady || size == 1 {
		return 1, []fairwayv1.SubGroup{{Name: LeaderSubGroup, MinMember: 1}}
	}
	return size, []fairwayv1.SubGroup{{Name: LeaderSubGroup, MinMember: 1}, {Name: WorkerSubGroup, MinMember: size - 1}}
}
