package snapshot

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Lifecycle is what a pod object means to the snapshot.
type Lifecycle uint8

const (
	// LifecycleIgnore: not fairway's to schedule and holding nothing (a pending pod of another
	// scheduler or without a queue, a failed pod, a pending pod being deleted).
	LifecycleIgnore Lifecycle = iota
	// LifecyclePending waits for the engine.
	LifecyclePending
	// LifecycleBound is on a node.
	LifecycleBound
	// LifecycleTerminating is on a node and being deleted.
	LifecycleTerminating
	// LifecycleSucceeded finished well.
	LifecycleSucceeded
)

// PodInfo is everything the engine reads from a pod object, validated.
type PodInfo struct {
	Key types.NamespacedName
	UID types.UID
	// Queue is the fairway.dev/queue label (or a Run:ai/KAI alias); "" for pods fairway does not
	// account.
	Queue string
	// Gang is the pod's PodGroup (fairway.dev/pod-group) or the pod itself.
	Gang      GangKey
	MinMember int32
	SubGroup  string
	// SubGroups are the gang's sub-groups with their minimums (fairway.dev/sub-groups), read as
	// the PodGroup's when the gang has none yet.
	SubGroups      []SubGroup
	Preemptibility string
	Topology       Topology
	Priority       int32
	Created        time.Time
	Lifecycle      Lifecycle
	NodeName       string
	Started        time.Time
	Req            Request
	// GPUIndexes are the fairway.dev/gpu-index annotation of a bound pod: the GPU of a fractional
	// pod, or the GPUs of a whole-GPU pod when the runtime recorded them.
	GPUIndexes []int
	Gated      bool
	Problem    *Problem
	// Recreatable is v1alpha1.PodRecreatable: the pod's controller makes it again after an
	// eviction without losing work. Consolidation moves only such pods; reclaim and preemption
	// prefer them.
	Recreatable bool
	// Grace is the pod's spec.terminationGracePeriodSeconds, or -1 when it sets none: the grace
	// period its evictions give it (capped by its queue's maxEvictionGracePeriod).
	Grace time.Duration

	// Interactive is the gpu-agent's rule for the pods whose idleness it tracks (see
	// v1alpha1.IsInteractive). Idle and IdleChanged read its fairway.dev/GPUIdle condition
	// (IdleChanged: when the agent observed its last transition, to idle or to active),
	// IdleMemMiB its fairway.dev/idle-gpu-memory-used (-1 when absent or malformed).
	Interactive bool
	Idle        bool
	IdleChanged time.Time
	IdleMemMiB  int64
	// Swap is the gpu-agent's fairway.dev/gpu-swap (zero State when absent or malformed).
	Swap v1alpha1.GPUSwap
	// Loan is fairway.dev/loan: "true", written when the scheduler placed the pod on loan.
	Loan bool
	// BorrowOptIn is fairway.dev/borrow-idle-gpu: "true".
	BorrowOptIn bool
	// Kind is the pod's fairway.dev/workload-kind (KindPod when it has none or an unknown one):
	// the queue policy that applies to it.
	Kind v1alpha1.WorkloadKind
	// Workload is the object that made the pod (v1alpha1.WorkloadOf), for messages.
	Workload v1alpha1.Workload
}

// readIdle fills the idle-lending fields of info from the pod.
func readIdle(pod *corev1.Pod, info *PodInfo) {
	ann := pod.Annotations
	info.Interactive = v1alpha1.IsInteractive(pod)
	info.Kind = v1alpha1.KindOf(pod)
	info.Loan = ann[v1alpha1.LoanAnnotation] == "true"
	info.BorrowOptIn = ann[v1alpha1.BorrowIdleGPUAnnotation] == "true"
	info.IdleMemMiB = -1
	if v, ok := ann[v1alpha1.IdleGPUMemoryAnnotation]; ok {
		if m, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && m >= 0 {
			info.IdleMemMiB = m
		}
	}
	if sw, ok, err := v1alpha1.GPUSwapOf(ann); ok && err == nil {
		sw.PIDs = nil // the agent's, for its own restarts
		info.Swap = sw
	}
	if c := v1alpha1.GPUIdleConditionOf(pod); c != nil {
		info.Idle = c.Status == corev1.ConditionTrue
		info.IdleChanged = v1alpha1.GPUIdleObserved(pod)
	}
}

