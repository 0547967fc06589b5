// Package usergang recognises gangs users make themselves, of plain pods or of a batch/v1 Job's
// pods, by the conventions they already know from other schedulers, so that such manifests need
// no change to start all-or-nothing under fairway:
//
//   - Kueue's plain pod groups: label kueue.x-k8s.io/pod-group-name names the group, annotation
//     kueue.x-k8s.io/pod-group-total-count its size;
//   - KAI-Scheduler (and Run:ai): annotation pod-group-name names a scheduling.run.ai PodGroup,
//     whose spec.minMember is the size;
//   - the scheduler-plugins coscheduling plugin: label scheduling.x-k8s.io/pod-group names a
//     scheduling.x-k8s.io PodGroup, whose spec.minMember is the size;
//   - Kubernetes' own gang scheduling (the Workload API, scheduling.k8s.io v1beta1 in 1.37, off
//     unless the API server enables it): spec.schedulingGroup.podGroupName names a
//     scheduling.k8s.io PodGroup, whose spec.schedulingPolicy.gang.minCount is the size (a basic
//     policy is no gang). The Job controller's WorkloadWithJob feature makes these for Jobs;
//   - fairway's own, which wins over the others: annotation fairway.dev/gang: "true" on a Job's
//     pod template makes the Job's pods one gang of min(parallelism, completions), the usual
//     shape of an indexed Job.
//
// A gang is work a user wants placed whole, so it runs as training (fairway-training,
// preemptible), unlike single plain pods. The framework adapters come first in the registry: a
// framework that writes one of these keys on its pods (the training operator under
// scheduler-plugins) knows its gangs better.
package usergang

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "gang"

// The keys of the conventions this adapter reads.
const (
	// KueuePodGroupNameLabel and KueuePodGroupTotalCountAnnotation are Kueue's plain pod group keys
	// (kueue.x-k8s.io/pod-group-name, kueue.x-k8s.io/pod-group-total-count).
	KueuePodGroupNameLabel            = "kueue.x-k8s.io/pod-group-name"
	KueuePodGroupTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
	// KAIPodGroupAnnotation names the KAI-Scheduler (Run:ai) PodGroup of a pod (KAI's
	// PodGroupAnnotationForPod).
	KAIPodGroupAnnotation = "pod-group-name"
	// KAISubGroupLabel names the pod's sub-group of its KAI PodGroup (spec.subgroups[].name).
	KAISubGroupLabel = "kai.scheduler/subgroup-name"
	// CoschedulingPodGroupLabel names the scheduler-plugins PodGroup of a pod (its PodGroupLabel).
	CoschedulingPodGroupLabel = "scheduling.x-k8s.io/pod-group"
)

// The gang objects Describe reads.
var (
	KAIPodGroupGVK          = schema.GroupVersionKind{Group: "scheduling.run.ai", Version: "v2alpha2", Kind: "PodGroup"}
	CoschedulingPodGroupGVK = schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}
	// WorkloadPodGroupGVKs are the versions of Kubernetes' PodGroup, newest first: Describe reads
	// the first the API server serves.
	WorkloadPodGroupGVKs = []schema.GroupVersionKind{
		{Group: "scheduling.k8s.io", Version: "v1beta1", Kind: "PodGroup"},
		{Group: "scheduling.k8s.io", Version: "v1alpha3", Kind: "PodGroup"},
	}
	JobGVK = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
)

// Adapter recognises user-made gangs.
type Adapter struct{}

var (
	_ adapters.Adapter       = (*Adapter)(nil)
	_ adapters.ObjectWatcher = (*Adapter)(nil)
)

// New returns the user-made gang adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (*Adapter) Name() string { return Name }

// WatchedKinds implements adapters.ObjectWatcher.
func (*Adapter) WatchedKinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind{KAIPodGroupGVK, CoschedulingPodGroupGVK}, append(WorkloadPodGroupGVKs, JobGVK)...)
}

