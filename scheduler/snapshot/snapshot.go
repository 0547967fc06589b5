package snapshot

import (
	"errors"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/internal/bitset"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: the pod, node or queue is not in the snapshot.
	ErrNotFound = errors.New("not found in snapshot")
	// ErrNotAssumed: Forget was called for a pod the engine did not assume.
	ErrNotAssumed = errors.New("pod is not assumed")
	// ErrNotEvicted: CancelEviction was called for a pod the engine did not evict.
	ErrNotEvicted = errors.New("pod is not being evicted by the engine")
	// ErrInvalidObject: the object is nil or lacks a name.
	ErrInvalidObject = errors.New("invalid object")
)

// Snapshot is the cluster as the engine sees it. See the package documentation for the ownership
// model: one goroutine owns it; it is not safe for concurrent use.
type Snapshot struct {
	nodes      []*Node
	nodeByName map[string]*Node
	freeIDs    []int

	queues    map[string]*Queue
	queueList []*Queue
	// anyLends is true when some queue's policy lends idle GPUs (AnyQueueLends).
	anyLends bool

	gangs     map[GangKey]*Gang
	tasks     map[types.NamespacedName]*Task
	podGroups map[types.NamespacedName]*GangSpec
	// orphans are bound pods whose node object is not (or no longer) in the snapshot.
	orphans map[string][]*Task
	classes map[string]*FilterClass

	gpuTypes     []string
	typeIdx      map[string]int
	refGPUMemMiB int64

	// Node indexes, kept up to date on every change (see reindex).
	byFree     []bitset.Set
	sharedRoom bitset.Set
	releasing  bitset.Set
	cpuOnly    bitset.Set
	allNodes   bitset.Set
	maxSlots   int

	stale []*Gang
	held  []*Gang

	topo    map[string]*Domains
	nodeGen uint64

	// budgets are the PodDisruptionBudgets the runtime reported (see Budget).
	budgets map[types.NamespacedName]*Budget
	// evicted are the pods the engine evicted lately, and for which gang (evicted.go).
	evicted evictions

	// foreign are the pending pods of other schedulers that ask for GPUs (see ForeignPending).
	foreignPods foreignPending

	// draS holds the Dynamic Resource Allocation objects (dra.go); nil until the first one.
	draS *draState

	// demand counts GPU requests by class (Demands); demandGen changes with it.
	demand       map[Demand]int32
	demandGen    uint64
	shareDemands int32

	// reading is how pods are read: fairway's namespace (SetOwnNamespace) and the admission key
	// (SetAdmissionKey).
	reading podReading
}

// SetOwnNamespace tells the snapshot fairway's own namespace (v1alpha1.DefaultNamespace unless
// set): a pod labelled as a reservation anywhere else is an ordinary pod, charged for what it
// asks, so that a tenant cannot pass eight GPUs off as a reservation. Set it before the first
// pod.
func (s *Snapshot) SetOwnNamespace(ns string) { s.reading.fairwayNamespace = ns }

// SetAdmissionKey makes the snapshot place only pending pods that carry the webhook's seal made
// with key (v1alpha1.AdmittedAnnotation); the others wait with ProblemNotAdmitted. Nil (the
// default) checks nothing, for a scheduler run without the webhook. Set it before the first pod.
func (s *Snapshot) SetAdmissionKey(key v1alpha1.AdmissionKey) { s.reading.admission = key }

// New returns an empty snapshot.
func New() *Snapshot { return NewSized(0, 0) }

// NewSized returns an empty snapshot with room for about nodes nodes and pods pods, for a
// snapshot built from caches whose sizes are known (a rebuild): growing the maps of pods and
// gangs one pod at a time rehashes them again and again, a twentieth of a rebuild's time. Gangs
// are sized as if every pod were its own, the commonest case.
func NewSized(nodes, pods int) *Snapshot {
	return &Snapshot{
		nodeByName: make(map[string]*Node, nodes),
		queues:     make(map[string]*Queue),
		gangs:      make(map[GangKey]*Gang, pods),
		tasks:      make(map[types.NamespacedName]*Task, pods),
		podGroups:  make(map[types.NamespacedName]*GangSpec),
		orphans:    make(map[string][]*Task),
		classes:    make(map[string]*FilterClass),
		typeIdx:    make(map[string]int),
		topo:       make(map[string]*Domains),

		reading: podReading{fairwayNamespace: v1alpha1.DefaultNamespace},
	}
}

// Nodes returns the node table indexed by Node.ID; entries of deleted nodes are nil. Owned by the
// snapshot.
func (s *Snapshot) Nodes() []*Node { return s.nodes }

// Node returns a node by name, or nil.
func (s *Snapshot) Node(name string) *Node { return s.nodeByName[name] }

// NodeCount is the number of nodes.
func (s *Snapshot) NodeCount() int { return len(s.nodeByName) }

// Queues returns every queue (placeholders included) sorted by name. Owned by the snapshot.
func (s *Snapshot) Queues() []*Queue { return s.queueList }

// Queue returns a queue by name, or nil.
func (s *Snapshot) Queue(name string) *Queue { return s.queues[name] }

