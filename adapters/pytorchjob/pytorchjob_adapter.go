// Package pytorchjob recognises the replica pods of a Kubeflow PyTorchJob (training-operator v1,
// kubeflow.org/v1). One job is one gang; each replica type (master, worker) is a sub-group. The gang
// size follows the job's own minimum: runPolicy.schedulingPolicy.minAvailable, else
// elasticPolicy.minReplicas, else the sum of all replicas.
package pytorchjob

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Labels the training operator puts on replica pods (pkg/apis/kubeflow.org/v1/common_types.go).
const (
	JobNameLabel      = "training.kubeflow.org/job-name"
	OperatorNameLabel = "training.kubeflow.org/operator-name"
	ReplicaTypeLabel  = "training.kubeflow.org/replica-type"

	// OperatorName is the operator-name label value of PyTorchJob pods.
	OperatorName = "pytorchjob-controller"
	// Container is the container the operator requires in every replica template.
	Container = "pytorch"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "pytorchjob"

// PyTorchJobGVK is the kind this adapter reads.
var PyTorchJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}

// Adapter recognises PyTorchJob pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
	_ adapters.GangShaper    = (*Adapter)(nil)
)

// New returns the PyTorchJob adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{PyTorchJobGVK}
}

// Recognize implements adapters.Adapter: a pod of a PyTorchJob (not of the operator's other job
// kinds, which share the label keys).
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	if pod.Labels[JobNameLabel] == "" {
		return false
	}
	return pod.Labels[OperatorNameLabel] == OperatorName ||
		adapters.ControllerOfKind(pod, PyTorchJobGVK.Group, PyTorchJobGVK.Kind) != nil
}

// Describe implements adapters.Adapter.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	job := pod.Labels[JobNameLabel]
	if ref := adapters.ControllerOfKind(pod, PyTorchJobGVK.Group, PyTorchJobGVK.Kind); ref != nil {
		job = ref.Name
	}
	w := adapters.Workload{
		Kind:          adapters.KindTraining,
		PodGroup:      adapters.GroupName("pytorchjob", job),
		MinMember:     1,
		SubGroup:      pod.Labels[ReplicaTypeLabel],
		PriorityClass: fairwayv1.PriorityClassTraining,
	}
	if adapters.HasContainer(pod, Container) {
		w.GPUContainer = Container
	}
	obj, err := objects.Get(ctx, PyTorchJobGVK, pod.Namespace, job)
	if err != nil {
		w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("PyTorchJob %s/%s", pod.Namespace, job), err))
		return w, nil
	}
	shape := Shape(obj)
	w.MinMember, w.SubGroups = shape.MinMember, shape.SubGroups
	w.QueueHint = adapters.QueueFromLabels(obj.GetLabels())
	w.Recreatable = adapters.Bool(Restarted(obj, pod.Labels[ReplicaTypeLabel]))
	return w, nil
}

// Restarted reports whether the training operator brings a replica of the type back after its
// pod is evicted without failing the job: its restartPolicy (default OnFailure, as the operator
// defaults it) is OnFailure, Always or ExitCode; under Never the job fails with the pod.
func Restarted(job *unstructured.Unstructured, replicaType string) bool {
	replicas, _, _ := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs")
	for name, r := range replicas {
		rs, ok := r.(map[string]any)
		if !ok || !strings.EqualFold(name, replicaType) {
			continue
		}
		policy, _, _ := unstructured.NestedString(rs, "restartPolicy")
		return policy != string(corev1.RestartPolicyNever)
	}
	return false
}

// MinMember is a PyTorchJob's gang size, Shape(job).MinMember.
func MinMember(job *unstructured.Unstructured) int32 { return Shape(job).MinMember }

// GangOwnerKinds implements adapters.GangShaper.
func (*Adapter) GangOwnerKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{PyTorchJobGVK}
}

// GangShapes implements adapters.GangShaper.
func (*Adapter) GangShapes(job *unstructured.Unstructured) []adapters.GangShape {
	return []adapters.GangShape{Shape(job)}
}

// Shape is a PyTorchJob's gang. Each replica type is a sub-group named as the operator labels its
// pods (training.kubeflow.org/replica-type, the type in lower case), Master first: the Master (and
// any type but Worker) needs all its replicas (each defaulting to 1, as the operator defaults
// them); the Workers need spec.elasticPolicy.minReplicas of an elastic job, all their replicas
// otherwise. So an elastic job whose workers the HPA scales keeps its minimum, workers above it
// join the running gang as capacity allows, and no job starts with workers and no master.
//
// spec.runPolicy.schedulingPolicy.minAvailable, when set, is the gang's minimum instead, as for
// the operator's own gang schedulers; the Master then needs up to that many, the Workers the rest.
func Shape(job *unstructured.Unstructured) adapters.GangShape {
	shape := adapters.GangShape{PodGroup: adapters.GroupName("pytorchjob", job.GetName())}
	spec, _, _ := unstructured.NestedMap(job.Object, "spec")
	replicas, _, _ := unstructured.NestedMap(spec, "pytorchReplicaSpecs")
	elastic := adapters.Int64Field(spec, 0, "elasticPolicy", "minReplicas")
	minAvailable := adapters.Int64Field(spec, 0, "runPolicy", "schedulingPolicy", "minAvailable")
	types := slices.Sorted(maps.Keys(replicas))
	slices.SortStableFunc(types, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	budget := int64(adapters.MaxMinMember)
	if minAvailable > 0 {
		budget = min(minAvailable, adapters.MaxMinMember)
	}
	var total int64
	for _, t := range types {
		rs, ok := replicas[t].(map[string]any)
		if !ok {
			continue
		}
		n := min(max(adapters.Int64Field(rs, 1, "replicas"), 0), adapters.MaxMinMember)
		if strings.EqualFold(t, "Worker") && elastic > 0 {
			n = min(elastic, adapters.MaxMinMember)
		}
		n = min(n, budget-total)
		if n > 0 && len(shape.SubGroups) < maxSubGroups {
			shape.SubGroups = append(shape.SubGroups, fairwayv1.SubGroup{Name: strings.ToLower(t), MinMember: int32(n)})
		}
		total += max(n, 0)
	}
	if minAvailable > 0 {
		total = budget
	}
	shape.MinMember = adapters.Clamp32(total, 1, adapters.MaxMinMember)
	return shape
}

// rank orders replica types: Master first, Worker last, any other between.
func rank(replicaType string) int {
	switch {
	case strings.EqualFold(replicaType, "Master"):
		return 0
	case strings.EqualFold(replicaType, "Worker"):
		return 2
	}
	return 1
}

// maxSubGroups is the PodGroup API's bound on spec.subGroups.
const maxSubGroups = 32