// Recognize implements adapters.Adapter: a pod that names a gang by one of the conventions. It
// reads three map keys and one pointer.
func (*Adapter) Recognize(pod *corev1.Pod) bool {
	if pod.Labels[KueuePodGroupNameLabel] != "" || pod.Labels[CoschedulingPodGroupLabel] != "" ||
		pod.Annotations[KAIPodGroupAnnotation] != "" {
		return true
	}
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName != "" {
		return true
	}
	_, ok := pod.Annotations[fairwayv1.GangAnnotation]
	return ok
}

// Describe implements adapters.Adapter. fairway's own annotation comes first, the others in the
// order of the package comment; a pod that uses two gets the first. (With the WorkloadWithJob
// feature gate the Job controller points a Job's pods at a PodGroup of its own; a user who also
// wrote fairway.dev/gang on the Job meant that gang.)
func (*Adapter) Describe(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader) (adapters.Workload, error) {
	w := adapters.Workload{Kind: adapters.KindTraining, MinMember: 1, PriorityClass: fairwayv1.PriorityClassTraining}
	if _, ok := pod.Annotations[fairwayv1.GangAnnotation]; ok {
		return jobGang(ctx, pod, objects, w)
	}
	switch {
	case pod.Labels[KueuePodGroupNameLabel] != "":
		name := pod.Labels[KueuePodGroupNameLabel]
		raw, ok := pod.Annotations[KueuePodGroupTotalCountAnnotation]
		n, err := strconv.ParseInt(raw, 10, 32)
		if !ok || err != nil || n < 1 || n > adapters.MaxMinMember {
			return w, fmt.Errorf("annotation %s %q: a pod of Kueue pod group %q (label %s) must give the group's size, a whole number of pods from 1 to %d",
				KueuePodGroupTotalCountAnnotation, raw, name, KueuePodGroupNameLabel, adapters.MaxMinMember)
		}
		w.PodGroup, w.MinMember = adapters.GroupName("gang", name), int32(n)
	case pod.Annotations[KAIPodGroupAnnotation] != "":
		name := pod.Annotations[KAIPodGroupAnnotation]
		w.PodGroup = adapters.GroupName("gang", name)
		w.SubGroup = pod.Labels[KAISubGroupLabel]
		pg, err := objects.Get(ctx, KAIPodGroupGVK, pod.Namespace, name)
		if err != nil {
			w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("%s %s/%s", podGroupKind(KAIPodGroupGVK), pod.Namespace, name), err))
			break
		}
		w.MinMember, w.SubGroups = KAIShape(pg)
	case pod.Labels[CoschedulingPodGroupLabel] != "":
		name := pod.Labels[CoschedulingPodGroupLabel]
		w.PodGroup = adapters.GroupName("gang", name)
		w.MinMember, w.Warnings = minMemberOf(ctx, objects, pod.Namespace, name, CoschedulingPodGroupGVK)
	case pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil && *pod.Spec.SchedulingGroup.PodGroupName != "":
		name := *pod.Spec.SchedulingGroup.PodGroupName
		w.PodGroup = adapters.GroupName("gang", name)
		w.MinMember, w.Warnings = workloadMinCount(ctx, objects, pod.Namespace, name)
	}
	return w, nil
}

// jobGang describes the pod of a Job whose pod template carries fairway.dev/gang.
func jobGang(ctx context.Context, pod *corev1.Pod, objects adapters.ObjectReader, w adapters.Workload) (adapters.Workload, error) {
	v := pod.Annotations[fairwayv1.GangAnnotation]
	if v != "true" {
		return w, fmt.Errorf("annotation %s %q: must be \"true\" (the Job's pods are one gang) or absent", fairwayv1.GangAnnotation, v)
	}
	ref := adapters.ControllerOfKind(pod, JobGVK.Group, JobGVK.Kind)
	if ref == nil {
		return w, fmt.Errorf("annotation %s applies to the pods of a batch/v1 Job (on its pod template); name a gang of plain pods with label %s and annotation %s (Kueue), or label %s (coscheduling)",
			fairwayv1.GangAnnotation, KueuePodGroupNameLabel, KueuePodGroupTotalCountAnnotation, CoschedulingPodGroupLabel)
	}
	w.PodGroup = adapters.GroupName("job", ref.Name)
	job, err := objects.Get(ctx, JobGVK, pod.Namespace, ref.Name)
	if err != nil {
		w.Warnings = append(w.Warnings, adapters.DegradedWarning(fmt.Sprintf("Job %s/%s", pod.Namespace, ref.Name), err))
		return w, nil
	}
	spec, _ := job.Object["spec"].(map[string]any)
	w.MinMember = JobGangSize(spec)
	w.Recreatable = adapters.Bool(adapters.IgnoresDisruption(spec))
	return w, nil
}

