// Package jupyterhub recognises the single-user notebook pods KubeSpawner (7.x, as configured by
// zero-to-jupyterhub 4.x) creates. Notebook pods are bare pods: each is a gang of its own,
// interactive and non-preemptible by default, with the GPU share on the `notebook` container.
// Fractions come from the profile's extra_annotations (fairway.dev/gpu-fraction or gpu-fraction).
package jupyterhub

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Keys KubeSpawner puts on single-user pods (kubespawner/spawner.py _build_pod_labels).
const (
	ComponentLabel    = "component"
	AppComponentLabel = "app.kubernetes.io/component"
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	UsernameLabel     = "hub.jupyter.org/username"
	ServernameLabel   = "hub.jupyter.org/servername"

	// SingleUserComponent is the component label value of notebook pods.
	SingleUserComponent = "singleuser-server"
	// NotebookContainer is KubeSpawner's container, always at index 0.
	NotebookContainer = "notebook"
	// NotebookPort names the notebook container's port (kubespawner/objects.py make_pod).
	NotebookPort = "notebook-port"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "jupyterhub"

// Adapter recognises JupyterHub notebook pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the JupyterHub adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: a single-user server made by KubeSpawner, known by its
// labels or, when a hub overrides component_label or common_labels, by the shape KubeSpawner's
// make_pod always gives it: container 0 named "notebook" with a port named "notebook-port". The
// user placeholder pods of z2jh are not notebooks and are left to the plain-pod rules.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	l := pod.Labels
	if l[ComponentLabel] == SingleUserComponent || l[AppComponentLabel] == SingleUserComponent {
		if _, hasUser := l[UsernameLabel]; hasUser || l[ManagedByLabel] == "kubespawner" {
			return true
		}
	}
	return hasNotebookShape(pod)
}

func hasNotebookShape(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Name != NotebookContainer {
		return false
	}
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == NotebookPort {
			return true
		}
	}
	return false
}

// Describe implements adapters.Adapter. KubeSpawner names pods deterministically
// (jupyter-<user>[--<server>]), so the gang is "nb-<pod name>".
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	group := adapters.GroupName("nb", pod.Name)
	if pod.Name == "" {
		group = adapters.GroupName("nb", pod.Labels[UsernameLabel], pod.Labels[ServernameLabel])
	}
	w := adapters.Workload{
		Kind:          adapters.KindNotebook,
		PodGroup:      group,
		MinMember:     1,
		PriorityClass: fairwayv1.PriorityClassInteractive,
	}
	if adapters.HasContainer(pod, NotebookContainer) {
		w.GPUContainer = NotebookContainer
	}
	return w, nil
}
