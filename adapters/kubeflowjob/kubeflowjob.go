// Package kubeflowjob is the core the adapters of the Kubeflow Training Operator v1 family share
// (kubeflow.org/v1 PyTorchJob, MPIJob, TFJob, XGBoostJob, PaddleJob, JAXJob): the operator builds
// the replica pods of every kind the same way (pkg/controller.v1/common), so one Adapter, set up
// with a Kind, serves each of them. The per-kind packages (adapters/pytorchjob, adapters/mpijob,
// ...) only describe their kind, as Kueue's kubeflowjob core and its per-kind packages do.
//
// One job is one gang; each replica type (launcher, master, chief, worker, ...) is a sub-group,
// named as the operator labels its pods (training.kubeflow.org/replica-type, the type in lower
// case). The gang's size is the job's own minimum: spec.runPolicy.schedulingPolicy.minAvailable,
// else the sum of the replica types' minimums (every replica, but for the workers of an elastic
// job: elasticPolicy.minReplicas).
package kubeflowjob

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

// Labels the training operator puts on every replica pod (pkg/apis/kubeflow.org/v1/common_types.go
// of training-operator v1.8.1; JobController.GenLabels and the replica type in lower case).
const (
	JobNameLabel      = "training.kubeflow.org/job-name"
	OperatorNameLabel = "training.kubeflow.org/operator-name"
	ReplicaTypeLabel  = "training.kubeflow.org/replica-type"
	ReplicaIndexLabel = "training.kubeflow.org/replica-index"
)

// Group is the API group of the Training Operator v1 kinds.
const Group = "kubeflow.org"

// Kind describes one job kind of the Training Operator v1 to the shared Adapter.
type Kind struct {
	// Framework is the adapter's name, written to the pods' fairway.dev/framework label and used
	// as the prefix of the gang's name ("mpijob" → gang "mpijob-<job>").
	Framework string
	// GVK is the job's kind (kubeflow.org/v1).
	GVK schema.GroupVersionKind
	// OperatorName is the training.kubeflow.org/operator-name value the operator's controller for
	// this kind writes on its pods (its controllerName, "mpijob-controller").
	OperatorName string
	// ReplicaSpecsField is the spec field that maps replica types to replica specs
	// ("mpiReplicaSpecs").
	ReplicaSpecsField string
	// Container is the container the operator looks for in each replica (its default container
	// name, "mpi"), which gets the GPU share when the pod has one of that name.
	Container string
	// DefaultRestartPolicy is the restart policy the operator's defaulting gives a replica type
	// that sets none.
	DefaultRestartPolicy corev1.RestartPolicy
	// Order lists the replica types in the order they claim the gang's minimum: the types a job
	// cannot run without (launcher, master, chief) first, the workers last. A type not listed
	// comes after the listed ones.
	Order []string
	// FailedReplicasFail says the kind's controller never makes a failed replica again, whatever
	// its restartPolicy: the MPIJob controller of v1.8.1 fails the job when the launcher pod
	// fails and leaves failed workers failed, where the other kinds delete a failed pod of a
	// replica type that restarts and make it anew (pkg/controller.v1/common/pod.go).
	FailedReplicasFail bool
	// ElasticType is the replica type whose minimum is spec.elasticPolicy.minReplicas, when set,
	// instead of its replicas ("Worker" for PyTorchJob and PaddleJob); empty for kinds that are
	// not elastic.
	ElasticType string
}

// Adapter recognises the pods of one Training Operator kind. It implements adapters.Adapter,
// adapters.ObjectWatcher and adapters.GangShaper.
type Adapter struct{ kind Kind }

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
	_ adapters.GangShaper    = (*Adapter)(nil)
)

// New returns the adapter of kind k.
func New(k Kind) *Adapter { return &Adapter{kind: k} }

// Kind returns the kind the adapter serves.
func (a *Adapter) Kind() Kind { return a.kind }

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return a.kind.Framework }

// WatchedKinds implements adapters.ObjectWatcher.
func (a *Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{a.kind.GVK}
}

// GangOwnerKinds implements adapters.GangShaper.
func (a *Adapter) GangOwnerKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{a.kind.GVK}
}

// Recognize implements adapters.Adapter: a pod with the operator's job-name label whose
// operator-name label, or else controller owner, is this kind's. The operator's kinds share the
// label keys, so the job-name label alone does not say which kind made the pod.
func (a *Adapter) Recognize(pod *corev1.Pod) bool {
	if pod.Labels[JobNameLabel] == "" {
		return false
	}
	if op, ok := pod.Labels[OperatorNameLabel]; ok {
		return op == a.kind.OperatorName
	}
	return adapters.ControllerOfKind(pod, a.kind.GVK.Group, a.kind.GVK.Kind) != nil
}

