package v1alpha1

// ImmutablePodLabels and ImmutablePodAnnotations are the keys of a managed pod (ManagedLabel
// "true") that may not change once the webhook admitted it: they decide which queue's quota the
// pod spends, which gang it belongs to, whether it may be preempted and how much GPU it holds, so
// changing them on a pending pod would let anyone with pods/patch spend another team's quota or
// escape preemption. The webhook refuses updates that change, add or remove any of them.
// ManagedLabel is listed so that a pod cannot leave fairway's protection by dropping it.
var (
	ImmutablePodLabels = []string{
		QueueLabel, RunAIQueueLabel, KAIQueueLabel, PreemptibilityLabel, ManagedLabel,
	}
	ImmutablePodAnnotations = []string{
		PodGroupAnnotation,
		// The gang's shape: a pod that changed its sub-group or the minimums it reports could
		// start a gang without its head, or size the PodGroup the scheduler creates from it.
		MinMemberAnnotation, SubGroupAnnotation, SubGroupsAnnotation,
		GPUFractionAnnotation, GPUFractionAliasAnnotation,
		GPUMemoryAnnotation, GPUMemoryAliasAnnotation,
		// Whether the pod's controller recreates it orders victims: marking a pod as lost on
		// eviction would move it to the back of the line.
		RecreatableAnnotation,
		// The kind picks the queue policy a pod is placed by and whether its GPU is lent.
		WorkloadKindAnnotation,
	}
)
