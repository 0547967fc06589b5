package snapshot

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// TaskState is where a pod is in the snapshot.
type TaskState uint8

const (
	// TaskPending waits for the engine to place it.
	TaskPending TaskState = iota
	// TaskBound is on a node: running, bound, or assumed by the engine.
	TaskBound
	// TaskReleasing is on a node and leaving it (evicted or terminating).
	TaskReleasing
	// TaskSucceeded finished well; it holds nothing and counts towards its gang's minimum.
	TaskSucceeded
)

// String is the state's name.
func (s TaskState) String() string {
	switch s {
	case TaskPending:
		return "Pending"
	case TaskBound:
		return "Bound"
	case TaskReleasing:
		return "Releasing"
	case TaskSucceeded:
		return "Succeeded"
	}
	return "Unknown"
}

// Assignment is which GPUs of its node a pod holds.
type Assignment struct {
	// Whole are positions in Node.Slots of the whole GPUs the pod holds.
	Whole []int32
	// Floating counts whole GPUs held at unknown positions.
	Floating int64
	// Shared is the position of the GPU a fractional pod shares, or -1.
	Shared int32
	// Loan is true for a pod on loan on an idle interactive pod's GPU (Shared is that GPU). A
	// loan is counted apart from the GPU's shares (GPUSlot.Loans): placement and fair share see
	// the GPU as if it were not there, and the pod is evicted when the GPU's holders wake.
	// (Declared here, where it fills padding: the engine copies assignments a lot.)
	Loan bool
	// Milli and MemMiB are what the fractional pod takes of that GPU.
	Milli  int64
	MemMiB int64
	// DRA is what the engine allocated for the pod's ResourceClaims (Whole are the GPU devices
	// among them); nil for pods without claims and for pods found bound.
	DRA *DRAAllocation
}

// MilliGPU is the total GPU the assignment holds.
func (a *Assignment) MilliGPU() int64 {
	m := (int64(len(a.Whole)) + a.Floating) * MilliPerGPU
	if a.Shared >= 0 {
		m += a.Milli
	}
	return m
}

// slotMilli is the GPU the assignment takes of its node's GPUs as shares: all of it, except for
// a loan, which is counted apart (GPUSlot.Loans).
func (a *Assignment) slotMilli() int64 {
	if a.Loan {
		return 0
	}
	return a.MilliGPU()
}

// Problem is why a pod cannot be scheduled whatever the cluster looks like: a malformed request
// or a constraint the engine does not evaluate.
type Problem struct {
	// Code is ProblemInvalidRequest, ProblemUnsupported, ProblemVolume or ProblemNotAdmitted.
	Code    string
	Message string
}

// Problem codes.
const (
	ProblemInvalidRequest = "InvalidRequest"
	ProblemUnsupported    = "UnsupportedConstraint"
	// ProblemVolume: a claim of the pod cannot be used now (VolumeProblemAnnotation).
	ProblemVolume = "VolumeBinding"
	// ProblemNotAdmitted: the pod lacks the webhook's seal, or its seal does not match it
	// (Snapshot.SetAdmissionKey).
	ProblemNotAdmitted = "NotAdmitted"
)

// Task is one pod. Fields are read-only outside this package; change them through Snapshot.
type Task struct {
	Key types.NamespacedName
	UID types.UID
	// Gang is never nil for a managed pod (a pod without a pod group is a gang of one). Pods
	// without a queue (not fairway's, or bound by another scheduler) have a nil Gang: they only
	// take node capacity.
	Gang     *Gang
	SubGroup string
	Req      Request
	// Class holds the pod's node constraints (selector, affinity, tolerations), shared by every
	// pod with the same ones.
	Class    *FilterClass
	Priority int32
	Created  time.Time

	State TaskState
	// Assumed is true from the engine's binding until the API server confirms it (UpsertPod with
	// the node name set) or the runtime calls Forget.
	Assumed bool
	// Node is the node of a bound or releasing pod; NodeName is kept even while the node object
	// is missing.
	Node     *Node
	NodeName string
	GPUs     Assignment
	// Started is when the pod started running (or was assumed).
	Started time.Time
	// Gated pods have scheduling gates and are not placed.
	Gated bool
	// Problem is set on a pending pod the engine must not place; its gang reports it.
	Problem *Problem
	// Evicted is true when the engine chose the pod as a victim (as opposed to a pod that
	// terminates on its own); CancelEviction undoes it.
	Evicted bool
	// Recreatable is true when the pod's controller makes it again after an eviction without
	// losing work (v1alpha1.PodRecreatable).
	Recreatable bool
	// Grace is the pod's terminationGracePeriodSeconds, -1 when its spec sets none.
	Grace time.Duration
	// Budgets are the PodDisruptionBudgets whose allowance an eviction of the pod would use
	// (see SetPodBudgets); nil for almost every pod.
	Budgets []*Budget

	// Kind is the pod's kind of work (fairway.dev/workload-kind): which rules of its queue's
	// policy apply to it (Queue.Policy).
	Kind v1alpha1.WorkloadKind

	// Idle lending (see Lendable). Interactive pods (notebooks, non-preemptible work) may lend
	// the GPU they share while the gpu-agent reports them idle.
	Interactive bool
	// Idle is the gpu-agent's fairway.dev/GPUIdle condition (True).
	Idle bool
	// IdleMemMiB is the GPU memory the pod's GPU kept in use when it went idle (the agent's
	// fairway.dev/idle-gpu-memory-used), or -1 when unknown.
	IdleMemMiB int64
	// Swap is the gpu-agent's swap state of the pod's GPU memory (fairway.dev/gpu-swap): what a
	// swap would move (Eligible), what is on the host (SwappedOut), or why neither. Read only
	// while Idle, except RestoreFailed, which keeps its GPU from being lent at all. Read with
	// Swap(); nil for none, which is almost every pod: inline, the state made every Task 48
	// bytes larger and pushed it past the 512-byte size class.
	swap *v1alpha1.GPUSwap
	// BorrowOptIn is the pod's fairway.dev/borrow-idle-gpu: "true".
	BorrowOptIn bool
	// loanHint is the pod's fairway.dev/loan: "true", which restores a loan found running.
	loanHint bool
	// idleChanged is when the agent saw the pod's GPUIdle condition last change (Unix
	// nanoseconds; see IdleSince and WokeAt): kept small, every pod carries it.
	idleChanged int64

	// pendGPU is the milli-GPU a pending pod is charged as demand; fixed when the pod is
	// recorded so that charging and uncharging always agree.
	pendGPU int64

	// shadow marks a what-if copy (see Snapshot.Shadow).
	shadow bool

	// claims are the names of the pod's ResourceClaims (its namespace), resolved from its spec and
	// status (see readClaims).
	claims []string

	// resvSlot is the GPU index a reservation pod holds (fairway.dev/gpu-slot), or -1.
	resvSlot int

	nodePos int
	pendPos int
	gangPos int
}

