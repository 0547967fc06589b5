// Package plainpod is the fallback adapter, last in the registry: it recognises every pod no
// framework adapter claimed (bare pods, Deployments, batch Jobs) and makes each a gang of its own,
// keeping the cluster's default priority. DaemonSet pods are left alone: their controller pins each
// to a node, and fairway has nothing to decide for them.
package plainpod

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Name is the framework name on the pods this adapter handles.
const Name = "none"

// Adapter is the fallback adapter.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the fallback adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: every pod.
func (*Adapter) Recognize(*corev1.Pod) bool { return true }

// Describe implements adapters.Adapter. PodGroup stays empty: a pod without a name (made from
// generateName) has nothing stable to name its gang after, so the webhook names it from the
// admission request.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	if adapters.ControllerOfKind(pod, "apps", "DaemonSet") != nil {
		return adapters.Workload{Ignore: "DaemonSet pod"}, nil
	}
	w := adapters.Workload{Kind: adapters.KindPod, MinMember: 1}
	if pod.Name != "" {
		w.PodGroup = adapters.GroupName("pod", pod.Name)
	}
	return w, nil
}