// JobGangSize is the gang of a Job spec (batch/v1 JobSpec, as unstructured): the pods it runs at
// once, min(parallelism, completions), parallelism defaulting to 1.
func JobGangSize(spec map[string]any) int32 {
	n := adapters.Int64Field(spec, 1, "parallelism")
	if c := adapters.Int64Field(spec, -1, "completions"); c >= 0 {
		n = min(n, c)
	}
	return adapters.Clamp32(n, 1, adapters.MaxMinMember)
}

// KAIShape is the gang of a KAI PodGroup (scheduling.run.ai/v2alpha2): each leaf of
// spec.subgroups (a sub-group no other names as its parent) with a minMember above 0 is a
// sub-group of that minimum, and the gang needs spec.minMember pods and at least the sub-groups'
// sum. Sub-groups that only group others (and their topology constraints) have no counterpart
// in fairway's flat sub-groups.
func KAIShape(pg *unstructured.Unstructured) (int32, []fairwayv1.SubGroup) {
	subgroups, _, _ := unstructured.NestedSlice(pg.Object, "spec", "subgroups")
	parents := map[string]bool{}
	for _, sg := range subgroups {
		if m, ok := sg.(map[string]any); ok {
			if p, _ := m["parent"].(string); p != "" {
				parents[p] = true
			}
		}
	}
	var out []fairwayv1.SubGroup
	var sum int64
	for _, sg := range subgroups {
		m, ok := sg.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		n := min(adapters.Int64Field(m, 0, "minMember"), adapters.MaxMinMember)
		if name == "" || parents[name] || n < 1 || len(out) == maxSubGroups {
			continue
		}
		out = append(out, fairwayv1.SubGroup{Name: name, MinMember: int32(n)})
		sum += n
	}
	total := max(adapters.Int64Field(pg.Object, 1, "spec", "minMember"), sum)
	return adapters.Clamp32(total, 1, adapters.MaxMinMember), out
}

// minMemberOf reads spec.minMember of the PodGroup of kind gvk named name; when it cannot, the
// gang has no minimum and the warning says why.
func minMemberOf(ctx context.Context, objects adapters.ObjectReader, namespace, name string, gvk schema.GroupVersionKind) (int32, []string) {
	pg, err := objects.Get(ctx, gvk, namespace, name)
	if err != nil {
		return 1, []string{adapters.DegradedWarning(fmt.Sprintf("%s %s/%s", podGroupKind(gvk), namespace, name), err)}
	}
	return adapters.Clamp32(adapters.Int64Field(pg.Object, 1, "spec", "minMember"), 1, adapters.MaxMinMember), nil
}

// workloadMinCount reads Kubernetes' PodGroup named name at the newest version served: a gang
// policy's minCount, 1 for a basic policy.
func workloadMinCount(ctx context.Context, objects adapters.ObjectReader, namespace, name string) (int32, []string) {
	var pg *unstructured.Unstructured
	var err error
	for _, gvk := range WorkloadPodGroupGVKs {
		if pg, err = objects.Get(ctx, gvk, namespace, name); !errors.Is(err, adapters.ErrKindNotInstalled) {
			break
		}
	}
	if err != nil {
		return 1, []string{adapters.DegradedWarning(fmt.Sprintf("PodGroup.scheduling.k8s.io %s/%s", namespace, name), err)}
	}
	return adapters.Clamp32(adapters.Int64Field(pg.Object, 1, "spec", "schedulingPolicy", "gang", "minCount"), 1, adapters.MaxMinMember), nil
}

// maxSubGroups is the PodGroup API's bound on spec.subGroups.
const maxSubGroups = 32

func podGroupKind(gvk schema.GroupVersionKind) string { return gvk.Kind + "." + gvk.Group }
