// Package plainpod is the fallback adapter, last in the registry: it recognises every pod no
// framework adapter claimed (bare pods, Deployments, batch Jobs) and makes each a gang of its own,
// keeping the cluster's default priority. DaemonSet pods are left alone: their controller pins each
// to a node, and fairway has nothing to decide for them.
//
// A Job's pod is recreatable when the Job's podFailurePolicy ignores DisruptionTarget
// (adapters.IgnoresDisruption): otherwise each eviction counts against its backoffLimit. Other
// pods are left to the owner-kind default (v1alpha1.PodRecreatable).
package plainpod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
)

// JobGVK is the kind whose podFailurePolicy decides whether its pods come back after an eviction.
var JobGVK = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

// Name is the framework name on the pods this adapter handles.
const Name = "none"

// Adapter is the fallback adapter.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
)

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind { return []schema.GroupVersionKind{JobGVK} }

// New returns the fallback adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: every pod.
func (*Adapter) Recognize(*corev1.Pod) bool { return true }

// Describe implements adapters.Adapter. PodGroup stays empty: a pod without a name (made from
// generateName) has nothing stable to name its gang after, so the webhook names it from the
// admission request.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	if adapters.ControllerOfKind(pod, "apps", "DaemonSet") != nil {
		return adapters.Workload{Ignore: "DaemonSet pod"}, nil
	}
	w := adapters.Workload{Kind: adapters.KindPod, MinMember: 1}
	if pod.Name != "" {
		w.PodGroup = adapters.GroupName("pod", pod.Name)
	}
	if ref := adapters.ControllerOfKind(pod, JobGVK.Group, JobGVK.Kind); ref != nil {
		// A Job that cannot be read leaves the default, which takes its pods for lost.
		if job, err := objects.Get(ctx, JobGVK, pod.Namespace, ref.Name); err == nil {
			spec, _ := job.Object["spec"].(map[string]any)
			w.Recreatable = adapters.Bool(adapters.IgnoresDisruption(spec))
		}
	}
	return w, nil
}
