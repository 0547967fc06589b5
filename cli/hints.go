package cli

import (
	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// hints say what would unblock a gang, per reason code of the scheduler
// (fairwayv1.UnschedulableReasons; TestEveryReasonHasAHint keeps the two in step). The
// scheduler's message says which quota, node or pod; the hint says what a user or an
// administrator can do about it.
var hints = map[fairwayv1.UnschedulableReason]string{
	fairwayv1.ReasonQueueNotReady: "The queue cannot take work: it does not exist, its parent is missing, or it has child queues " +
		"(only leaf queues take pods). Check the queue with `fairway queues` and its Ready condition; point the " +
		"namespace or the pod's fairway.dev/queue label at a leaf queue.",
	fairwayv1.ReasonForeignQueue: "The pod (or its PodGroup) names a queue that does not serve its namespace, so fairway does not " +
		"schedule it or count it in that queue. Recreate the pods with the fairway.dev/queue label of a queue whose " +
		"spec.namespaces lists the namespace, or ask an administrator to add the namespace to the queue.",
	fairwayv1.ReasonInvalidRequest: "A pod's fairway annotations or labels are malformed (the message names them). Fix them in the " +
		"workload and recreate the pods.",
	fairwayv1.ReasonUnsupported: "A pod uses a scheduling constraint fairway does not evaluate (the message names it). " +
		"Remove it from the pod template, express it with node affinity, or drop spec.schedulerName: fairway: the webhook " +
		"then leaves such a pod to kube-scheduler.",
	fairwayv1.ReasonNotAdmitted: "fairway's webhook did not admit the pod (it was down when the pod was created, or the pod " +
		"opted out with fairway.dev/ignore or lives in a namespace no queue serves), so fairway does not trust the keys it " +
		"carries. Delete the pod and create it again while the webhook is up (its controller recreates it); check the " +
		"webhook with `kubectl -n fairway-system get pods`.",
	fairwayv1.ReasonVolume: "A PersistentVolumeClaim of a pod cannot be used now (the message names it and says why): it does " +
		"not exist yet, waits for its volume (Immediate class, or a provisioner that has not finished), or can never be " +
		"satisfied (no such StorageClass, no matching PersistentVolume and no provisioner, allowedTopologies matching no " +
		"node). Check it with `kubectl describe pvc`; see docs/storage.md.",
	fairwayv1.ReasonSchedulingGated: "The pods carry scheduling gates. Whoever added them (a controller such as a queueing system, " +
		"or the user) must remove them before fairway schedules the pods.",
	fairwayv1.ReasonWaitingForPods: "Fewer pods exist than the gang's minimum (minMember). Wait for the workload's controller to " +
		"create the rest, or check it for errors (quota, image, admission).",
	fairwayv1.ReasonQueueLimit: "Starting the gang would take its queue or a department above its limit. Wait for the queue's " +
		"running jobs to finish, or raise spec.resources.<resource>.limit of the queue named in the message.",
	fairwayv1.ReasonNonPreemptible: "Non-preemptible work (notebooks, inference) runs only within the queue's guaranteed " +
		"quota, and that is in use. Stop another non-preemptible workload of the queue, raise the queue's quota, or " +
		"run this one as preemptible (a priority class below 100, or label fairway.dev/preemptibility=preemptible).",
	fairwayv1.ReasonQueuePolicy: "The queue's policy (spec.policy, inherited from the queue named in the message) does not let " +
		"this kind of work borrow above the guaranteed quota, and the quota is in use. Wait for the queue's work to " +
		"finish, or ask an administrator to raise the quota or set borrowing: Allowed; `fairway policy` shows the rules.",
	fairwayv1.ReasonNoNodeFits: "No node has room, and nothing could be reclaimed, preempted or moved for the gang (the message says " +
		"why, per node). Ask for less (fewer GPUs, a GPU share), wait for running work to end, or check node " +
		"selectors, tolerations and the GPU type asked for; nodes the queue's policy closes are counted as such " +
		"(`fairway policy` lists the GPU types each kind of work may use).",
	fairwayv1.ReasonOverFairShare: "The gang fits only if capacity is taken from other queues, and that would take its queue " +
		"above its fair share of the resource the message names (what the queue holds, its share, what the gang needs). " +
		"Fair share is what the queue gets while other queues want theirs, not a promise: the gang starts when capacity " +
		"frees up or other queues want less. To get it sooner, ask for less, or ask an administrator for a larger " +
		"guaranteed quota or over-quota weight (`fairway queues` shows each queue's share and holdings).",
	fairwayv1.ReasonTopology: "No domain of the required topology level (an NVLink domain, a rack) can hold the whole gang. " +
		"Shrink the gang, or make the topology preferred instead of required.",
	fairwayv1.ReasonWaitingEvictions: "Capacity is being freed for the gang: pods are being preempted or reclaimed and get their " +
		"grace period to checkpoint. The gang starts when they are gone; nothing to do.",
	fairwayv1.ReasonWaitingForBudget: "The pods whose eviction (or move to another node) would make room are protected by the " +
		"PodDisruptionBudget the message names, which allows no more disruptions now. fairway tries again shortly and " +
		"succeeds once the budget allows it, e.g. when the protected workload's replacement pods are ready elsewhere. " +
		"For a guarantee, a budget of borrowed (over-quota) pods holds only until the queue's spec.reclaim.budgetTimeout " +
		"(the message says when); a budget of pods within their own queue's guarantee is never overridden. Its owner " +
		"can raise maxUnavailable or add replicas; see docs/preemption.md.",
	fairwayv1.ReasonStarvationHold: "The gang has waited past the starvation threshold, so capacity is held for it as it frees up. It " +
		"starts when enough is free; nothing to do.",
}

// borrowHint is added to the hint of a waiting pod that asked to borrow idle GPUs
// (fairwayv1.BorrowIdleGPUAnnotation) for its GPU share; when the scheduler tried, its message
// has an "idle GPU lending" part that says why no idle GPU was lent.
const borrowHint = "The pod asked to borrow idle GPUs (" + fairwayv1.BorrowIdleGPUAnnotation + "), so it may also run " +
	"on loan on an idle notebook's GPU; where the message has an \"idle GPU lending\" part, it says why none is lent " +
	"now: notebooks working, queues that do not lend (spec.idleLending.lend) or do not borrow " +
	"(spec.idleLending.borrow), too little free GPU memory, the loan cap per GPU, or a pod that is not preemptible."

// asksToBorrow reports whether a pending pod opted in to idle GPU lending for a GPU share.
func asksToBorrow(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.Annotations[fairwayv1.BorrowIdleGPUAnnotation] == "true" && gpuOf(p).shared()
}

// hintFor returns the hint of a reason code, or a generic one.
func hintFor(code string) string {
	if h, ok := hints[fairwayv1.UnschedulableReason(code)]; ok {
		return h
	}
	if code == "" {
		return ""
	}
	return "No advice for this reason code; the message above is the scheduler's explanation."
}
