// Package kubeflownotebook recognises the notebook servers of Kubeflow Notebooks (the
// notebook-controller of kubeflow/kubeflow v1.7 to v1.10, kubeflow/notebooks): a Notebook object
// becomes a StatefulSet of one replica named after the notebook, whose pod template carries the
// labels statefulset=<notebook> and notebook-name=<notebook> (generateStatefulSet in
// components/notebook-controller/controllers/notebook_controller.go). The notebook runs in
// container 0, which Kubeflow's web app names after the notebook and the controller gives
// NB_PREFIX; that container gets the GPU share.
//
// A notebook is interactive work, as a JupyterHub one: a gang of its own, fairway-interactive and
// non-preemptible by its kind, and, in a queue that lends, its idle GPU is lent (the gpu-agent
// tracks the idleness of every notebook pod, v1alpha1.IsInteractive).
package kubeflownotebook

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Labels the notebook-controller puts on the pod template.
const (
	NotebookNameLabel = "notebook-name"
	StatefulSetLabel  = "statefulset"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "kubeflow-notebook"

// Adapter recognises Kubeflow notebook pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the Kubeflow Notebooks adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: a pod of the notebook's StatefulSet, whose two labels
// both name the notebook. Other tools label pods notebook-name too; the StatefulSet owner named
// after the notebook is the controller's.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	nb := pod.Labels[NotebookNameLabel]
	if nb == "" || pod.Labels[StatefulSetLabel] != nb {
		return false
	}
	ref := adapters.ControllerOfKind(pod, "apps", "StatefulSet")
	return ref != nil && ref.Name == nb
}

// Describe implements adapters.Adapter. The gang is named after the notebook, which is one pod.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	nb := pod.Labels[NotebookNameLabel]
	w := adapters.Workload{Kind: adapters.KindNotebook, PodGroup: adapters.GroupName("nb", nb), MinMember: 1}
	switch {
	case adapters.HasContainer(pod, nb):
		w.GPUContainer = nb
	case len(pod.Spec.Containers) > 0:
		w.GPUContainer = pod.Spec.Containers[0].Name
	}
	return w, nil
}
