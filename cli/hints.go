package cli

// hints say what would unblock a gang, per reason code of the scheduling engine
// (scheduler/engine/result.go). The engine's message says which quota, node or pod; the hint
// says what a user or an administrator can do about it.
var hints = map[string]string{
	"QueueNotReady": "The queue cannot take work: it does not exist, its parent is missing, or it has child queues " +
		"(only leaf queues take pods). Check the queue with `fairway queues` and its Ready condition; point the " +
		"namespace or the pod's fairway.dev/queue label at a leaf queue.",
	"InvalidRequest": "A pod's fairway annotations or labels are malformed (the message names them). Fix them in the " +
		"workload and recreate the pods.",
	"UnsupportedConstraint": "A pod uses a scheduling constraint fairway does not evaluate (the message names it). " +
		"Remove it from the pod template, or express it with node affinity.",
	"SchedulingGated": "The pods carry scheduling gates. Whoever added them (a controller such as a queueing system, " +
		"or the user) must remove them before fairway schedules the pods.",
	"WaitingForPods": "Fewer pods exist than the gang's minimum (minMember). Wait for the workload's controller to " +
		"create the rest, or check it for errors (quota, image, admission).",
	"QueueLimit": "Starting the gang would take its queue or a department above its limit. Wait for the queue's " +
		"running jobs to finish, or raise spec.resources.<resource>.limit of the queue named in the message.",
	"NonPreemptibleOverQuota": "Non-preemptible work (notebooks, inference) runs only within the queue's guaranteed " +
		"quota, and that is in use. Stop another non-preemptible workload of the queue, raise the queue's quota, or " +
		"run this one as preemptible (a priority class below 100, or label fairway.dev/preemptibility=preemptible).",
	"NoNodeFits": "No node has room, and nothing could be reclaimed, preempted or moved for the gang (the message says " +
		"why, per node). Ask for less (fewer GPUs, a GPU share), wait for running work to end, or check node " +
		"selectors, tolerations and the GPU type asked for.",
	"TopologyNoDomain": "No domain of the required topology level (an NVLink domain, a rack) can hold the whole gang. " +
		"Shrink the gang, or make the topology preferred instead of required.",
	"WaitingForEvictions": "Capacity is being freed for the gang: pods are being preempted or reclaimed and get their " +
		"grace period to checkpoint. The gang starts when they are gone; nothing to do.",
	"WaitingForPodDisruptionBudget": "The pods whose eviction would make room are protected by the " +
		"PodDisruptionBudget the message names, which allows no more disruptions now (the API server refused an " +
		"eviction). fairway tries again shortly and succeeds once the budget allows it, e.g. when the protected " +
		"workload's replacement pods are ready elsewhere. Its owner can raise maxUnavailable or add replicas; see " +
		"docs/preemption.md.",
	"CapacityHeld": "The gang has waited past the starvation threshold, so capacity is held for it as it frees up. It " +
		"starts when enough is free; nothing to do.",
	"CapacityHeldForOthers": "Capacity that would fit this gang is held for a gang that has waited longer. This one " +
		"starts after that one is placed, or when more capacity frees up.",
}

// borrowHint is added to the hint of a pod that may borrow idle GPUs and waits anyway: the
// engine's message ("idle GPU lending: ...") says why no idle GPU was lent to it.
const borrowHint = "The pod may also run on loan on an idle notebook's GPU (idle GPU lending); the message's " +
	"\"idle GPU lending\" part says why none is lent now: notebooks working, queues that do not lend " +
	"(spec.idleLending.lend), too little free GPU memory, or the loan cap per GPU."

// hintFor returns the hint of a reason code, or a generic one.
func hintFor(code string) string {
	if h, ok := hints[code]; ok {
		return h
	}
	if code == "" {
		return ""
	}
	return "No advice for this reason code; the message above is the scheduler's explanation."
}
