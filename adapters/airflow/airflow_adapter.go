// Package airflow recognises the pods Apache Airflow (2.x, 3.x; cncf.kubernetes provider) runs on
// Kubernetes for a task: KubernetesPodOperator pods (label kubernetes_pod_operator=True) and the
// worker pods of the KubernetesExecutor (label kubernetes_executor=True). Both carry the task
// instance's dag_id, task_id, run_id (execution_date on Airflow 1.10), map_index (mapped tasks
// only) and try_number labels, already made label-safe by Airflow (pod_generator's
// make_safe_label_value), and run the task in container 0, named base; the operator may add an
// XCom sidecar after it.
//
// One pod runs one try of one task instance, so a gang is the pod, named after the task try: a
// retry is a new try and a new gang. Airflow runs batch work, so the pods are training:
// fairway-training and preemptible by the kind; an evicted try fails and Airflow retries it when
// the task has retries. The GPU share goes on base. The labels are Airflow's: the operator finds
// its pods again by them (and patches already_checked), so the webhook only adds its own.
package airflow

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Labels Airflow puts on task pods (providers/cncf/kubernetes: operators/pod.py
// _get_ti_pod_labels, pod_generator.py build_labels_for_k8s_executor_pod).
const (
	KPOLabel           = "kubernetes_pod_operator"
	ExecutorLabel      = "kubernetes_executor"
	DagIDLabel         = "dag_id"
	TaskIDLabel        = "task_id"
	RunIDLabel         = "run_id"
	ExecutionDateLabel = "execution_date"
	MapIndexLabel      = "map_index"
	TryNumberLabel     = "try_number"
)

// BaseContainer is the container that runs the task (BASE_CONTAINER_NAME).
const BaseContainer = "base"

// Name is the framework name on the pods this adapter recognises.
const Name = "airflow"

// Adapter recognises Airflow task pods.
type Adapter struct{}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the Airflow adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// Recognize implements adapters.Adapter: a KubernetesPodOperator or KubernetesExecutor pod of a
// task instance (Airflow writes "True").
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	l := pod.Labels
	return (l[KPOLabel] == "True" || l[ExecutorLabel] == "True") && l[DagIDLabel] != "" && l[TaskIDLabel] != ""
}

// Describe implements adapters.Adapter: a one-pod training gang per task try.
func (*Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	l := pod.Labels
	run := l[RunIDLabel]
	if run == "" {
		run = l[ExecutionDateLabel]
	}
	kind := "kpo"
	if l[KPOLabel] != "True" {
		kind = "worker"
	}
	w := adapters.Workload{
		Kind:      adapters.KindTraining,
		PodGroup:  adapters.GroupName("airflow", kind, adapters.ShortHash(l[DagIDLabel]+"\x00"+l[TaskIDLabel]+"\x00"+run+"\x00"+l[MapIndexLabel]), l[TaskIDLabel], "try", l[TryNumberLabel]),
		MinMember: 1,
	}
	if adapters.HasContainer(pod, BaseContainer) {
		w.GPUContainer = BaseContainer
	}
	return w, nil
}