// IsShadow reports whether the task is a what-if copy made by Snapshot.Shadow.
func (t *Task) IsShadow() bool { return t.shadow }

// PendingGPU is the milli-GPU the pod is charged as pending demand (see the package units).
func (t *Task) PendingGPU() int64 { return t.pendGPU }

// IdleSince is when the gpu-agent observed the pod go idle (zero unless Idle).
func (t *Task) IdleSince() time.Time {
	if !t.Idle || t.idleChanged == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.idleChanged).UTC()
}

// WokeAt is when the gpu-agent observed the interactive pod turn active (its GPUIdle condition
// False; zero while idle or when never reported): where the time a loan takes to go back starts.
func (t *Task) WokeAt() time.Time {
	if t.Idle || t.idleChanged == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.idleChanged).UTC()
}

// Managed reports whether the pod is accounted to a queue.
func (t *Task) Managed() bool { return t.Gang != nil }

// Placeable reports whether the engine may try to place the pending pod: not gated, without a
// problem, and in a gang its queue takes (Gang.Foreign).
func (t *Task) Placeable() bool {
	return t.State == TaskPending && !t.Gated && t.Problem == nil && (t.Gang == nil || t.Gang.Foreign == "")
}

// pendingGPUEstimate is the milli-GPU a pending pod will likely take: a GPU-memory request is
// converted with the largest GPU memory in the cluster (or counted as a whole GPU when none is
// known).
func (t *Task) pendingGPUEstimate(refMemMiB int64) int64 {
	gpu := t.Req.WholeGPUs * MilliPerGPU
	if t.Req.Shared() {
		m := t.Req.SharedMilli(refMemMiB)
		if m < 0 {
			m = MilliPerGPU
		}
		gpu += m
	}
	return gpu
}

// charge calls f for each queue dimension the pod is charged in, with its amount. Bound pods are
// charged their actual GPU (and their node's GPU type); pending pods their estimate and the GPU
// type their node selector pins, if any.
func (t *Task) charge(s *Snapshot, f func(d int, v int64)) {
	var gpu int64
	typeDim := -1
	if t.State == TaskPending || t.Node == nil {
		// Pending, or bound to a node the snapshot does not know yet: the estimate.
		gpu = t.pendGPU
		if t.Class != nil && t.Class.PinnedType != "" {
			typeDim = s.typeDim(t.Class.PinnedType)
		}
	} else {
		// A loan is charged what it takes of the lent GPU (in Totals.Loaned, see account).
		gpu = t.GPUs.MilliGPU()
		if t.Node != nil {
			typeDim = t.Node.TypeDim
		}
	}
	f(DimGPU, gpu)
	f(DimCPU, t.Req.MilliCPU)
	f(DimMemory, t.Req.Memory)
	if typeDim >= 0 && gpu > 0 {
		f(typeDim, gpu)
	}
}

// Swap is the gpu-agent's swap state of the pod's GPU memory (fairway.dev/gpu-swap), the zero
// value when the agent wrote none.
func (t *Task) Swap() v1alpha1.GPUSwap {
	if t.swap == nil {
		return v1alpha1.GPUSwap{}
	}
	return *t.swap
}