// PodInfoFromPod reads a pod as the snapshot of an install in v1alpha1.DefaultNamespace does.
// Malformed fairway annotations do not fail the conversion: they set Problem, so the pod's gang
// is reported unschedulable with the reason instead of being dropped.
func PodInfoFromPod(pod *corev1.Pod) PodInfo {
	return podInfo(pod, podReading{fairwayNamespace: v1alpha1.DefaultNamespace})
}

// podReading is how a snapshot reads pods: fairwayNamespace is fairway's own namespace, the only
// one whose pods can be reservations (v1alpha1.IsReservationPod); a pending pod must carry the
// webhook's seal under admission, when set.
type podReading struct {
	fairwayNamespace string
	admission        v1alpha1.AdmissionKey
}

// podInfo reads a pod as r says.
func podInfo(pod *corev1.Pod, r podReading) PodInfo {
	fairwayNamespace := r.fairwayNamespace
	info := PodInfo{
		Key:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		UID:      pod.UID,
		Created:  pod.CreationTimestamp.Time,
		NodeName: pod.Spec.NodeName,
		Gated:    len(pod.Spec.SchedulingGates) > 0,
		Grace:    -1,
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		info.Grace = time.Duration(max(*g, 0)) * time.Second
	}
	info.Recreatable = v1alpha1.PodRecreatable(pod)
	if pod.Spec.Priority != nil {
		info.Priority = *pod.Spec.Priority
	}
	_, queue, queueErr := v1alpha1.QueueOf(pod.Labels)
	info.Queue = queue
	ann := pod.Annotations
	info.Gang = GangKey{Namespace: pod.Namespace, Name: pod.Name}
	if pg := ann[v1alpha1.PodGroupAnnotation]; pg != "" {
		info.Gang = GangKey{Namespace: pod.Namespace, Name: pg, PodGroup: true}
	}
	info.SubGroup = ann[v1alpha1.SubGroupAnnotation]
	info.Preemptibility = pod.Labels[v1alpha1.PreemptibilityLabel]
	info.Topology = Topology{Required: ann[v1alpha1.TopologyRequiredAnnotation], Preferred: ann[v1alpha1.TopologyPreferredAnnotation]}

	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		info.Lifecycle = LifecycleSucceeded
	case pod.Status.Phase == corev1.PodFailed:
		info.Lifecycle = LifecycleIgnore
	case pod.Spec.NodeName != "" && pod.DeletionTimestamp != nil:
		info.Lifecycle = LifecycleTerminating
	case pod.Spec.NodeName != "":
		info.Lifecycle = LifecycleBound
	case pod.DeletionTimestamp != nil || info.Queue == "" || pod.Spec.SchedulerName != v1alpha1.SchedulerName:
		info.Lifecycle = LifecycleIgnore
	default:
		info.Lifecycle = LifecyclePending
	}
	if info.Lifecycle == LifecycleBound || info.Lifecycle == LifecycleTerminating {
		info.Started = pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			info.Started = pod.Status.StartTime.Time
		}
	}

	readIdle(pod, &info)
	info.Workload = v1alpha1.WorkloadOf(pod)
	problems := readRequest(pod, v1alpha1.IsReservationPod(pod, fairwayNamespace), &info.Req)
	if queueErr != nil {
		problems = append(problems, queueErr.Error())
	}
	if n, _, err := v1alpha1.MinMemberOf(ann); err != nil {
		problems = append(problems, err.Error())
	} else {
		info.MinMember = n
	}
	if v := ann[v1alpha1.SubGroupsAnnotation]; v != "" {
		subs, err := v1alpha1.ParseSubGroups(v)
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, sg := range subs {
			info.SubGroups = append(info.SubGroups, SubGroup{Name: sg.Name, MinMember: sg.MinMember})
		}
	}
	// Malformed binding keys are fairway's own (only its identities write them): what parses is
	// kept, as before the contract had a reader.
	binding, _ := v1alpha1.PodBindingOf(pod.Labels, ann)
	if info.Req.Reservation {
		// The agent writes the kubelet's (physical) index into gpu-index; the slot the
		// reservation holds in the snapshot is the runtime's gpu-slot.
		if binding.Slot >= 0 {
			info.GPUIndexes = []int{binding.Slot}
		}
	} else {
		info.GPUIndexes = binding.GPUIndexes
	}
	if _, err := v1alpha1.PreemptibilityOf(pod.Labels); err != nil {
		problems = append(problems, err.Error())
		info.Preemptibility = ""
	}
	if len(problems) > 0 {
		info.Problem = &Problem{Code: ProblemInvalidRequest, Message: strings.Join(problems, "; ")}
	}
	if r.admission != nil && info.Lifecycle == LifecyclePending {
		// Checked last: a pod the webhook never saw is not placed on the terms its keys claim,
		// whatever else is wrong with it.
		if err := r.admission.VerifyAdmission(pod); err != nil {
			info.Problem = &Problem{Code: ProblemNotAdmitted, Message: err.Error()}
		}
	}
	return info
}

