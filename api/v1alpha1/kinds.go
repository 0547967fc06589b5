package v1alpha1

// WorkloadKindLabel, set by a user on a workload's pod template (or on the pods), names the kind
// of work fairway treats the pods as (one of WorkloadKinds; the webhook refuses other values):
// `fairway.dev/workload-kind: inference` on a model server's Deployment makes its replicas
// inference replicas, and on a framework's pods it overrides the kind the adapter gave (a
// RayCluster that serves). The label shares its key with WorkloadKindAnnotation, which the
// webhook writes on every pod it admits and which the other components read.
const WorkloadKindLabel = Prefix + "workload-kind"

// DefaultPriorityClass is the priority class a pod of kind gets when neither the pod nor its
// queue's policy (PolicyRules.PriorityClassName) chooses one; "" leaves the cluster's default.
// The kind decides, not the framework, so that a Triton Deployment and a KServe predictor get the
// same class: inference runs above notebooks, which run above batch work.
func DefaultPriorityClass(kind WorkloadKind) string {
	switch kind {
	case KindInference:
		return PriorityClassInference
	case KindNotebook:
		return PriorityClassInteractive
	case KindTraining, KindPipelineStep, KindWorkflowStep, KindRay:
		return PriorityClassTraining
	}
	return ""
}

// DefaultPreemptibility is what a pod of kind is when neither the pod (its preemptibility label
// or a priority class of its own) nor its queue's policy (PolicyRules.Preemptibility) says:
// notebooks hold a user's live session and inference replicas serve requests, so both are
// non-preemptible, which also keeps them within their queue's guaranteed quota. "" for the
// other kinds, whose priority decides (below NonPreemptiblePriority they are preemptible).
func DefaultPreemptibility(kind WorkloadKind) Preemptibility {
	switch kind {
	case KindInference, KindNotebook:
		return NonPreemptible
	}
	return ""
}