// Task returns a pod by key, or nil.
func (s *Snapshot) Task(key types.NamespacedName) *Task { return s.tasks[key] }

// TaskCount is the number of pods in the snapshot.
func (s *Snapshot) TaskCount() int { return len(s.tasks) }

// Gang returns a gang by key, or nil.
func (s *Snapshot) Gang(key GangKey) *Gang { return s.gangs[key] }

// StaleGangs returns the gangs currently running below their minimum. Owned by the snapshot.
func (s *Snapshot) StaleGangs() []*Gang { return s.stale }

// HeldGangs returns the gangs that hold capacity. Owned by the snapshot.
func (s *Snapshot) HeldGangs() []*Gang { return s.held }

// NumDims is the length of queue vectors: the base dimensions plus one per GPU type.
func (s *Snapshot) NumDims() int { return NumBaseDims + len(s.gpuTypes) }

// GPUTypes lists the GPU types known so far, in the order of their dimensions.
func (s *Snapshot) GPUTypes() []string { return s.gpuTypes }

// DimOfType returns the queue dimension of a GPU type, or -1 when the type is unknown.
func (s *Snapshot) DimOfType(name string) int {
	if i, ok := s.typeIdx[name]; ok {
		return NumBaseDims + i
	}
	return -1
}

// typeDim returns the dimension of a GPU type, registering it on first sight.
func (s *Snapshot) typeDim(name string) int {
	if name == "" {
		return -1
	}
	if i, ok := s.typeIdx[name]; ok {
		return NumBaseDims + i
	}
	s.typeIdx[name] = len(s.gpuTypes)
	s.gpuTypes = append(s.gpuTypes, name)
	for _, q := range s.queueList {
		s.applyTerms(q)
	}
	return NumBaseDims + len(s.gpuTypes) - 1
}

// ---- Queues ----------------------------------------------------------------------------------

// UpsertQueue adds or updates a queue from its object. Updates that change nothing the engine
// reads (status writes) are cheap no-ops.
func (s *Snapshot) UpsertQueue(obj *v1alpha1.Queue) error {
	if obj == nil {
		return ErrInvalidObject
	}
	return s.UpsertQueueSpec(QueueSpecFromQueue(obj))
}

// UpsertQueueSpec adds or updates a queue from an already converted spec.
func (s *Snapshot) UpsertQueueSpec(spec QueueSpec) error {
	if spec.Name == "" {
		return ErrInvalidObject
	}
	for name := range spec.GPUTypes {
		s.typeDim(name)
	}
	q := s.queues[spec.Name]
	if q == nil {
		q = &Queue{Name: spec.Name}
		s.queues[spec.Name] = q
	} else if q.Defined && queueSpecEqual(q.Spec, spec) {
		return nil
	}
	served := q.Defined && slices.Equal(q.Spec.Namespaces, spec.Namespaces)
	q.Spec = spec
	q.Defined = true
	s.applyTerms(q)
	s.relink()
	if !served {
		s.refreshGangsOf(q)
	}
	return nil
}

// refreshGangsOf re-derives the gangs accounted to q after the namespaces it serves changed (or
// it appeared or went), so that Gang.Foreign and the queue's totals follow. Queue changes are
// rare; this walks every gang.
func (s *Snapshot) refreshGangsOf(q *Queue) {
	if q.gangs == 0 {
		return
	}
	for _, g := range s.gangs {
		if g.Queue == q {
			s.refreshGang(g, nil)
		}
	}
}

// DeleteQueue removes a queue. A queue still named by pods or children stays as a placeholder
// that takes no work.
func (s *Snapshot) DeleteQueue(name string) {
	q := s.queues[name]
	if q == nil {
		return
	}
	q.Defined = false
	q.Spec = QueueSpec{Name: name}
	s.applyTerms(q)
	s.relink()
	s.refreshGangsOf(q)
}

