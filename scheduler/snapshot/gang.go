package snapshot

import (
	"cmp"
	"time"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// GangKey names a gang: a PodGroup, or a pod without one (a gang of one, named after the pod).
type GangKey struct {
	Namespace string
	Name      string
	// PodGroup is true when Name is a PodGroup's name, false when it is a lone pod's.
	PodGroup bool
}

// String is ns/name for a PodGroup and ns/pod:name for a lone pod.
func (k GangKey) String() string {
	if k.PodGroup {
		return k.Namespace + "/" + k.Name
	}
	return k.Namespace + "/pod:" + k.Name
}

// Compare orders keys by namespace, name, then kind.
func (k GangKey) Compare(o GangKey) int {
	if c := cmp.Compare(k.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Name, o.Name); c != 0 {
		return c
	}
	switch {
	case k.PodGroup == o.PodGroup:
		return 0
	case k.PodGroup:
		return 1
	}
	return -1
}

// Topology is a gang's (or sub-group's) topology constraint: node label keys.
type Topology struct {
	Required  string
	Preferred string
}

// SubGroup is a named part of a gang with its own minimum and topology.
type SubGroup struct {
	Name      string
	MinMember int32
	Topology  Topology
}

// GangSpec is what a PodGroup says about its gang. It overrides the pods' annotations.
type GangSpec struct {
	MinMember      int32
	Queue          string
	Preemptibility v1alpha1.Preemptibility
	Topology       Topology
	SubGroups      []SubGroup
	Created        time.Time
	// Priority, when set, is the gang's priority: the value of the PodGroup's priorityClassName,
	// which the runtime resolves (GangSpecFromPodGroup leaves it nil). Otherwise the gang takes
	// the highest priority of its pods.
	Priority *int32
}

// GangSpecFromPodGroup reads a PodGroup.
func GangSpecFromPodGroup(pg *v1alpha1.PodGroup) GangSpec {
	gs := GangSpec{
		MinMember:      max(pg.Spec.MinMember, 1),
		Queue:          pg.Spec.Queue,
		Preemptibility: pg.Spec.Preemptibility,
		Created:        pg.CreationTimestamp.Time,
	}
	if tc := pg.Spec.TopologyConstraint; tc != nil {
		gs.Topology = Topology{Required: tc.RequiredLevel, Preferred: tc.PreferredLevel}
	}
	for _, sg := range pg.Spec.SubGroups {
		s := SubGroup{Name: sg.Name, MinMember: max(sg.MinMember, 1)}
		if tc := sg.TopologyConstraint; tc != nil {
			s.Topology = Topology{Required: tc.RequiredLevel, Preferred: tc.PreferredLevel}
		}
		gs.SubGroups = append(gs.SubGroups, s)
	}
	return gs
}

// Gang is a set of pods that start together: at least MinMember of them, or none. Fields are
// read-only outside this package, except StaleSince, WaitingSince and BudgetWaitSince, which belong to the engine
// (the snapshot only clears StaleSince when the gang recovers).
type Gang struct {
	Key GangKey
	// Queue is the queue the gang is accounted to (a placeholder, not Defined, while the Queue
	// object is missing).
	Queue     *Queue
	MinMember int32
	// runMin is the minimum the gang must keep while it runs (see Stale); syncGang keeps it.
	// Beside MinMember, where it fills what would be padding: a Gang is made per pod, and 8
	// bytes more pushed it past the 512-byte size class.
	runMin    int32
	SubGroups []SubGroup
	Topology  Topology
	// Priority is the PodGroup's resolved priority class (GangSpec.Priority), else the highest
	// priority of the gang's pods.
	Priority int32
	// Preemptible gangs may be reclaimed and preempted; non-preemptible ones run only within
	// guaranteed quota.
	Preemptible bool
	// Foreign says why the gang's queue refuses it ("" when it does not): the queue exists but
	// does not serve the gang's namespace (QueueSpec.Namespaces). The scheduler checks this
	// itself rather than trusting the webhook, because labels and PodGroups can be written past
	// it. A foreign gang's pending pods are not placeable and not counted in the queue's demand;
	// its bound pods, placed before the queue stopped serving the namespace, stay accounted.
	Foreign string
	Created time.Time
	// Workload is the object that made the gang's pods (v1alpha1.WorkloadOf), zero when they
	// have none or were made by different objects; for messages that name the gang as its users
	// know it.
	Workload v1alpha1.Workload

	// Tasks are the gang's pods that are pending, bound or releasing.
	Tasks []*Task
	// Pending are the pods waiting to be placed, oldest first as they arrived.
	Pending []*Task
	// Bound counts pods on nodes that are not releasing; Releasing those leaving; Succeeded those
	// that finished well (they count towards MinMember for staleness).
	Bound     int32
	Releasing int32
	Succeeded int32
	// Assumed counts bound pods whose binding the engine made and the API server has not
	// confirmed yet; such a gang is never a victim (it would be evicted before it starts).
	Assumed int32
	// LastStart is the latest start of the gang's bound pods: minimum runtimes count from it.
	LastStart time.Time

	// StaleSince is when the engine first saw the gang running with fewer than MinMember pods.
	StaleSince time.Time
	// WaitingSince is when the engine first failed to place the gang; starvation counts from it.
	WaitingSince time.Time
	// BudgetWaitSince is when a PodDisruptionBudget of over-quota pods first held up a reclaim
	// that delivers the gang's queue its guarantee; once the queue's ReclaimBudgetTimeout has
	// passed since, such budgets no longer hold those pods. Zero while none has; the engine's
	// (kept in memory: a restarted scheduler starts the wait again).
	BudgetWaitSince time.Time

	spec  *GangSpec
	hints podHints
	holds []Hold
	// on sums holds by node, kept by AddHold and unhold: the engine asks what the gang holds on
	// a node (Node.HeldFor, Node.PinnedByOthers) for every node it tries for each of the gang's
	// pods, and summing all its holds each time was quadratic in a large gang (issue 37: a
	// 250-pod gang's reclaim spent two thirds of the scheduler's CPU there).
	on       map[*Node]*heldOn
	queuePos int
	stalePos int
	heldPos  int
}

// heldOn is what a gang's holds on one node add up to.
type heldOn struct {
	holds int
	res   NodeResources
	whole int64
	// pins counts, by GPU slot position, the gang's holds here that pin the slot.
	pins []int32
}

// hold adds (sign 1) or removes (sign -1) h in g.on.
func (g *Gang) hold(h *Hold, sign int64) {
	o := g.on[h.Node]
	if o == nil {
		if g.on == nil {
			g.on = map[*Node]*heldOn{}
		}
		o = &heldOn{}
		g.on[h.Node] = o
	}
	o.holds += int(sign)
	o.res.MilliCPU += sign * h.MilliCPU
	o.res.Memory += sign * h.Memory
	o.res.Pods += sign * h.Pods
	o.whole += sign * h.WholeGPUs
	o.pins, _ = addPins(o.pins, h.Slots, int32(sign))
}

// holdsOn reports whether any of the gang's holds is on n. An entry of g.on whose holds went
// is kept, all zero, for the next hold there: the engine takes a waiting gang's holds off and
// puts them back every cycle, and the map has at most one entry per node.
func (g *Gang) holdsOn(n *Node) bool {
	o := g.on[n]
	return o != nil && o.holds > 0
}

// podHints are what a gang's pods say about it when no PodGroup does (taken from the first pod
// that says anything).
type podHints struct {
	queue     string
	minMember int32
	// mixedWorkloads: the gang's pods were made by different objects (Gang.Workload).
	mixedWorkloads bool
	topology       Topology
	preemptibility string
	subGroups      []SubGroup
}

// Holds returns the gang's holds. The slice is owned by the gang.
func (g *Gang) Holds() []Hold { return g.holds }

// Hold keeps capacity on one node for a gang: other gangs see the node's free resources minus
// what is held, so capacity freed by evictions for a reclaiming gang, or gathered for a gang that
// waited too long, is not taken by someone else first.
type Hold struct {
	Node      *Node
	MilliCPU  int64
	Memory    int64
	Pods      int64
	WholeGPUs int64
	// MilliGPU is the GPU the hold stands for in queue accounting (whole GPUs and fractions).
	MilliGPU int64
	// Slots are the positions of the GPU slots the gang's pods were placed on in the what-if
	// that made the hold: other gangs' pods neither join nor take them (Node.PinnedByOthers),
	// so a victim's recreated pod cannot retake a GPU, or part of one, freed for the gang.
	Slots []int32
	// Expires is when the hold lapses if the gang has not been placed by then.
	Expires time.Time
}

// Stale reports whether the gang runs with fewer live pods than it must keep: MinMember, except
// while a minimum raised under the running gang (its owner grew: a RayCluster scaled up, a
// PodGroup edited) has not been reached yet; until then the gang must keep the minimum it last
// ran at, and the new pods join it as they are placed. A gang that grew is not broken, and
// evicting it because capacity for its new members is late would lose its work. A lowered
// minimum applies at once, so a gang that shrank is never stale for the pods it let go.
func (g *Gang) Stale() bool {
	keep := g.MinMember
	if g.runMin > 0 && g.runMin < keep {
		keep = g.runMin
	}
	return g.Bound > 0 && g.Bound+g.Succeeded < keep
}

// QueueName is the name of the gang's queue ("" when none).
func (g *Gang) QueueName() string {
	if g.Queue == nil {
		return ""
	}
	return g.Queue.Name
}

// String is the gang key.
func (g *Gang) String() string { return g.Key.String() }

// SubGroupMin returns the minimum of the named sub-group (0 when none is declared).
func (g *Gang) SubGroupMin(name string) int32 {
	for _, s := range g.SubGroups {
		if s.Name == name {
			return s.MinMember
		}
	}
	return 0
}