// readRequest fills r from the pod's effective requests (resource.PodRequests: containers, init
// containers, overhead, pod-level resources) and GPU-share annotations, returning what is wrong.
// reservation says the pod is one of the scheduler's reservation pods.
func readRequest(pod *corev1.Pod, reservation bool, r *Request) []string {
	var problems []string
	r.readAmounts(pod)
	if reservation {
		// A reservation's nvidia.com/gpu is the GPU its slot's fractional pods share.
		r.Reservation = true
		r.WholeGPUs = 0
		return nil
	}
	if r.WholeGPUs < 0 {
		problems = append(problems, fmt.Sprintf("negative %s request", v1alpha1.ResourceGPU))
		r.WholeGPUs = 0
	}
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		problems = append(problems, "annotation "+err.Error())
	}
	r.FractionMilli, r.GPUMemoryMiB = share.Milli, share.MemoryMiB
	if r.Shared() && r.WholeGPUs > 0 {
		problems = append(problems, fmt.Sprintf("a pod asks for whole GPUs (%s) or for a share of one GPU, not both", v1alpha1.ResourceGPU))
	}
	for _, c := range pod.Spec.Containers {
		r.HostPorts = appendPorts(r.HostPorts, c.Ports)
	}
	for _, c := range pod.Spec.InitContainers {
		r.HostPorts = appendPorts(r.HostPorts, c.Ports)
	}
	return problems
}

// readAmounts fills r's resource amounts from the pod's effective requests: the containers' sum
// added here for the pods it is the whole answer for (containersOnly), resource.PodRequests for
// the others.
func (r *Request) readAmounts(pod *corev1.Pod) {
	if containersOnly(pod) {
		var sum requestSum
		for i := range pod.Spec.Containers {
			sum.addList(pod.Spec.Containers[i].Resources.Requests)
		}
		for i := range sum.n {
			r.setAmount(sum.names[i], &sum.qs[i])
		}
		for name, q := range sum.more {
			r.setAmount(name, &q)
		}
	} else {
		for name, q := range resource.PodRequests(pod, resource.PodResourcesOptions{}) {
			r.setAmount(name, &q)
		}
	}
	r.sortScalars()
}

func (r *Request) sortScalars() {
	slices.SortFunc(r.Scalars, func(a, b Scalar) int { return strings.Compare(string(a.Name), string(b.Name)) })
}

// setAmount records the pod's total request q of one resource.
func (r *Request) setAmount(name corev1.ResourceName, q *apiresource.Quantity) {
	switch name {
	case corev1.ResourceCPU:
		r.MilliCPU = q.MilliValue()
	case corev1.ResourceMemory:
		r.Memory = q.Value()
	case corev1.ResourcePods:
	case v1alpha1.ResourceGPU:
		r.WholeGPUs = q.Value()
	case v1alpha1.ResourceGPUShare:
		// The kubelet's ticket for the share's device; the share itself is accounted by its
		// size (the pod's fraction or memory), so counting the ticket too would count it twice.
	default:
		if v := q.Value(); v > 0 {
			r.Scalars = append(r.Scalars, Scalar{Name: name, Value: v})
		}
	}
}

// containersOnly reports whether the pod's effective requests are the plain sum of its
// containers' requests: no init containers (whose peak resource.PodRequests computes), no
// overhead and no pod-level requests. For such pods, which are nearly all pods, readRequest adds
// the quantities itself: resource.PodRequests gives the same sums but builds and copies resource
// lists for every pod, which was a fifth of building a snapshot from scratch.
func containersOnly(pod *corev1.Pod) bool {
	return len(pod.Spec.InitContainers) == 0 && len(pod.Spec.Overhead) == 0 &&
		(pod.Spec.Resources == nil || len(pod.Spec.Resources.Requests) == 0)
}