func queueSpecEqual(a, b QueueSpec) bool {
	if a.Name != b.Name || a.Parent != b.Parent || a.Priority != b.Priority || a.Base != b.Base || a.PipelineAdmission != b.PipelineAdmission ||
		a.PreemptMinRuntime != b.PreemptMinRuntime || a.ReclaimMinRuntime != b.ReclaimMinRuntime ||
		!ptrEqual(a.MaxEvictionGrace, b.MaxEvictionGrace) || !ptrEqual(a.ReclaimBudgetTimeout, b.ReclaimBudgetTimeout) ||
		len(a.GPUTypes) != len(b.GPUTypes) || !a.Lending.equal(b.Lending) || !slices.Equal(a.Namespaces, b.Namespaces) ||
		!equality.Semantic.DeepEqual(a.Policy, b.Policy) {
		return false
	}
	for k, v := range a.GPUTypes {
		if w, ok := b.GPUTypes[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// joinQueue returns the named queue with one more gang counted in it, creating a placeholder
// when it does not exist.
func (s *Snapshot) joinQueue(name string) *Queue {
	q := s.queues[name]
	if q == nil {
		q = &Queue{Name: name, Spec: QueueSpec{Name: name}}
		s.queues[name] = q
		s.applyTerms(q)
		q.gangs++
		s.relink()
		return q
	}
	q.gangs++
	if q.gangs == 1 && len(q.Children) > 0 {
		s.relink() // a department that now has pods of its own is not ready
	}
	return q
}

// applyTerms fills the queue's per-dimension quota, weight and limit from its spec.
func (s *Snapshot) applyTerms(q *Queue) {
	n := s.NumDims()
	q.Quota = make(Amounts, n)
	q.Weight = make(Amounts, n)
	q.Limit = make(Amounts, n)
	q.listed = make([]bool, n)
	for d := 0; d < NumBaseDims; d++ {
		t := q.Spec.Base[d]
		if !q.Defined {
			t = QuotaTerms{Weight: 1, Limit: NoLimit}
		}
		q.Quota[d], q.Weight[d], q.Limit[d] = t.Quota, t.Weight, t.Limit
	}
	for i, name := range s.gpuTypes {
		d := NumBaseDims + i
		if t, ok := q.Spec.GPUTypes[name]; ok && q.Defined {
			q.Quota[d], q.Weight[d], q.Limit[d] = t.Quota, t.Weight, t.Limit
			q.listed[d] = true
			continue
		}
		q.Quota[d], q.Weight[d], q.Limit[d] = 0, q.Weight[DimGPU], NoLimit
	}
}

// relink rebuilds the queue tree from the specs: parent links, depth, readiness, subtree totals
// and the sorted list. It runs when a queue appears, changes or goes, which is rare; pod events
// only walk the parent chain.
func (s *Snapshot) relink() {
	// Drop placeholders nobody names.
	named := make(map[string]bool)
	for _, q := range s.queues {
		if q.Defined && q.Spec.Parent != "" {
			named[q.Spec.Parent] = true
		}
	}
	for name, q := range s.queues {
		if !q.Defined && q.gangs == 0 && !named[name] {
			delete(s.queues, name)
		}
	}
	s.queueList = s.queueList[:0]
	for _, q := range s.queues {
		q.Parent, q.Children, q.Depth = nil, nil, 0
		q.notReady("", "")
		s.queueList = append(s.queueList, q)
	}
	slices.SortFunc(s.queueList, func(a, b *Queue) int { return strings.Compare(a.Name, b.Name) })
	for i, q := range s.queueList {
		q.Index = i
	}
	for _, q := range s.queueList {
		if !q.Defined {
			q.notReady(v1alpha1.QueueMissing, "queue "+q.Name+" does not exist")
			continue
		}
		if q.Spec.Parent == "" {
			continue
		}
		p := s.queues[q.Spec.Parent]
		if p == nil || !p.Defined {
			q.notReady(v1alpha1.QueueParentMissing, "parent queue "+q.Spec.Parent+" does not exist")
			continue
		}
		q.Parent = p
	}
	// Break cycles: a queue whose ancestors loop back is cut from its parent.
	for _, q := range s.queueList {
		slow, fast := q, q
		for fast != nil && fast.Parent != nil {
			slow, fast = slow.Parent, fast.Parent.Parent
			if slow == fast {
				for c := q; c != nil && c.NotReadyReason == ""; c = c.Parent {
					c.notReady(v1alpha1.QueueParentCycle, "queue "+c.Name+" is part of a parent cycle")
				}
				break
			}
		}
	}
	for _, q := range s.queueList {
		if q.NotReadyReason == v1alpha1.QueueParentCycle {
			q.Parent = nil
		}
	}
	for _, q := range s.queueList {
		if q.Parent != nil {
			q.Parent.Children = append(q.Parent.Children, q)
		}
	}
	s.anyLends = false
	for _, q := range s.queueList {
		resolveLending(q)
		resolveGraceCap(q)
		resolveBudgetTimeout(q)
		resolvePolicies(q)
		s.anyLends = s.anyLends || q.Lending.Lend
		for a := q.Parent; a != nil; a = a.Parent {
			q.Depth++
		}
		if len(q.Children) > 0 && q.gangs > 0 && q.NotReadyReason == "" {
			q.notReady(v1alpha1.QueueHasChildren, "queue "+q.Name+" has child queues; only leaf queues take pods")
		}
	}
	// Readiness is inherited: a queue under a queue that is not ready takes no work either.
	for _, q := range s.queueList {
		if q.NotReadyReason == "" {
			for a := q.Parent; a != nil; a = a.Parent {
				if a.NotReadyReason != "" && a.NotReadyReason != v1alpha1.QueueHasChildren {
					q.notReady(v1alpha1.QueueAncestorNotReady, "ancestor "+a.NotReady)
					break
				}
			}
		}
	}
	// Subtree totals: own plus children, deepest first.
	order := slices.Clone(s.queueList)
	slices.SortStableFunc(order, func(a, b *Queue) int { return b.Depth - a.Depth })
	for _, q := range order {
		q.Totals = q.own.clone()
	}
	for _, q := range order {
		if p := q.Parent; p != nil {
			p.addTotals(&q.Totals)
		}
	}
}
