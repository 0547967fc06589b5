package mutatingwebhook

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// applyPolicy enforces the policy of the pod's queue for its kind of work (QueuePolicy): a pod
// that asks for no GPU gets the kind's default request, and a pod that names only GPU types the
// policy closes, or asks for more GPU than one pod may have, is refused with the rule, where it
// was set and what it allows. Which nodes a pod may use is the scheduler's side of the same
// policy (it resolves it with the same fairwayv1.ResolvePolicy).
func (d *PodDefaulter) applyPolicy(pod *corev1.Pod, w adapters.Workload, pol *fairwayv1.EffectivePolicy) ([]string, error) {
	if !pol.Set {
		return nil, nil
	}
	var warnings []string
	if pol.DefaultGPU != nil && !w.NoGPU && !asksForGPU(pod) {
		what, err := d.addDefaultGPU(pod, w, pol.DefaultGPU)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, fmt.Sprintf("fairway: the pod asked for no GPU; %s gave it %s", pol.Describe(fairwayv1.RuleDefaultGPU), what))
	}
	if pinned, from := pinnedGPUTypes(pod); len(pinned) > 0 && pol.GPUTypes != nil &&
		!slices.ContainsFunc(pinned, pol.AllowsGPUType) {
		return warnings, deny("%s allows GPU types %s; the pod asks for %s (%s): ask for one of those, or leave the GPU type out and fairway places the pod on one of them",
			pol.Describe(fairwayv1.RuleGPUTypes), pol.GPUTypesText(), strings.Join(pinned, ", "), from)
	}
	if pol.MaxGPUsPerPod != nil {
		milli, what, err := d.podGPUMilli(pod)
		if err != nil {
			return warnings, err
		}
		if milli > pol.MaxGPUsPerPod.MilliValue() {
			return warnings, deny("%s allows at most %s GPU per pod; the pod asks for %s",
				pol.Describe(fairwayv1.RuleMaxGPUsPerPod), formatGPUs(pol.MaxGPUsPerPod.MilliValue()), what)
		}
	}
	return warnings, nil
}

// addDefaultGPU writes the policy's default request into the pod: a share as the annotation a
// user would write, whole GPUs as nvidia.com/gpu on the GPU container. It says what it added.
func (d *PodDefaulter) addDefaultGPU(pod *corev1.Pod, w adapters.Workload, def *fairwayv1.DefaultGPU) (string, error) {
	switch {
	case def.Fraction != nil:
		setAnnotation(pod, fairwayv1.GPUFractionAnnotation, *def.Fraction)
		return fmt.Sprintf("%s %s", fairwayv1.GPUFractionAnnotation, *def.Fraction), nil
	case def.Memory != nil:
		setAnnotation(pod, fairwayv1.GPUMemoryAnnotation, *def.Memory)
		return fmt.Sprintf("%s %s", fairwayv1.GPUMemoryAnnotation, *def.Memory), nil
	case def.GPUs != nil:
		c, err := gpuContainer(pod, w.GPUContainer)
		if err != nil {
			return "", err
		}
		n := *resource.NewQuantity(int64(*def.GPUs), resource.DecimalSI)
		for _, rl := range []*corev1.ResourceList{&c.Resources.Limits, &c.Resources.Requests} {
			if *rl == nil {
				*rl = corev1.ResourceList{}
			}
			(*rl)[fairwayv1.ResourceGPU] = n
		}
		return fmt.Sprintf("%s %d on container %s", fairwayv1.ResourceGPU, *def.GPUs, c.Name), nil
	}
	return "", nil
}

// podGPUMilli is the GPU one pod asks for in thousandths, as the scheduler counts it: whole GPUs
// (the containers' sum, or an init container's if larger), a share's fraction, or a memory
// share's fraction of the largest GPU in the cluster (the least it can be; 1 while no node
// reports its GPU memory). It also says what the pod asks for, for messages.
func (d *PodDefaulter) podGPUMilli(pod *corev1.Pod) (int64, string, error) {
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		return 0, "", err
	}
	switch {
	case share.Milli > 0:
		return share.Milli, fmt.Sprintf("%s of a GPU (%s)", share.Fraction(), share.Key), nil
	case share.MemoryMiB > 0:
		milli := int64(1000)
		if largest := d.state.LargestGPUMemoryMiB(); largest > 0 {
			milli = min(1000, (share.MemoryMiB*1000+largest-1)/largest)
		}
		return milli, fmt.Sprintf("%d MiB of GPU memory (%s), at least %s of the largest GPU", share.MemoryMiB, share.Key, formatGPUs(milli)), nil
	}
	// An extended resource's request equals its limit, and only the limit is sure to be set
	// before the API server's defaulting.
	gpus := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[fairwayv1.ResourceGPU]
	noun := "GPUs"
	if gpus.Value() == 1 {
		noun = "GPU"
	}
	return gpus.Value() * 1000, fmt.Sprintf("%d %s (%s)", gpus.Value(), noun, fairwayv1.ResourceGPU), nil
}

// pinnedGPUTypes returns the GPU types the pod's node constraints confine it to, sorted, and
// where they come from; nil when it may run on any type. A pod is confined by a nodeSelector on
// fairway.dev/gpu-type, or by required node affinity whose every term requires the label In
// some values (a term without it lets the pod onto any type).
func pinnedGPUTypes(pod *corev1.Pod) ([]string, string) {
	if v, ok := pod.Spec.NodeSelector[fairwayv1.GPUTypeLabel]; ok {
		return []string{v}, "nodeSelector " + fairwayv1.GPUTypeLabel
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil, ""
	}
	var types []string
	for _, t := range terms {
		i := slices.IndexFunc(t.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == fairwayv1.GPUTypeLabel && e.Operator == corev1.NodeSelectorOpIn
		})
		if i < 0 {
			return nil, ""
		}
		types = append(types, t.MatchExpressions[i].Values...)
	}
	slices.Sort(types)
	return slices.Compact(types), "required node affinity on " + fairwayv1.GPUTypeLabel
}

// formatGPUs writes thousandths of GPUs as the shortest decimal ("0.5", "2", "1.25").
func formatGPUs(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}