// requestSum adds quantities by resource name without a map for the first few names (a pod
// asks for a handful of resources).
type requestSum struct {
	n     int
	names [6]corev1.ResourceName
	qs    [6]apiresource.Quantity
	more  map[corev1.ResourceName]apiresource.Quantity
}

// commonResources are looked up by name before a container's requests are iterated: most
// containers ask for nothing else, and starting a map iteration costs more than three lookups.
var commonResources = [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, v1alpha1.ResourceGPU}

func (s *requestSum) addList(l corev1.ResourceList) {
	found := 0
	for _, name := range commonResources {
		if q, ok := l[name]; ok {
			s.add(name, q)
			found++
		}
	}
	if len(l) == found {
		return
	}
	for name, q := range l {
		if !slices.Contains(commonResources[:], name) {
			s.add(name, q)
		}
	}
}

func (s *requestSum) add(name corev1.ResourceName, q apiresource.Quantity) {
	for i := range s.n {
		if s.names[i] == name {
			s.qs[i].Add(q)
			return
		}
	}
	if s.n < len(s.names) {
		s.names[s.n], s.qs[s.n] = name, q.DeepCopy()
		s.n++
		return
	}
	if s.more == nil {
		s.more = map[corev1.ResourceName]apiresource.Quantity{}
	}
	if v, ok := s.more[name]; ok {
		v.Add(q)
		s.more[name] = v
	} else {
		s.more[name] = q.DeepCopy()
	}
}

func appendPorts(out []HostPort, ports []corev1.ContainerPort) []HostPort {
	for _, p := range ports {
		if p.HostPort <= 0 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, HostPort{Protocol: proto, IP: p.HostIP, Port: p.HostPort})
	}
	return out
}

// UpsertPod adds or updates a pod from its informer object. Updates that change nothing the
// engine reads (most status updates) cost a comparison. While the engine's binding of a pod is in
// flight (assumed, the informer still shows it pending) the assumed placement is kept; likewise a
// pod the engine evicts stays releasing until it is deleted or CancelEviction is called.
func (s *Snapshot) UpsertPod(pod *corev1.Pod) error { return s.upsertPod(pod, s.reading) }

// UpsertStandIn adds or updates a pod the runtime made up to stand for work to come (the peak
// of a pipeline run, the next stage's pods): it never passed the webhook, so no seal is asked
// of it (SetAdmissionKey). Pods from the API server go through UpsertPod.
func (s *Snapshot) UpsertStandIn(pod *corev1.Pod) error {
	r := s.reading
	r.admission = nil
	return s.upsertPod(pod, r)
}

