package snapshot

import (
	"slices"
	"time"

	"github.com/fairway-sched/fairway/scheduler/internal/bitset"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// NoLimit marks a dimension without a limit in Queue.Limit.
const NoLimit int64 = -1

// QueueSpec is what the snapshot reads from a Queue object.
type QueueSpec struct {
	Name              string
	Parent            string
	Priority          int32
	PreemptMinRuntime time.Duration
	ReclaimMinRuntime time.Duration
	// MaxEvictionGrace is spec.maxEvictionGracePeriod, nil when unset (inherited, see
	// Queue.MaxEvictionGrace).
	MaxEvictionGrace *time.Duration
	// ReclaimBudgetTimeout is spec.reclaim.budgetTimeout, nil when unset (inherited, see
	// Queue.ReclaimBudgetTimeout).
	ReclaimBudgetTimeout *time.Duration
	// Base holds the gpu, cpu and memory terms (indexes DimGPU, DimCPU, DimMemory).
	Base [NumBaseDims]QuotaTerms
	// GPUTypes holds per-type GPU terms.
	GPUTypes map[string]QuotaTerms
	// Lending is the Queue's spec.idleLending as written; Queue.Lending is what applies.
	Lending LendingSpec
	// Policy is the Queue's spec.policy (a copy), nil when it sets none; Queue.Policy resolves it
	// with the ancestors'.
	Policy *v1alpha1.QueuePolicy
	// Namespaces are the namespaces whose pods may use the queue, sorted: the Queue's
	// spec.namespaces (QueueSpecFromQueue) and, resolved by the runtime from the namespaces'
	// labels, those its spec.namespaceSelector matches. Gangs of other namespaces that name the
	// queue are refused (Gang.Foreign).
	Namespaces []string
	// PipelineAdmission is spec.pipelineAdmission as written, "" when unset (inherited, see
	// Queue.PipelineAdmission).
	PipelineAdmission v1alpha1.PipelineAdmission
}

// Serves reports whether pods of namespace ns may use the queue. A placeholder (no Queue object)
// serves none; its gangs wait on NotReady instead.
func (q *Queue) Serves(ns string) bool {
	_, ok := slices.BinarySearch(q.Spec.Namespaces, ns)
	return ok
}

// PipelineAdmission is how the queue admits pipeline runs: its own spec.pipelineAdmission, else
// the nearest ancestor's, else PerPod (v1alpha1.ResolvePipelineAdmission, as the webhook
// resolves it). A placeholder has none of its own. The scheduler holds or stages a run only
// where this is the mode of the run's state: a Workflow's annotations alone never give it a
// hold.
func (q *Queue) PipelineAdmission() v1alpha1.PipelineAdmission {
	var modes []v1alpha1.PipelineAdmission
	for a := q; a != nil; a = a.Parent { // relink cuts cycles
		modes = append(modes, a.Spec.PipelineAdmission)
	}
	return v1alpha1.ResolvePipelineAdmission(modes...)
}

// LendingSpec is a Queue's spec.idleLending: nil (or empty) fields take the value of the
// nearest ancestor that sets them.
type LendingSpec struct {
	Lend           *bool
	Borrow         v1alpha1.BorrowPolicy
	MinIdleTime    *time.Duration
	MaxLoansPerGPU int32
}

func (a LendingSpec) equal(b LendingSpec) bool {
	return ptrEqual(a.Lend, b.Lend) && a.Borrow == b.Borrow && ptrEqual(a.MinIdleTime, b.MinIdleTime) &&
		a.MaxLoansPerGPU == b.MaxLoansPerGPU
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// LendingPolicy is the idle-lending policy that applies to a queue, inherited fields resolved.
type LendingPolicy struct {
	// Lend: the GPUs its interactive pods hold may be lent while they are idle (default false).
	Lend bool
	// Borrow: which of its preemptible pods may run on loan (default OptIn).
	Borrow v1alpha1.BorrowPolicy
	// MinIdleTime the holders must have been idle before their GPU is lent (default 0).
	MinIdleTime time.Duration
	// MaxLoansPerGPU caps the loans of one lent GPU (default 1).
	MaxLoansPerGPU int32
}

// notReady sets why the queue takes no work: the code decisions read and the message for people.
func (q *Queue) notReady(r v1alpha1.QueueNotReadyReason, message string) {
	q.NotReadyReason, q.NotReady = r, message
}

// DefaultLendingPolicy is the policy of a queue that nothing in its ancestry sets.
var DefaultLendingPolicy = LendingPolicy{Borrow: v1alpha1.BorrowOptIn, MaxLoansPerGPU: 1}

// MayBorrow reports whether a pod of the queue may run on loan under the policy, given its
// fairway.dev/borrow-idle-gpu opt-in.
func (p LendingPolicy) MayBorrow(optIn bool) bool {
	switch p.Borrow {
	case v1alpha1.BorrowAlways:
		return true
	case v1alpha1.BorrowNever:
		return false
	}
	return optIn
}

// resolveLending fills q.Lending from the specs of q and its ancestors.
func resolveLending(q *Queue) {
	p := DefaultLendingPolicy
	var lend, borrow, minIdle, maxLoans bool
	for a := q; a != nil; a = a.Parent {
		l := &a.Spec.Lending
		if !lend && l.Lend != nil {
			p.Lend, lend = *l.Lend, true
		}
		if !borrow && l.Borrow != "" {
			p.Borrow, borrow = l.Borrow, true
		}
		if !minIdle && l.MinIdleTime != nil {
			p.MinIdleTime, minIdle = max(*l.MinIdleTime, 0), true
		}
		if !maxLoans && l.MaxLoansPerGPU > 0 {
			p.MaxLoansPerGPU, maxLoans = l.MaxLoansPerGPU, true
		}
	}
	q.Lending = p
}

// NoGraceCap is Queue.MaxEvictionGrace of a queue whose ancestry sets no cap.
const NoGraceCap time.Duration = -1

// DefaultReclaimBudgetTimeout is Queue.ReclaimBudgetTimeout of a queue whose ancestry sets none.
const DefaultReclaimBudgetTimeout = 60 * time.Second

// resolveBudgetTimeout fills q.ReclaimBudgetTimeout from the specs of q and its ancestors.
func resolveBudgetTimeout(q *Queue) {
	q.ReclaimBudgetTimeout = DefaultReclaimBudgetTimeout
	for a := q; a != nil; a = a.Parent {
		if d := a.Spec.ReclaimBudgetTimeout; d != nil {
			q.ReclaimBudgetTimeout = *d
			return
		}
	}
}

// resolveGraceCap fills q.MaxEvictionGrace from the specs of q and its ancestors.
func resolveGraceCap(q *Queue) {
	q.MaxEvictionGrace = NoGraceCap
	for a := q; a != nil; a = a.Parent {
		if d := a.Spec.MaxEvictionGrace; d != nil {
			q.MaxEvictionGrace = *d
			return
		}
	}
}

// EvictionGrace is the grace period an eviction gives a pod of the queue whose own is grace
// (its terminationGracePeriodSeconds): at most the queue's cap.
func (q *Queue) EvictionGrace(grace time.Duration) time.Duration {
	if q != nil && q.MaxEvictionGrace >= 0 && grace > q.MaxEvictionGrace {
		return q.MaxEvictionGrace
	}
	return grace
}

// AnyQueueLends reports whether some queue's policy lends idle GPUs: when none does, the engine
// skips looking for lendable GPUs.
func (s *Snapshot) AnyQueueLends() bool { return s.anyLends }

// QuotaTerms are one resource's quota, weight and limit in the dimension's unit.
type QuotaTerms struct {
	// Set is true when the Queue lists the resource; only then does non-preemptible work have to
	// fit in its quota for CPU and memory (GPU always counts).
	Set    bool
	Quota  int64
	Weight int64
	Limit  int64
}

// QueueSpecFromQueue reads a Queue object. Quantities are converted to the engine's units.
func QueueSpecFromQueue(q *v1alpha1.Queue) QueueSpec {
	qs := QueueSpec{Name: q.Name, Parent: q.Spec.Parent, Priority: q.Spec.Priority, PipelineAdmission: q.Spec.PipelineAdmission}
	if len(q.Spec.Namespaces) > 0 {
		qs.Namespaces = slices.Compact(slices.Sorted(slices.Values(q.Spec.Namespaces)))
	}
	if d := q.Spec.PreemptMinRuntime; d != nil {
		qs.PreemptMinRuntime = max(d.Duration, 0)
	}
	if d := q.Spec.ReclaimMinRuntime; d != nil {
		qs.ReclaimMinRuntime = max(d.Duration, 0)
	}
	if d := q.Spec.MaxEvictionGracePeriod; d != nil {
		v := max(d.Duration, 0)
		qs.MaxEvictionGrace = &v
	}
	if r := q.Spec.Reclaim; r != nil && r.BudgetTimeout != nil {
		v := max(r.BudgetTimeout.Duration, 0)
		qs.ReclaimBudgetTimeout = &v
	}
	r := q.Spec.Resources
	qs.Base[DimGPU] = terms(r.GPU, gpuMilli)
	qs.Base[DimCPU] = terms(r.CPU, func(q *resource.Quantity) int64 { return q.MilliValue() })
	qs.Base[DimMemory] = terms(r.Memory, func(q *resource.Quantity) int64 { return q.Value() })
	if l := q.Spec.IdleLending; l != nil {
		if l.Lend != nil {
			v := *l.Lend
			qs.Lending.Lend = &v
		}
		if l.Borrow != nil {
			qs.Lending.Borrow = *l.Borrow
		}
		if l.MinIdleTime != nil {
			v := l.MinIdleTime.Duration
			qs.Lending.MinIdleTime = &v
		}
		if l.MaxLoansPerGPU != nil {
			qs.Lending.MaxLoansPerGPU = max(*l.MaxLoansPerGPU, 1)
		}
	}
	if q.Spec.Policy != nil {
		qs.Policy = q.Spec.Policy.DeepCopy()
	}
	for _, t := range q.Spec.GPUTypes {
		if qs.GPUTypes == nil {
			qs.GPUTypes = make(map[string]QuotaTerms)
		}
		qs.GPUTypes[t.Name] = terms(&v1alpha1.ResourceQuota{Quota: t.Quota, OverQuotaWeight: t.OverQuotaWeight, Limit: t.Limit}, gpuMilli)
	}
	return qs
}

func gpuMilli(q *resource.Quantity) int64 { return q.MilliValue() }

func terms(rq *v1alpha1.ResourceQuota, unit func(*resource.Quantity) int64) QuotaTerms {
	t := QuotaTerms{Weight: 1, Limit: NoLimit}
	if rq == nil {
		return t
	}
	t.Set = true
	if rq.Quota != nil {
		t.Quota = max(unit(rq.Quota), 0)
	}
	if rq.OverQuotaWeight != nil {
		t.Weight = int64(max(*rq.OverQuotaWeight, 0))
	}
	if rq.Limit != nil {
		t.Limit = max(unit(rq.Limit), 0)
	}
	return t
}

// Queue is a node of the quota tree with the live totals of everything under it. Fields are
// read-only outside this package, except FairShare, which the engine writes every cycle,
// and Usage.
type Queue struct {
	Name string
	// Index is the queue's position in Snapshot.Queues, for callers that keep per-queue arrays.
	// It changes when queues are added or removed.
	Index int
	Spec  QueueSpec
	// Defined is false for a placeholder: a queue that pods or children name but that has no
	// Queue object (yet).
	Defined  bool
	Parent   *Queue
	Children []*Queue
	// Depth is 0 at the top of the tree.
	Depth int
	// NotReadyReason says why the queue takes no work ("" when it does): missing, a missing or
	// cyclic parent, children while pods name it, or an ancestor not ready. Decisions read it;
	// NotReady says the same for people (set together, by notReady).
	NotReadyReason v1alpha1.QueueNotReadyReason
	NotReady       string

	// Quota, Weight and Limit per dimension (Limit NoLimit when none). GPU types the queue does
	// not list get quota 0, the GPU weight and no limit.
	Quota, Weight, Limit Amounts

	// Totals of the whole subtree.
	Totals

	// FairShare is the engine's latest fair share per dimension.
	FairShare Amounts

	// Usage is the queue's recent use of gpu, cpu and memory above its guarantee (indexes
	// DimGPU, DimCPU, DimMemory): decayed, over the cluster's decayed capacity, so a fraction in
	// [0, 1] (package usage keeps the history). Whoever runs the engine writes it before a cycle, as the
	// engine writes FairShare; all zero without history.
	Usage [NumBaseDims]float64

	// Lending is the idle-lending policy that applies (spec.idleLending, inherited fields
	// resolved).
	Lending LendingPolicy

	// MaxEvictionGrace caps the grace period of the queue's evicted pods: its own
	// spec.maxEvictionGracePeriod, else the nearest ancestor's; NoGraceCap when none sets one.
	MaxEvictionGrace time.Duration

	// ReclaimBudgetTimeout is how long a PodDisruptionBudget of over-quota pods may delay a
	// reclaim that delivers this queue its guarantee: its own spec.reclaim.budgetTimeout, else
	// the nearest ancestor's, else DefaultReclaimBudgetTimeout.
	ReclaimBudgetTimeout time.Duration

	// policies holds the resolved policy per kind (index kindIndex), all nil when no queue of
	// the ancestry has a policy.
	policies []*v1alpha1.EffectivePolicy

	// own counts only the gangs accounted to this queue itself.
	own Totals
	// PendingGangs are the leaf's gangs with pods to place, in no particular order.
	PendingGangs []*Gang
	gangs        int
	// listed[d] is true for the GPU-type dimensions the Queue lists.
	listed []bool
	// victimNodes are the nodes where the queue's own gangs have bound, not releasing,
	// preemptible pods; victimCount counts them per node ID and victimGPU sums their milli-GPU.
	victimNodes bitset.Set
	victimCount []int32
	victimGPU   []int64
	victimGPUs  []int32
	// victimPrio counts those pods per gang priority.
	victimPrio map[int32]int32
}

// PreemptibleGPUPodsOn is the number of the queue's own bound, preemptible pods on a node that
// hold a GPU or part of one.
func (q *Queue) PreemptibleGPUPodsOn(nodeID int) int32 {
	if nodeID < len(q.victimGPUs) {
		return q.victimGPUs[nodeID]
	}
	return 0
}

// LowestPreemptiblePriority is the lowest priority of the queue's own bound, preemptible pods;
// ok is false when there are none.
func (q *Queue) LowestPreemptiblePriority() (prio int32, ok bool) {
	for p, n := range q.victimPrio {
		if n > 0 && (!ok || p < prio) {
			prio, ok = p, true
		}
	}
	return prio, ok
}

// PreemptibleMilliGPUOn is the GPU the queue's own bound, preemptible pods hold on a node.
func (q *Queue) PreemptibleMilliGPUOn(nodeID int) int64 {
	if nodeID < len(q.victimGPU) {
		return q.victimGPU[nodeID]
	}
	return 0
}

// PreemptibleNodes is the set of nodes where the queue's own gangs run bound, preemptible pods
// that are not already leaving: where evicting its work could make room. Owned by the snapshot.
func (q *Queue) PreemptibleNodes() bitset.Set { return q.victimNodes }

// Totals are a queue's aggregates, per dimension.
type Totals struct {
	// Allocated is what bound and releasing pods hold.
	Allocated Amounts
	// AllocatedNP is the non-preemptible part of Allocated.
	AllocatedNP Amounts
	// Releasing is the releasing part of Allocated.
	Releasing Amounts
	// Pending is what placeable pending pods ask for.
	Pending Amounts
	// Held is what holds keep for pending gangs.
	Held Amounts
	// PendingPods counts placeable pending pods.
	PendingPods int32
	// Loaned is what pods on loan on idle GPUs hold (releasing ones included). It is not part
	// of Allocated: loans count against limits, not against the guarantee or fair share.
	Loaned Amounts
}

func (t *Totals) addTotals(o *Totals) {
	for d := range o.Allocated {
		t.Allocated.add(d, o.Allocated[d])
	}
	for d := range o.AllocatedNP {
		t.AllocatedNP.add(d, o.AllocatedNP[d])
	}
	for d := range o.Releasing {
		t.Releasing.add(d, o.Releasing[d])
	}
	for d := range o.Pending {
		t.Pending.add(d, o.Pending[d])
	}
	for d := range o.Held {
		t.Held.add(d, o.Held[d])
	}
	for d := range o.Loaned {
		t.Loaned.add(d, o.Loaned[d])
	}
	t.PendingPods += o.PendingPods
}

func (t Totals) clone() Totals {
	return Totals{
		Allocated: t.Allocated.Clone(), AllocatedNP: t.AllocatedNP.Clone(), Releasing: t.Releasing.Clone(),
		Pending: t.Pending.Clone(), Held: t.Held.Clone(), PendingPods: t.PendingPods, Loaned: t.Loaned.Clone(),
	}
}

// Effective is what the queue holds for fairness: allocated, minus what is already being
// released, plus what is held for its pending gangs.
func (q *Queue) Effective(d int) int64 {
	return q.Allocated.At(d) - q.Releasing.At(d) + q.Held.At(d)
}

// Demand is what the queue holds plus what its pending pods ask for.
func (q *Queue) Demand(d int) int64 { return q.Allocated.At(d) + q.Pending.At(d) }

// LimitAt returns the limit of dimension d, or NoLimit.
func (q *Queue) LimitAt(d int) int64 {
	if d < len(q.Limit) {
		return q.Limit[d]
	}
	return NoLimit
}

// QuotaSet reports whether non-preemptible work must fit in the queue's quota of dimension d:
// always for GPU, for CPU and memory only when the Queue lists them, for a GPU type when the Queue
// lists that type.
func (q *Queue) QuotaSet(d int) bool {
	if d == DimGPU {
		return true
	}
	if d < NumBaseDims {
		return q.Spec.Base[d].Set
	}
	return d < len(q.listed) && q.listed[d]
}

// IsLeaf reports whether the queue has no children.
func (q *Queue) IsLeaf() bool { return len(q.Children) == 0 }

// IsAncestorOf reports whether q is o or one of o's ancestors.
func (q *Queue) IsAncestorOf(o *Queue) bool {
	for a := o; a != nil; a = a.Parent {
		if a == q {
			return true
		}
	}
	return false
}

// String is the queue name.
func (q *Queue) String() string { return q.Name }

// resolvePolicies fills q.policies from the spec.policy of q and its ancestors, one per kind.
func resolvePolicies(q *Queue) {
	q.policies = nil
	var chain []v1alpha1.PolicyLevel
	set := false
	for a := q; a != nil; a = a.Parent {
		chain = append(chain, v1alpha1.PolicyLevel{Queue: a.Name, Policy: a.Spec.Policy})
		set = set || a.Spec.Policy != nil
	}
	if !set {
		return
	}
	q.policies = make([]*v1alpha1.EffectivePolicy, len(v1alpha1.WorkloadKinds))
	for i, k := range v1alpha1.WorkloadKinds {
		p := v1alpha1.ResolvePolicy(k, chain)
		q.policies[i] = &p
	}
}

// Policy is the queue policy that applies to pods of kind k in the queue (v1alpha1.ResolvePolicy
// over the queue and its ancestors), nil when no queue of the ancestry has a policy. An unknown
// kind gets the rules for KindPod.
func (q *Queue) Policy(k v1alpha1.WorkloadKind) *v1alpha1.EffectivePolicy {
	if q == nil || q.policies == nil {
		return nil
	}
	i := slices.Index(v1alpha1.WorkloadKinds, k)
	if i < 0 {
		i = slices.Index(v1alpha1.WorkloadKinds, v1alpha1.KindPod)
	}
	return q.policies[i]
}
