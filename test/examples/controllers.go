package examples

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
	"github.com/fairway-sched/fairway/adapters/lws"
)

// This file plays, in the open, the controllers the examples need and the test cluster does not
// run: Kubeflow's notebook-controller, the LeaderWorkerSet controller and MLflow's Kubernetes
// backend. Each builds the object its controller builds, from the controller's source at a tagged
// release; the StatefulSet and Job controllers of the test cluster then make the pods.

// NotebookStatefulSet is the StatefulSet the notebook-controller makes for a Notebook
// (kubeflow/kubeflow@v1.10.0, components/notebook-controller/controllers/notebook_controller.go,
// generateStatefulSet): one replica named after the notebook, the labels statefulset and
// notebook-name plus the Notebook's own, and on container 0 the working directory, the
// notebook-port port and NB_PREFIX; fsGroup 100. The Notebook is its owner in the real cluster;
// here the StatefulSet stands alone (the CRD is not installed), which changes nothing for its pod.
func NotebookStatefulSet(notebook *unstructured.Unstructured) (*appsv1.StatefulSet, error) {
	var tmpl corev1.PodTemplateSpec
	raw, found, err := unstructured.NestedMap(notebook.Object, "spec", "template")
	if err != nil {
		return nil, fmt.Errorf("notebook %s: spec.template: %w", notebook.GetName(), err)
	}
	if !found {
		return nil, fmt.Errorf("notebook %s has no spec.template", notebook.GetName())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &tmpl, true); err != nil {
		return nil, fmt.Errorf("notebook %s: spec.template: %w", notebook.GetName(), err)
	}
	if len(tmpl.Spec.Containers) == 0 {
		return nil, fmt.Errorf("notebook %s has no container", notebook.GetName())
	}
	name := notebook.GetName()
	labels := map[string]string{kubeflownotebook.StatefulSetLabel: name, kubeflownotebook.NotebookNameLabel: name}
	for k, v := range notebook.GetLabels() {
		labels[k] = v
	}
	tmpl.Labels = labels
	c := &tmpl.Spec.Containers[0]
	if c.WorkingDir == "" {
		c.WorkingDir = "/home/jovyan"
	}
	if c.Ports == nil {
		c.Ports = []corev1.ContainerPort{{ContainerPort: 8888, Name: "notebook-port", Protocol: corev1.ProtocolTCP}}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "NB_PREFIX", Value: "/notebook/" + notebook.GetNamespace() + "/" + name})
	if tmpl.Spec.SecurityContext == nil {
		tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](100)}
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: notebook.GetNamespace()},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{kubeflownotebook.StatefulSetLabel: name}},
			Template: tmpl,
		},
	}, nil
}

// LeaderWorkerSetGroup is a LeaderWorkerSet's group as the LWS controller makes it
// (kubernetes-sigs/lws@v0.8.0): the leader StatefulSet (named after the set, pod template labelled
// with the set's name and worker index 0, annotated with the group size;
// constructLeaderStatefulSetApplyConfiguration) and a worker StatefulSet for the leader pod
// named leader (named after it, ordinals from 1, size-1 replicas, labelled with the set's name and
// the group index, annotated with the size and the leader's name;
// constructWorkerStatefulSetApplyConfiguration). The controller creates the worker StatefulSet
// once the leader pod exists (startupPolicy LeaderCreated); so must the caller. Both run tmpl.
func LeaderWorkerSetGroup(set, namespace string, size int32, group int, tmpl corev1.PodTemplateSpec) (leader, workers *appsv1.StatefulSet) {
	leaderName := fmt.Sprintf("%s-%d", set, group)
	sizeText := strconv.Itoa(int(size))
	leaderTmpl := *tmpl.DeepCopy()
	leaderTmpl.Labels = merge(tmpl.Labels, map[string]string{lws.SetNameLabel: set, lws.WorkerIndexLabel: "0"})
	leaderTmpl.Annotations = merge(tmpl.Annotations, map[string]string{lws.SizeAnnotation: sizeText})
	workerLabels := map[string]string{lws.SetNameLabel: set, "leaderworkerset.sigs.k8s.io/group-index": strconv.Itoa(group)}
	workerTmpl := *tmpl.DeepCopy()
	workerTmpl.Labels = merge(tmpl.Labels, workerLabels)
	workerTmpl.Annotations = merge(tmpl.Annotations, map[string]string{lws.SizeAnnotation: sizeText, lws.LeaderNameAnnotation: leaderName})
	leader = &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: namespace, Labels: map[string]string{lws.SetNameLabel: set}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(group + 1)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			ServiceName:         set,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{lws.SetNameLabel: set, lws.WorkerIndexLabel: "0"}},
			Template:            leaderTmpl,
		},
	}
	workers = &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: leaderName, Namespace: namespace, Labels: workerLabels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(size - 1),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			ServiceName:         set,
			Ordinals:            &appsv1.StatefulSetOrdinals{Start: 1},
			Selector:            &metav1.LabelSelector{MatchLabels: workerLabels},
			Template:            workerTmpl,
		},
	}
	return leader, workers
}

// MLflowJob fills an MLflow project's Kubernetes job template as MLflow's Kubernetes backend does
// (mlflow/projects/kubernetes.py, _get_kubernetes_job_definition): the Job named
// <project>-<timestamp>, container 0 named after the project with the project's image and
// entry-point command, and the run's environment appended (mlflow/projects/utils.py,
// get_run_env_vars).
func MLflowJob(template *unstructured.Unstructured, project, timestamp, image string, command []string, runID, experimentID, trackingURI string) (*batchv1.Job, error) {
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(template.Object, &job, true); err != nil {
		return nil, fmt.Errorf("job template: %w", err)
	}
	if len(job.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("job template has no container")
	}
	job.Name = project + "-" + timestamp
	c := &job.Spec.Template.Spec.Containers[0]
	c.Name, c.Image, c.Command = project, image, command
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "MLFLOW_RUN_ID", Value: runID},
		corev1.EnvVar{Name: "MLFLOW_TRACKING_URI", Value: trackingURI},
		corev1.EnvVar{Name: "MLFLOW_EXPERIMENT_ID", Value: experimentID})
	return &job, nil
}

func merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