func (s *Snapshot) upsertPod(pod *corev1.Pod, r podReading) error {
	if pod == nil || pod.Name == "" {
		return fmt.Errorf("upsert pod: %w", ErrInvalidObject)
	}
	info := podInfo(pod, r)
	var claims []string
	if info.Queue != "" && len(pod.Spec.ResourceClaims) > 0 {
		claims = s.readClaims(pod, &info)
	}
	old := s.tasks[info.Key]
	if old != nil && old.UID != "" && info.UID != "" && old.UID != info.UID {
		s.removeTask(old) // a new pod with the name of a deleted one
		old = nil
	}
	if info.Lifecycle == LifecycleIgnore {
		if old != nil {
			s.removeTask(old)
		}
		return nil
	}
	if old != nil {
		switch {
		case old.Assumed && info.Lifecycle == LifecyclePending:
			return nil // our binding is in flight
		case old.Assumed && info.Lifecycle == LifecycleBound && info.NodeName == old.NodeName:
			old.Assumed = false
			// The bound pod now carries fairway.dev/loan when the engine lent it the GPU; keep
			// the hint in step so that the next update is not taken for a different pod.
			old.loanHint = info.Loan
			if old.Gang != nil {
				old.Gang.Assumed--
				s.syncGang(old.Gang) // a confirmed member may bring a grown gang to its minimum
			}
			if !info.Started.IsZero() && pod.Status.StartTime != nil {
				old.Started = info.Started
			}
			return nil
		case old.Evicted && info.Lifecycle == LifecycleBound && info.NodeName == old.NodeName:
			info.Lifecycle = LifecycleTerminating // our eviction is in flight
		}
	}
	if info.Queue == "" && info.Lifecycle == LifecycleSucceeded {
		if old != nil {
			s.removeTask(old)
		}
		return nil
	}
	t := s.newTask(pod, &info)
	t.claims = claims
	preset := false
	if old != nil {
		if sameTask(old, t) {
			s.releaseClass(t.Class)
			old.Priority = t.Priority
			if old.Idle != t.Idle || old.idleChanged != t.idleChanged || old.IdleMemMiB != t.IdleMemMiB || !old.Swap().Equal(t.Swap()) {
				// Whether the pod's GPU may be lent changed: nothing is accounted differently.
				old.Idle, old.idleChanged, old.IdleMemMiB, old.swap = t.Idle, t.idleChanged, t.IdleMemMiB, t.swap
				if old.Node != nil {
					old.Node.Version++
				}
			}
			old.BorrowOptIn = t.BorrowOptIn
			old.Recreatable = t.Recreatable // read only when victims are chosen
			old.Grace = t.Grace
			return nil
		}
		t.Evicted = old.Evicted && t.State == TaskReleasing
		t.Budgets = old.Budgets // the runtime's facts about the pod, kept until it sets them again
		if old.State != TaskPending && old.State != TaskSucceeded && old.NodeName == t.NodeName &&
			t.State != TaskSucceeded && len(info.GPUIndexes) == 0 && old.Req.WholeGPUs == t.Req.WholeGPUs &&
			old.Req.Reservation == t.Req.Reservation &&
			old.Req.FractionMilli == t.Req.FractionMilli && old.Req.GPUMemoryMiB == t.Req.GPUMemoryMiB {
			t.GPUs = cloneAssignment(old.GPUs)
			preset = old.Node != nil
		}
		s.removeTask(old)
	}
	s.addTask(t, &info, preset)
	return nil
}

func cloneAssignment(a Assignment) Assignment {
	a.Whole = slices.Clone(a.Whole)
	return a
}

// DeletePod removes a pod.
func (s *Snapshot) DeletePod(key types.NamespacedName) {
	if t := s.tasks[key]; t != nil {
		s.removeTask(t)
	}
}

func (s *Snapshot) newTask(pod *corev1.Pod, info *PodInfo) *Task {
	t := &Task{
		Key: info.Key, UID: info.UID, SubGroup: info.SubGroup, Req: info.Req, Priority: info.Priority,
		Created: info.Created, NodeName: info.NodeName, Started: info.Started, Gated: info.Gated,
		Problem: info.Problem, nodePos: -1, pendPos: -1, gangPos: -1,
		GPUs: Assignment{Shared: -1}, resvSlot: -1, Recreatable: info.Recreatable, Grace: info.Grace,
		Interactive: info.Interactive, Idle: info.Idle, IdleMemMiB: info.IdleMemMiB,
		BorrowOptIn: info.BorrowOptIn, loanHint: info.Loan, Kind: info.Kind,
	}
	if !info.Swap.Equal(v1alpha1.GPUSwap{}) {
		sw := info.Swap
		t.swap = &sw
	}
	if !info.IdleChanged.IsZero() {
		t.idleChanged = info.IdleChanged.UnixNano()
	}
	if info.Req.Reservation && len(info.GPUIndexes) > 0 {
		t.resvSlot = info.GPUIndexes[0]
	}
	switch info.Lifecycle {
	case LifecyclePending:
		t.State = TaskPending
	case LifecycleBound:
		t.State = TaskBound
	case LifecycleTerminating:
		t.State = TaskReleasing
	case LifecycleSucceeded:
		t.State = TaskSucceeded
	}
	if info.Queue != "" && t.State != TaskSucceeded {
		t.Class = s.internClass(pod)
		if t.State == TaskPending && t.Problem == nil && t.Class.Unsupported != nil {
			t.Problem = t.Class.Unsupported
		}
	}
	t.pendGPU = t.pendingGPUEstimate(s.refGPUMemMiB)
	return t
}

