// Package jobset recognises the pods of a JobSet (jobset.x-k8s.io/v1alpha2), and so of Kubeflow
// Trainer v2 TrainJobs, which render into a JobSet of the same name (Pod -> Job -> JobSet ->
// TrainJob).
//
// A JobSet whose replicated jobs start together is one gang, each replicated job a sub-group.
// A JobSet that starts them in order (startupPolicy InOrder, or dependsOn, as TrainJob's
// initializers do) is one gang per replicated job, so that an initializer that must finish first
// is not held back waiting for the trainer nodes. A replicated job counts replicas times the
// pods each Job runs at once: min(parallelism, completions).
package jobset

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Labels JobSet puts on every pod (api/jobset/v1alpha2/jobset_types.go).
const (
	JobSetNameLabel        = "jobset.sigs.k8s.io/jobset-name"
	ReplicatedJobNameLabel = "jobset.sigs.k8s.io/replicatedjob-name"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "jobset"

// The kinds this adapter reads.
var (
	JobSetGVK   = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
	TrainJobGVK = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
)

// Adapter recognises JobSet pods.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
	_ adapters.GangShaper    = (*Adapter)(nil)
)

// New returns the JobSet adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{JobSetGVK, TrainJobGVK}
}

// Recognize implements adapters.Adapter.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	return pod.Labels[JobSetNameLabel] != ""
}

// Describe implements adapters.Adapter.
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	name := pod.Labels[JobSetNameLabel]
	rjob := pod.Labels[ReplicatedJobNameLabel]
	w := adapters.Workload{
		Kind:          adapters.KindTraining,
		PodGroup:      adapters.GroupName("jobset", name),
		MinMember:     1,
		SubGroup:      rjob,
		PriorityClass: fairwayv1.PriorityClassTraining,
	}
	if len(pod.Spec.Containers) > 0 {
		w.GPUContainer = pod.Spec.Containers[0].Name
	}
	js, err := objects.Get(ctx, JobSetGVK, pod.Namespace, name)
	if err != nil {
		w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("JobSet %s/%s", pod.Namespace, name), err))
		return w, nil
	}
	if inOrder(js) {
		w.PodGroup = adapters.GroupName("jobset", name, rjob)
		w.SubGroup = ""
	}
	if shape, ok := adapters.ShapeOf(Shapes(js), w.PodGroup); ok {
		w.MinMember, w.SubGroups = shape.MinMember, shape.SubGroups
	}
	w.Recreatable = adapters.Bool(ReplicatedJobIgnoresDisruption(js, rjob))
	w.QueueHint = adapters.QueueFromLabels(js.GetLabels())
	if ref := adapters.ControllerOf(js); w.QueueHint == "" && ref != nil && ref.Kind == TrainJobGVK.Kind {
		if tj, err := objects.Get(ctx, TrainJobGVK, js.GetNamespace(), ref.Name); err == nil {
			w.QueueHint = adapters.QueueFromLabels(tj.GetLabels())
		}
	}
	return w, nil
}

// ReplicatedJobSizes returns the pods each replicated job runs at once (replicas, default 1, times
// min(parallelism, completions), parallelism defaulting to 1 and completions to parallelism), and
// whether the JobSet starts its replicated jobs in order.
func ReplicatedJobSizes(js *unstructured.Unstructured) (map[string]int64, bool) {
	spec, _, _ := unstructured.NestedMap(js.Object, "spec")
	order, _, _ := unstructured.NestedString(spec, "startupPolicy", "startupPolicyOrder")
	inOrder := order == "InOrder"
	rjobs, _, _ := unstructured.NestedSlice(spec, "replicatedJobs")
	sizes := make(map[string]int64, len(rjobs))
	for _, r := range rjobs {
		rj, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if deps, _, _ := unstructured.NestedSlice(rj, "dependsOn"); len(deps) > 0 {
			inOrder = true
		}
		name, _, _ := unstructured.NestedString(rj, "name")
		replicas := min(max(adapters.Int64Field(rj, 1, "replicas"), 0), adapters.MaxMinMember)
		parallelism := max(adapters.Int64Field(rj, 1, "template", "spec", "parallelism"), 0)
		completions := max(adapters.Int64Field(rj, parallelism, "template", "spec", "completions"), 0)
		sizes[name] = replicas * min(parallelism, completions, adapters.MaxMinMember)
	}
	return sizes, inOrder
}

// ReplicatedJobIgnoresDisruption reports whether the Job template of the named replicated job
// does not count evictions against its backoffLimit (adapters.IgnoresDisruption): then its Job
// makes an evicted pod again and the JobSet goes on; otherwise each eviction burns a retry of
// the Job, and its failure fails or restarts the whole JobSet.
func ReplicatedJobIgnoresDisruption(js *unstructured.Unstructured, rjob string) bool {
	rjobs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	for _, r := range rjobs {
		rj, ok := r.(map[string]any)
		if !ok || rj["name"] != rjob {
			continue
		}
		spec, _, _ := unstructured.NestedMap(rj, "template", "spec")
		return adapters.IgnoresDisruption(spec)
	}
	return false
}

// GangOwnerKinds implements adapters.GangShaper.
func (*Adapter) GangOwnerKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{JobSetGVK}
}

// GangShapes implements adapters.GangShaper.
func (*Adapter) GangShapes(js *unstructured.Unstructured) []adapters.GangShape { return Shapes(js) }

// Shapes are a JobSet's gangs. A JobSet started in order (ReplicatedJobSizes) is one gang per
// replicated job, each of its size, with no sub-groups. Otherwise it is one gang of every
// replicated job's size, each replicated job a sub-group of its size (named as JobSet labels the
// pods, jobset.sigs.k8s.io/replicatedjob-name), so that a driver cannot be left out of a gang
// its workers fill. Replicated jobs of size 0 are left out.
func Shapes(js *unstructured.Unstructured) []adapters.GangShape {
	sizes, ordered := ReplicatedJobSizes(js)
	names := replicatedJobNames(js)
	if ordered {
		out := make([]adapters.GangShape, 0, len(names))
		for _, rjob := range names {
			out = append(out, adapters.GangShape{
				PodGroup:  adapters.GroupName("jobset", js.GetName(), rjob),
				MinMember: adapters.Clamp32(sizes[rjob], 1, adapters.MaxMinMember),
			})
		}
		return out
	}
	shape := adapters.GangShape{PodGroup: adapters.GroupName("jobset", js.GetName())}
	var total int64
	for _, rjob := range names {
		n := min(sizes[rjob], adapters.MaxMinMember-total)
		if n > 0 && rjob != "" && len(shape.SubGroups) < maxSubGroups {
			shape.SubGroups = append(shape.SubGroups, fairwayv1.SubGroup{Name: rjob, MinMember: int32(n)})
		}
		total += max(n, 0)
	}
	shape.MinMember = adapters.Clamp32(total, 1, adapters.MaxMinMember)
	return []adapters.GangShape{shape}
}

// inOrder reports whether the JobSet's replicated jobs start one after another.
func inOrder(js *unstructured.Unstructured) bool {
	_, ordered := ReplicatedJobSizes(js)
	return ordered
}

// replicatedJobNames lists the replicated jobs in spec order, each once.
func replicatedJobNames(js *unstructured.Unstructured) []string {
	rjobs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	var names []string
	for _, r := range rjobs {
		rj, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if name, _, _ := unstructured.NestedString(rj, "name"); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// maxSubGroups is the PodGroup API's bound on spec.subGroups.
const maxSubGroups = 32
