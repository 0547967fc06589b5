package v1alpha1

import "slices"

// UnschedulableReason is the machine-readable reason the scheduler gives for a gang that waits.
// It crosses every boundary a waiting gang is seen through: it is the reason of the PodGroup's
// Unschedulable condition, the code that starts the message of a waiting pod's PodScheduled
// condition ("<code>: <message>", see PodScheduledMessage), the reason label of the pending-pod
// metrics, and the key of `fairway why`'s hints. So the set is owned here, not by the engine
// (which aliases it): a consumer tells codes apart by value, never by reading the message,
// which is for people and may change at any time.
type UnschedulableReason string

// Reasons a gang waits. Adding one: declare it here and list it in unschedulableReasons below
// (TestUnschedulableReasonsListed fails if it is not), then give it a hint in cli/hints.go
// (TestEveryReasonHasAHint fails until it has one).
const (
	// ReasonQueueNotReady: the queue does not exist, its parent is missing or cyclic, or it has
	// child queues (only leaves take pods). The queue's Ready condition says which
	// (QueueNotReadyReason).
	ReasonQueueNotReady UnschedulableReason = "QueueNotReady"
	// ReasonForeignQueue: the gang's queue does not serve the gang's namespace (its labels or
	// its PodGroup name a queue another team's namespaces use); its pods are not counted there.
	ReasonForeignQueue UnschedulableReason = "ForeignQueue"
	// ReasonInvalidRequest: a pod's fairway annotations or labels are malformed.
	ReasonInvalidRequest UnschedulableReason = "InvalidRequest"
	// ReasonVolume: a pod's PersistentVolumeClaim cannot be used now (missing, waiting for its
	// volume, or never satisfiable); the message names the claim and says why.
	ReasonVolume UnschedulableReason = "VolumeBinding"
	// ReasonNotAdmitted: a pod names fairway's scheduler but does not carry the webhook's seal
	// (AdmittedAnnotation), or carries one that does not match it: the webhook never admitted it
	// (it was down, or the pod bypassed it), so its fairway keys are not trusted.
	ReasonNotAdmitted UnschedulableReason = "NotAdmitted"
	// ReasonUnsupported: a pod uses a scheduling constraint the scheduler does not evaluate.
	ReasonUnsupported UnschedulableReason = "UnsupportedConstraint"
	// ReasonSchedulingGated: the pods wait for their scheduling gates.
	ReasonSchedulingGated UnschedulableReason = "SchedulingGated"
	// ReasonWaitingForPods: fewer pods exist than the gang's minimum.
	ReasonWaitingForPods UnschedulableReason = "WaitingForPods"
	// ReasonQueueLimit: the gang would take its queue (or an ancestor) over a limit.
	ReasonQueueLimit UnschedulableReason = "QueueLimit"
	// ReasonNonPreemptible: non-preemptible work beyond the guaranteed quota.
	ReasonNonPreemptible UnschedulableReason = "NonPreemptibleOverQuota"
	// ReasonQueuePolicy: the queue's policy (QueuePolicy) keeps the gang waiting: its kind of
	// work may not borrow above the guaranteed quota. The message names the policy's queue.
	ReasonQueuePolicy UnschedulableReason = "QueuePolicy"
	// ReasonNoNodeFits: no placement fits, and neither reclaim, preemption nor consolidation
	// could make room; the message says why, per node and per refused victim.
	ReasonNoNodeFits UnschedulableReason = "NoNodeFits"
	// ReasonOverFairShare: no placement fits on free capacity, and taking capacity from other
	// queues would take the gang's queue above its fair share of a resource the gang needs,
	// which the cluster has enough of: other queues' claims, not the cluster's size or shape,
	// keep the gang waiting. The message names the resource, what the queue holds, its fair
	// share and what the gang needs; the gang starts when capacity frees, when other queues
	// want less, or with a larger guarantee or weight.
	ReasonOverFairShare UnschedulableReason = "OverFairShare"
	// ReasonTopology: no domain of the required topology level can take the gang.
	ReasonTopology UnschedulableReason = "TopologyNoDomain"
	// ReasonWaitingEvictions: the gang is nominated on capacity being freed for it.
	ReasonWaitingEvictions UnschedulableReason = "WaitingForEvictions"
	// ReasonStarvationHold: the gang waited too long; capacity is held for it while it frees.
	ReasonStarvationHold UnschedulableReason = "CapacityHeld"
	// ReasonWaitingForBudget: the pods whose eviction would make room are protected by a
	// PodDisruptionBudget that allows no more disruptions now (the API server refused an
	// eviction), or the only plan moves pods within their queue's guarantee whose budget allows
	// none (a move keeps its pods' budgets); the message names the budget and, for borrowed
	// pods, when the claimant's reclaim.budgetTimeout overrides it. A later cycle tries again.
	ReasonWaitingForBudget UnschedulableReason = "WaitingForPodDisruptionBudget"
)

