package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Result is what one cycle decided, for the runtime to apply and publish.
type Result struct {
	// Bindings place pods now. They are already assumed in the snapshot.
	Bindings []Binding
	// Nominations are gangs placed on capacity that evictions are freeing: the runtime must not
	// bind them; the capacity is held and a later cycle binds them.
	Nominations []Nomination
	// Evictions are pods to evict, with the reason. They are already releasing in the snapshot.
	Evictions []Eviction
	// Unschedulable has one entry per gang that still has pods waiting, with a reason.
	Unschedulable []GangReason
	// Queues has the status of every queue, sorted by name.
	Queues []QueueStatus
	// Capacity is what fair shares divided this cycle per dimension (gpu, cpu, memory,
	// gpu/<type>): what fairway may hand out. Usage history measures queues against it.
	Capacity Amounts
	// HeldNodes are the nodes where capacity is held for a gang at the end of the cycle, sorted
	// by node: the runtime keeps other schedulers' pods off them with the hold taint
	// (v1alpha1.HoldTaintKey).
	HeldNodes []NodeHold
	// SwapRequests are idle interactive pods whose GPU memory the gpu-agent is asked to move to
	// host RAM, so that a borrower that does not fit the free memory gets the whole GPU
	// (v1alpha1.GPUSwapRequestAnnotation); a later cycle lends the GPU once the agent reports
	// the memory swapped out.
	SwapRequests []SwapRequest
}

// SwapRequest asks for one pod's GPU memory to be swapped out during the idle period that
// started at IdleSince.
type SwapRequest struct {
	Pod       types.NamespacedName
	IdleSince time.Time
}

// NodeHold is a node whose capacity is held for a gang (the first held there, by key, when
// several are).
type NodeHold struct {
	Node string
	Gang snapshot.GangKey
}

// Binding places one pod on a node.
type Binding struct {
	Pod  types.NamespacedName
	Gang snapshot.GangKey
	Node string
	// GPUs are the whole GPUs the pod gets (empty for a fractional or GPU-less pod).
	GPUs []GPU
	// Shared is the GPU a fractional pod shares (or borrows, see SharedGPU.Loan), nil otherwise
	// (and for a share of a DRA GPU, which is in Claims).
	Shared *SharedGPU
	// Claims are the pod's ResourceClaims with the allocations the engine chose (nil Result:
	// already allocated); the runtime writes them, with the pod in reservedFor, before binding.
	Claims []snapshot.ClaimAllocation
}

// GPU identifies one GPU of a node. UUID is empty when the node publishes no inventory.
type GPU struct {
	Index int
	UUID  string
}

// SharedGPU is a fractional pod's part of one GPU.
type SharedGPU struct {
	GPU
	// MilliGPU is the share (500 for half a GPU); MemoryMiB the GPU memory that goes with it.
	MilliGPU  int64
	MemoryMiB int64
	// Loan is true when the pod runs on loan on the GPU of idle interactive pods: it is evicted
	// (EvictLoanReturn) as soon as one of them does GPU work again.
	Loan bool
}

// Nomination is a gang placed on capacity that is being freed for it.
type Nomination struct {
	Gang snapshot.GangKey
	// Nodes are the nodes held for the gang, sorted.
	Nodes []string
	// Pods is how many of the gang's pods the held capacity is for.
	Pods int
}

// EvictionReason is why a pod is evicted (owned by v1alpha1, which readers of the events share).
type EvictionReason = v1alpha1.EvictionReason

// Eviction reasons.
const (
	// EvictReclaim: borrowed capacity goes back to a queue below its fair share.
	EvictReclaim = v1alpha1.EvictReclaim
	// EvictPreempt: higher-priority work of the same queue needs the capacity.
	EvictPreempt = v1alpha1.EvictPreempt
	// EvictConsolidate: the pod moves to make room for a gang; there is room for it elsewhere.
	EvictConsolidate = v1alpha1.EvictConsolidate
	// EvictStaleGang: the pod's gang ran below its minimum for too long.
	EvictStaleGang = v1alpha1.EvictStaleGang
	// EvictLoanReturn: the pod ran on loan on an idle interactive pod's GPU, and the GPU goes
	// back (a holder does GPU work again, left, or lending was switched off). Decided first in
	// the cycle, for every loan of the GPU at once, with Options.LoanReturnGracePeriod.
	EvictLoanReturn = v1alpha1.EvictLoanReturn
)