// sameTask reports whether an update changes nothing the snapshot accounts (priority aside).
func sameTask(a, b *Task) bool {
	return a.State == b.State && a.NodeName == b.NodeName && a.SubGroup == b.SubGroup &&
		a.Gated == b.Gated && a.Class == b.Class && samePending(a, b) &&
		a.Req.MilliCPU == b.Req.MilliCPU && a.Req.Memory == b.Req.Memory &&
		a.Req.WholeGPUs == b.Req.WholeGPUs && a.Req.FractionMilli == b.Req.FractionMilli &&
		a.Req.GPUMemoryMiB == b.Req.GPUMemoryMiB && a.Req.Reservation == b.Req.Reservation &&
		a.Req.DRA == b.Req.DRA && slices.Equal(a.claims, b.claims) &&
		a.resvSlot == b.resvSlot && a.loanHint == b.loanHint && a.Interactive == b.Interactive && a.Kind == b.Kind && slices.Equal(a.Req.Scalars, b.Req.Scalars) &&
		slices.Equal(a.Req.HostPorts, b.Req.HostPorts) && (a.Problem == nil) == (b.Problem == nil) &&
		(a.Problem == nil || *a.Problem == *b.Problem)
}

func samePending(a, b *Task) bool { return a.Priority == b.Priority || a.State != TaskPending }

// addTask records a new task; info carries what the task's gang is made of.
func (s *Snapshot) addTask(t *Task, info *PodInfo, gpusPreset bool) {
	s.tasks[t.Key] = t
	chargeBudgets(t, 1)
	if info.Queue == "" {
		// Not fairway's: it only takes node capacity.
		if t.State == TaskBound || t.State == TaskReleasing {
			s.attachToNode(t, info.GPUIndexes, gpusPreset)
		}
		return
	}
	g := s.gangFor(info)
	t.Gang = g
	if t.State == TaskSucceeded {
		g.Succeeded++
		s.refreshGang(g, nil)
		s.syncGang(g)
		return
	}
	t.gangPos = len(g.Tasks)
	g.Tasks = append(g.Tasks, t)
	switch t.State {
	case TaskPending:
		t.pendPos = len(g.Pending)
		g.Pending = append(g.Pending, t)
	case TaskBound:
		g.Bound++
	case TaskReleasing:
		g.Releasing++
	}
	if t.State != TaskPending && t.Started.After(g.LastStart) {
		g.LastStart = t.Started
	}
	s.refreshGang(g, t)
	if t.State == TaskBound || t.State == TaskReleasing {
		s.attachToNode(t, info.GPUIndexes, gpusPreset)
	}
	s.account(t, 1)
	s.countDemand(t, 1)
	s.syncGang(g)
}

// removeTask forgets a task entirely.
func (s *Snapshot) removeTask(t *Task) {
	delete(s.tasks, t.Key)
	chargeBudgets(t, -1)
	g := t.Gang
	if g == nil {
		if t.State == TaskBound || t.State == TaskReleasing {
			s.detachFromNode(t)
		}
		return
	}
	if t.State == TaskSucceeded {
		g.Succeeded--
		s.syncGang(g)
		s.maybeDropGang(g)
		return
	}
	s.account(t, -1)
	s.countDemand(t, -1)
	if t.State == TaskBound || t.State == TaskReleasing {
		s.detachFromNode(t)
	}
	if t.Assumed {
		g.Assumed--
	}
	switch t.State {
	case TaskPending:
		s.unlinkPending(t)
	case TaskBound:
		g.Bound--
	case TaskReleasing:
		g.Releasing--
	}
	g.Tasks = swapRemove(g.Tasks, t, func(t *Task) *int { return &t.gangPos })
	s.releaseClass(t.Class)
	s.refreshGang(g, nil)
	s.syncGang(g)
	s.maybeDropGang(g)
}

func (s *Snapshot) unlinkPending(t *Task) {
	g := t.Gang
	g.Pending = swapRemove(g.Pending, t, func(t *Task) *int { return &t.pendPos })
}

func (s *Snapshot) attachToNode(t *Task, indexes []int, preset bool) {
	n := s.nodeByName[t.NodeName]
	if n == nil {
		s.orphans[t.NodeName] = append(s.orphans[t.NodeName], t)
		return
	}
	if !preset {
		n.placeExisting(t, indexes)
	}
	t.Node = n
	n.attach(t)
	s.victimRef(t, 1)
	s.reindex(n)
}