// unschedulableReasons lists every UnschedulableReason, one a line.
var unschedulableReasons = []UnschedulableReason{
	ReasonQueueNotReady,
	ReasonForeignQueue,
	ReasonInvalidRequest,
	ReasonVolume,
	ReasonNotAdmitted,
	ReasonUnsupported,
	ReasonSchedulingGated,
	ReasonWaitingForPods,
	ReasonQueueLimit,
	ReasonNonPreemptible,
	ReasonQueuePolicy,
	ReasonNoNodeFits,
	ReasonOverFairShare,
	ReasonTopology,
	ReasonWaitingEvictions,
	ReasonStarvationHold,
	ReasonWaitingForBudget,
}

// UnschedulableReasons returns every reason the scheduler may give for a waiting gang.
func UnschedulableReasons() []UnschedulableReason { return slices.Clone(unschedulableReasons) }

// Known reports whether r is one of UnschedulableReasons.
func (r UnschedulableReason) Known() bool { return slices.Contains(unschedulableReasons, r) }

// PodScheduledMessage is the message of the PodScheduled=False condition the scheduler writes on
// a waiting pod: the code, ": ", then the human-readable message, as kube-scheduler puts its
// own summary there (the condition's reason must stay Unschedulable, which tools and the
// cluster autoscaler read). ParsePodScheduledMessage reads it back.
func PodScheduledMessage(r UnschedulableReason, message string) string {
	return string(r) + ": " + message
}

// ParsePodScheduledMessage returns the reason and message of a PodScheduled condition message
// that PodScheduledMessage wrote; ok is false for anyone else's message (kube-scheduler's, or a
// reason this version does not know).
func ParsePodScheduledMessage(s string) (r UnschedulableReason, message string, ok bool) {
	for _, r := range unschedulableReasons {
		if len(s) >= len(r)+2 && s[:len(r)] == string(r) && s[len(r):len(r)+2] == ": " {
			return r, s[len(r)+2:], true
		}
	}
	return "", "", false
}

// QueueNotReadyReason is the reason of a Queue's Ready=False condition: why the queue takes no
// work. The scheduler decides by it (a queue in a parent cycle is cut from its parent; a queue
// under a queue that is not ready is not ready either, unless that one only has children).
type QueueNotReadyReason string

// Reasons a queue is not ready. Adding one: declare it here and list it in queueNotReadyReasons.
const (
	// QueueMissing: pods or a child queue name the queue, and it does not exist.
	QueueMissing QueueNotReadyReason = "QueueMissing"
	// QueueParentMissing: the queue's spec.parent names a queue that does not exist.
	QueueParentMissing QueueNotReadyReason = "ParentMissing"
	// QueueParentCycle: following spec.parent from the queue loops back; it is cut from its
	// parent.
	QueueParentCycle QueueNotReadyReason = "ParentCycle"
	// QueueHasChildren: the queue has child queues and pods name it; only leaf queues take pods.
	QueueHasChildren QueueNotReadyReason = "HasChildQueues"
	// QueueAncestorNotReady: an ancestor of the queue is not ready (for a reason other than
	// QueueHasChildren).
	QueueAncestorNotReady QueueNotReadyReason = "AncestorNotReady"
)

// queueNotReadyReasons lists every QueueNotReadyReason, one a line.
var queueNotReadyReasons = []QueueNotReadyReason{
	QueueMissing,
	QueueParentMissing,
	QueueParentCycle,
	QueueHasChildren,
	QueueAncestorNotReady,
}

// QueueNotReadyReasons returns every reason a queue may be not ready.
func QueueNotReadyReasons() []QueueNotReadyReason { return slices.Clone(queueNotReadyReasons) }
