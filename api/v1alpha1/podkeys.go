package v1alpha1

// QueueLabels are the pod labels that name a queue, fairway's first, then the Run:ai and
// KAI-Scheduler aliases. The webhook requires them to agree; readers downstream of it take the
// first one set (QueueOf).
var QueueLabels = []string{QueueLabel, RunAIQueueLabel, KAIQueueLabel}

// QueueOf returns the queue that labels name (fairway's queue label, else its Run:ai or KAI
// alias), or "" when they name none.
func QueueOf(labels map[string]string) string {
	for _, k := range QueueLabels {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

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
		GPUFractionAnnotation, GPUFractionAliasAnnotation,
		GPUMemoryAnnotation, GPUMemoryAliasAnnotation,
	}
)