// Eviction evicts one pod.
type Eviction struct {
	Pod     types.NamespacedName
	Gang    snapshot.GangKey
	Node    string
	Reason  EvictionReason
	Message string
	// Beneficiary is the gang the capacity goes to; nil for a stale gang.
	Beneficiary *snapshot.GangKey
	// BeneficiaryPod is the beneficiary's pod when the gang is one pod (nil otherwise): the
	// runtime's events name it, as the message does (a one-pod gang's PodGroup is often one the
	// webhook made up, which nobody looks for). A pointer, as OverridesBudget: few evictions
	// have one, and the inline name made every eviction of a large reclaim 32 bytes larger.
	BeneficiaryPod *types.NamespacedName
	// GracePeriod is the time the pod has to checkpoint and exit: its own
	// terminationGracePeriodSeconds (Options.EvictionGracePeriod when its spec sets none),
	// capped by its queue's maxEvictionGracePeriod; Options.LoanReturnGracePeriod for a
	// LoanReturn.
	GracePeriod time.Duration
	// OverridesBudget is the PodDisruptionBudget this eviction goes ahead against, nil for
	// none: the pod is over-quota (borrowed) work and the queue it is reclaimed for has waited
	// its reclaim.budgetTimeout for the budget. The runtime deletes such a pod with its grace
	// period instead of asking the Eviction API (which would refuse), and its DisruptionTarget
	// condition names the budget. A pointer: a large reclaim returns thousands of evictions, and
	// few if any override a budget.
	OverridesBudget *types.NamespacedName
}

// NotRecreatedNote ends the message of an eviction whose pod nothing recreates
// (snapshot.Task.Recreatable false): reclaim and preemption take such pods only when no
// recreatable one frees the room.
const NotRecreatedNote = "nothing recreates this pod without losing its work, so it will not come back"

// ReasonCode is the machine-readable reason a gang waits. The set is published and owned by
// api/v1alpha1 (UnschedulableReason), because PodGroup and pod conditions, events, metrics and
// the CLI carry it; the engine names the same constants. Add a code there, then alias it here.
type ReasonCode = v1alpha1.UnschedulableReason

// Reasons a gang waits (see the documentation of each in api/v1alpha1).
const (
	ReasonQueueNotReady    = v1alpha1.ReasonQueueNotReady
	ReasonForeignQueue     = v1alpha1.ReasonForeignQueue
	ReasonInvalidRequest   = v1alpha1.ReasonInvalidRequest
	ReasonUnsupported      = v1alpha1.ReasonUnsupported
	ReasonVolume           = v1alpha1.ReasonVolume
	ReasonNotAdmitted      = v1alpha1.ReasonNotAdmitted
	ReasonSchedulingGated  = v1alpha1.ReasonSchedulingGated
	ReasonWaitingForPods   = v1alpha1.ReasonWaitingForPods
	ReasonQueueLimit       = v1alpha1.ReasonQueueLimit
	ReasonNonPreemptible   = v1alpha1.ReasonNonPreemptible
	ReasonQueuePolicy      = v1alpha1.ReasonQueuePolicy
	ReasonNoNodeFits       = v1alpha1.ReasonNoNodeFits
	ReasonOverFairShare    = v1alpha1.ReasonOverFairShare
	ReasonTopology         = v1alpha1.ReasonTopology
	ReasonWaitingEvictions = v1alpha1.ReasonWaitingEvictions
	ReasonStarvationHold   = v1alpha1.ReasonStarvationHold
	ReasonWaitingForBudget = v1alpha1.ReasonWaitingForBudget
)

// GangReason says why a gang still waits.
type GangReason struct {
	Gang snapshot.GangKey
	// Queue is the gang's queue; "" for a gang whose queue does not serve its namespace
	// (ReasonForeignQueue), which no queue counts.
	Queue string
	Code  ReasonCode
	// Message is for humans: which limit or quota, which resource, how much is missing, or why
	// no node fits.
	Message string
	// PendingPods is how many of the gang's pods wait.
	PendingPods int
}

// QueueStatus is a queue's accounting after the cycle. Resource names are gpu, cpu, memory and
// gpu/<type>; values are in the engine's units (milli-GPU, milli-CPU, bytes).
type QueueStatus struct {
	Name                    string
	FairShare               Amounts
	Allocated               Amounts
	AllocatedNonPreemptible Amounts
	// Requested is Allocated plus what pending pods ask for.
	Requested Amounts
	// Borrowed is Allocated above the guaranteed quota; loans always count in it.
	Borrowed Amounts
	// Loaned is the part of Allocated (and Borrowed) that runs on loan on idle GPUs; nil for a
	// queue that never had loans.
	Loaned      Amounts
	PendingPods int32
	// NotReadyReason says why the queue takes no work, when it does not ("" when it does);
	// NotReady is the same for people.
	NotReadyReason v1alpha1.QueueNotReadyReason
	NotReady       string
}

// Amounts maps a resource name (gpu, cpu, memory, gpu/<type>) to an amount in engine units.
// Zero amounts are left out.
type Amounts map[string]int64

// ResourceList converts to Kubernetes quantities: GPUs and CPU as decimal (2500m GPU is 2.5),
// memory in bytes.
func (a Amounts) ResourceList() corev1.ResourceList {
	out := make(corev1.ResourceList, len(a))
	for name, v := range a {
		if name == "memory" {
			out[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.BinarySI)
			continue
		}
		out[corev1.ResourceName(name)] = *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return out
}