// Describe implements adapters.Adapter.
func (a *Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	job := pod.Labels[JobNameLabel]
	if ref := adapters.ControllerOfKind(pod, a.kind.GVK.Group, a.kind.GVK.Kind); ref != nil {
		job = ref.Name
	}
	w := adapters.Workload{
		Kind:          adapters.KindTraining,
		PodGroup:      a.GroupName(job),
		MinMember:     1,
		SubGroup:      pod.Labels[ReplicaTypeLabel],
		PriorityClass: fairwayv1.PriorityClassTraining,
	}
	if adapters.HasContainer(pod, a.kind.Container) {
		w.GPUContainer = a.kind.Container
	}
	obj, err := objects.Get(ctx, a.kind.GVK, pod.Namespace, job)
	if err != nil {
		w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("%s %s/%s", a.kind.GVK.Kind, pod.Namespace, job), err))
		return w, nil
	}
	shape := a.Shape(obj)
	w.MinMember, w.SubGroups = shape.MinMember, shape.SubGroups
	w.QueueHint = adapters.QueueFromLabels(obj.GetLabels())
	w.Recreatable = adapters.Bool(a.Restarted(obj, pod.Labels[ReplicaTypeLabel]))
	return w, nil
}

// GroupName is the gang name of the job named job.
func (a *Adapter) GroupName(job string) string { return adapters.GroupName(a.kind.Framework, job) }

// GangShapes implements adapters.GangShaper.
func (a *Adapter) GangShapes(job *unstructured.Unstructured) []adapters.GangShape {
	return []adapters.GangShape{a.Shape(job)}
}

// Restarted reports whether the operator brings a replica of the type back after its pod is
// evicted without failing the job: the replica type's restartPolicy (the kind's default when it
// sets none) is OnFailure, Always or ExitCode, and the kind's controller replaces failed pods.
// Under Never the operator fails the job when the pod fails, which an evicted pod on a real node
// does before it is deleted (the kubelet gives a deleted pod a terminal phase).
func (a *Adapter) Restarted(job *unstructured.Unstructured, replicaType string) bool {
	if a.kind.FailedReplicasFail {
		return false
	}
	replicas, _, _ := unstructured.NestedMap(job.Object, "spec", a.kind.ReplicaSpecsField)
	for name, r := range replicas {
		rs, ok := r.(map[string]any)
		if !ok || !strings.EqualFold(name, replicaType) {
			continue
		}
		policy, _, _ := unstructured.NestedString(rs, "restartPolicy")
		if policy == "" {
			policy = string(a.kind.DefaultRestartPolicy)
		}
		return policy != string(corev1.RestartPolicyNever)
	}
	return false
}

// Shape is the job's gang. Each replica type is a sub-group, in the kind's Order: every type
// needs all its replicas (each defaulting to 1, as the operator defaults them), but for the
// elastic type of a job with spec.elasticPolicy.minReplicas, which needs that many. So an MPIJob
// never starts its launcher without its workers nor its workers without their launcher, an
// elastic job whose workers the HPA scales keeps its minimum, and workers above it join the
// running gang as capacity allows.
//
// spec.runPolicy.schedulingPolicy.minAvailable, when set, is the gang's minimum instead, as for
// the operator's own gang schedulers (Volcano, scheduler-plugins); the first types in Order then
// need up to that many, the last ones the rest.
func (a *Adapter) Shape(job *unstructured.Unstructured) adapters.GangShape {
	shape := adapters.GangShape{PodGroup: a.GroupName(job.GetName())}
	spec, _, _ := unstructured.NestedMap(job.Object, "spec")
	replicas, _, _ := unstructured.NestedMap(spec, a.kind.ReplicaSpecsField)
	elastic := int64(0)
	if a.kind.ElasticType != "" {
		elastic = adapters.Int64Field(spec, 0, "elasticPolicy", "minReplicas")
	}
	minAvailable := adapters.Int64Field(spec, 0, "runPolicy", "schedulingPolicy", "minAvailable")
	types := slices.Sorted(maps.Keys(replicas))
	slices.SortStableFunc(types, func(x, y string) int { return cmp.Compare(a.rank(x), a.rank(y)) })
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
		if elastic > 0 && strings.EqualFold(t, a.kind.ElasticType) {
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

// rank is a replica type's place in the kind's Order; types not listed come last.
func (a *Adapter) rank(replicaType string) int {
	for i, t := range a.kind.Order {
		if strings.EqualFold(t, replicaType) {
			return i
		}
	}
	return len(a.kind.Order)
}

// maxSubGroups is the PodGroup API's bound on spec.subGroups.
const maxSubGroups = 32
