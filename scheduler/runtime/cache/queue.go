package cache

import (
	"cmp"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Kind is the kind of object an event is about.
type Kind uint8

// Kinds of objects, in the order the loop applies their changes to the snapshot: nodes and
// queues first, so that pods find them.
const (
	KindNode Kind = iota
	KindNamespace
	KindQueue
	KindPriorityClass
	KindPodGroup
	KindStorageClass
	KindVolume
	KindClaim
	// KindDeviceClass, KindResourceSlice and KindResourceClaim are DRA objects (after nodes,
	// whose GPUs slices make; claims before the pods that use them).
	KindDeviceClass
	KindResourceSlice
	KindResourceClaim
	// KindBudget is a PodDisruptionBudget; applied before pods, which name them.
	KindBudget
	KindPod
	// KindWorkflow is an Argo Workflow that pipeline admission holds (runtime/pipelines); applied
	// after pods, which it may stand in for.
	KindWorkflow
)

// String names the kind, for logs.
func (k Kind) String() string {
	switch k {
	case KindNode:
		return "Node"
	case KindNamespace:
		return "Namespace"
	case KindQueue:
		return "Queue"
	case KindPriorityClass:
		return "PriorityClass"
	case KindPodGroup:
		return "PodGroup"
	case KindStorageClass:
		return "StorageClass"
	case KindVolume:
		return "PersistentVolume"
	case KindClaim:
		return "PersistentVolumeClaim"
	case KindDeviceClass:
		return "DeviceClass"
	case KindResourceSlice:
		return "ResourceSlice"
	case KindResourceClaim:
		return "ResourceClaim"
	case KindBudget:
		return "PodDisruptionBudget"
	case KindPod:
		return "Pod"
	case KindWorkflow:
		return "Workflow"
	}
	return "Unknown"
}

// Key names an object that changed. The loop reads the object's current state from the informer
// stores when it applies the change, so many events for one object cost one update.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

// NamespacedName returns the key's namespace and name.
func (k Key) NamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: k.Namespace, Name: k.Name}
}

// CompareKeys orders keys by kind (see the Kind constants), then namespace and name.
func CompareKeys(a, b Key) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// OutcomeKind is what a worker reports back to the loop.
type OutcomeKind uint8

const (
	// BindFailed: the binding of an assumed pod was not applied; the loop forgets the
	// assumption (Snapshot.Forget).
	BindFailed OutcomeKind = iota + 1
	// EvictionFailed: an eviction the engine decided was not applied; the loop cancels it
	// (Snapshot.CancelEviction).
	EvictionFailed
	// EvictionBlocked: the API server refused an eviction for a PodDisruptionBudget
	// (Outcome.Budget, when known); the loop cancels it and blocks the budget for a while
	// (Snapshot.BlockBudget), backing off.
	EvictionBlocked
)

// Outcome is a worker's report about one pod.
type Outcome struct {
	Kind OutcomeKind
	Pod  types.NamespacedName
	// UID is the pod the decision was for; a report about an older pod of the same name is
	// ignored.
	UID types.UID
	// Budget is the PodDisruptionBudget of an EvictionBlocked pod as the snapshot knew it (the
	// Eviction API evicts pods of at most one budget); empty when the snapshot knew none.
	Budget types.NamespacedName
	// Beneficiary is the gang an EvictionFailed or EvictionBlocked eviction was for (empty
	// Name for none): the capacity held for it counted on the pod leaving.
	Beneficiary snapshot.GangKey
}

// Queue coalesces informer events per object and carries workers' outcomes back to the loop
// that owns the snapshot. Producers (informer handlers, binder and evictor workers) call Add and
// Report from any goroutine; the one consumer calls Drain. It never blocks a producer.
type Queue struct {
	mu       sync.Mutex
	keys     map[Key]struct{}
	outcomes []Outcome
	wake     chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{keys: make(map[Key]struct{}), wake: make(chan struct{}, 1)}
}

// Add records that the object changed. relevant says whether the change may change a scheduling
// decision (a new pending pod, freed capacity, a new node...): only then is the consumer woken;
// other changes (a pod turning Running) wait for the next cycle.
func (q *Queue) Add(k Key, relevant bool) {
	q.mu.Lock()
	q.keys[k] = struct{}{}
	q.mu.Unlock()
	if relevant {
		q.signal()
	}
}

// Report records a worker's outcome and wakes the consumer.
func (q *Queue) Report(o Outcome) {
	q.mu.Lock()
	q.outcomes = append(q.outcomes, o)
	q.mu.Unlock()
	q.signal()
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled (coalesced) after a relevant Add or a Report.
func (q *Queue) Wake() <-chan struct{} { return q.wake }

// Drain takes everything recorded so far: the changed keys, sorted (see CompareKeys), and the
// outcomes in the order they were reported. keys and outcomes are reused buffers.
func (q *Queue) Drain(keys []Key, outcomes []Outcome) ([]Key, []Outcome) {
	keys, outcomes = keys[:0], outcomes[:0]
	q.mu.Lock()
	for k := range q.keys {
		keys = append(keys, k)
	}
	clear(q.keys)
	outcomes = append(outcomes, q.outcomes...)
	clear(q.outcomes)
	q.outcomes = q.outcomes[:0]
	q.mu.Unlock()
	slices.SortFunc(keys, CompareKeys)
	return keys, outcomes
}

// Len is the number of keys and outcomes waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys) + len(q.outcomes)
}