func (s *Snapshot) detachFromNode(t *Task) {
	n := t.Node
	if n == nil {
		list := s.orphans[t.NodeName]
		if i := slices.Index(list, t); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(s.orphans, t.NodeName)
		} else {
			s.orphans[t.NodeName] = list
		}
		return
	}
	s.victimRef(t, -1)
	n.detach(t)
	t.Node = nil
	s.reindex(n)
}

// victimRef adds (sign 1) or removes (sign -1) a bound preemptible pod from what its node and
// its queue know of evictable work. Callers pair the calls around every change of the pod's
// node, state, gang queue or preemptibility.
func (s *Snapshot) victimRef(t *Task, sign int64) {
	n := t.Node
	g := t.Gang
	if n == nil || g == nil || t.State != TaskBound || !g.Preemptible || t.GPUs.Loan {
		// Loans are never victims: evicting one frees nothing placement could use.
		return
	}
	n.PreemptibleMilliGPU += sign * t.GPUs.MilliGPU()
	q := g.Queue
	if q == nil {
		return
	}
	for len(q.victimCount) <= n.ID {
		q.victimCount = append(q.victimCount, 0)
		q.victimGPU = append(q.victimGPU, 0)
		q.victimGPUs = append(q.victimGPUs, 0)
	}
	q.victimCount[n.ID] += int32(sign)
	if gpu := t.GPUs.MilliGPU(); gpu > 0 {
		q.victimGPU[n.ID] += sign * gpu
		q.victimGPUs[n.ID] += int32(sign)
	}
	if q.victimPrio == nil {
		q.victimPrio = map[int32]int32{}
	}
	if q.victimPrio[g.Priority] += int32(sign); q.victimPrio[g.Priority] == 0 {
		delete(q.victimPrio, g.Priority)
	}
	if q.victimCount[n.ID] > 0 {
		q.victimNodes.Add(n.ID)
	} else {
		q.victimNodes.Remove(n.ID)
	}
}

// Contribution kinds of a task to queue totals.
const (
	kindPending uint8 = 1 << iota
	kindAllocated
	kindNP
	kindReleasing
	kindLoaned
)

// chargeKinds is how a task counts in its queue's totals: pending demand, allocated (and
// non-preemptible, releasing), or loaned. A loan counts only as Loaned: it must not change how
// far the queue looks from its fair share, nor be taken back by reclaim.
func chargeKinds(t *Task) uint8 {
	var kinds uint8
	switch t.State {
	case TaskPending:
		if !t.Placeable() {
			return 0
		}
		return kindPending
	case TaskBound:
		kinds = kindAllocated
	case TaskReleasing:
		kinds = kindAllocated | kindReleasing
	default:
		return 0
	}
	if t.GPUs.Loan {
		return kindLoaned
	}
	if !t.Gang.Preemptible {
		kinds |= kindNP
	}
	return kinds
}

// account adds (sign 1) or removes (sign -1) a task's contribution to its queue's totals and its
// ancestors'.
func (s *Snapshot) account(t *Task, sign int64) {
	g := t.Gang
	if g == nil || g.Queue == nil || t.shadow && t.State == TaskPending {
		return
	}
	kinds := chargeKinds(t)
	if kinds == 0 {
		return
	}
	s.applyCharge(&g.Queue.own, t, kinds, sign)
	for a := g.Queue; a != nil; a = a.Parent {
		s.applyCharge(&a.Totals, t, kinds, sign)
	}
}

func (s *Snapshot) applyCharge(tt *Totals, t *Task, kinds uint8, sign int64) {
	if kinds&kindPending != 0 {
		tt.PendingPods += int32(sign)
	}
	t.charge(s, func(d int, v int64) {
		v *= sign
		if kinds&kindPending != 0 {
			tt.Pending.add(d, v)
		}
		if kinds&kindAllocated != 0 {
			tt.Allocated.add(d, v)
		}
		if kinds&kindNP != 0 {
			tt.AllocatedNP.add(d, v)
		}
		if kinds&kindReleasing != 0 {
			tt.Releasing.add(d, v)
		}
		if kinds&kindLoaned != 0 {
			tt.Loaned.add(d, v)
		}
	})
}
