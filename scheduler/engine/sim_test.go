package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

// sim is a toy cluster around a snapshot: it plays the scheduler runtime (applies bindings and
// evictions to pod objects and feeds them back) and the workload controllers (recreates evicted
// pods), and checks the engine's invariants from the pod objects, independently of the
// snapshot's own bookkeeping.
type sim struct {
	snap   *snapshot.Snapshot
	eng    *engine.Engine
	now    time.Time
	nodes  map[string]*corev1.Node
	pods   map[types.NamespacedName]*corev1.Pod
	queues map[string]*v1alpha1.Queue
	// recreate marks pods whose controller recreates them (pending) after an eviction.
	recreate map[types.NamespacedName]bool
	// minMember of each gang key, for the all-or-nothing check.
	minMember map[snapshot.GangKey]int32
	// leaving are evicted pods still terminating, with the cycles they have left.
	leaving map[types.NamespacedName]int
	// evictionDelay is how many cycles an evicted pod keeps terminating before it is deleted.
	evictionDelay int
	gen           int
	// nextIndex is the next GPU index scenario set-up gives a running pod on a node.
	nextIndex map[string]int
	// loans and loanReturns count the loans bound and returned, for coverage checks.
	loans, loanReturns int
	// budgets are the scenario's PodDisruptionBudgets; refused the evictions of the latest
	// cycle that the harness, as the API server, refused for one.
	budgets []budgetSpec
	refused []refusedEviction
	// refusals counts every refusal, for coverage checks.
	refusals int
	// hist, when set, keeps the queues' usage history on the harness's clock (fair share over
	// time), as the runtime's loop does around each cycle.
	hist *usage.History
}

func newSim(opts engine.Options, now time.Time) *sim {
	return &sim{
		snap: snapshot.New(), eng: engine.New(opts), now: now,
		nodes: map[string]*corev1.Node{}, pods: map[types.NamespacedName]*corev1.Pod{},
		queues: map[string]*v1alpha1.Queue{}, recreate: map[types.NamespacedName]bool{},
		minMember: map[snapshot.GangKey]int32{}, leaving: map[types.NamespacedName]int{},
		nextIndex: map[string]int{},
	}
}

func (s *sim) addNode(n *corev1.Node) error {
	s.nodes[n.Name] = n
	return s.snap.UpsertNode(n)
}

func (s *sim) addQueue(q *v1alpha1.Queue) error {
	s.queues[q.Name] = q
	return s.snap.UpsertQueue(q)
}

func (s *sim) addPod(p *corev1.Pod, recreate bool) error {
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if recreate && metav1.GetControllerOf(p) == nil {
		// The controller that recreates it (consolidation moves only such pods).
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: k.Name + "-owner", UID: types.UID(k.String() + "-owner"), Controller: ptrTrue()})
	}
	s.pods[k] = p
	s.recreate[k] = recreate
	info := snapshot.PodInfoFromPod(p)
	if info.MinMember > 0 {
		s.minMember[info.Gang] = info.MinMember
	} else if _, ok := s.minMember[info.Gang]; !ok {
		s.minMember[info.Gang] = 1
	}
	return s.snap.UpsertPod(p)
}

func (s *sim) deletePod(k types.NamespacedName) {
	delete(s.pods, k)
	delete(s.leaving, k)
	s.snap.DeletePod(k)
}

// finishPod marks a pod Succeeded.
func (s *sim) finishPod(k types.NamespacedName) error {
	p := s.pods[k]
	if p == nil {
		return fmt.Errorf("no pod %s", k)
	}
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	s.pods[k] = p
	return s.snap.UpsertPod(p)
}

// cycle runs the engine, checks invariants against the state before, and applies the result.
func (s *sim) cycle() (engine.Result, error) {
	// Pods evicted earlier finish terminating.
	for k, left := range s.leaving {
		if left <= 0 {
			s.terminate(k)
		} else {
			s.leaving[k] = left - 1
		}
	}
	var errs []error
	if len(s.budgets) > 0 {
		errs = append(errs, s.syncBudgets())
	}
	s.refused = s.refused[:0]
	s.hist.Advance(s.now)
	s.hist.Apply(s.snap)
	res := s.eng.Schedule(s.snap, s.now)
	s.hist.Record(s.snap, res.Capacity)
	errs = append(errs, s.checkResult(res), s.checkReasons(res))
	if err := s.apply(res); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.checkCluster())
	if err := s.snap.Verify(); err != nil {
		errs = append(errs, fmt.Errorf("snapshot bookkeeping: %w", err))
	}
	return res, errors.Join(errs...)
}

func (s *sim) terminate(k types.NamespacedName) {
	p := s.pods[k]
	recreate := s.recreate[k]
	s.deletePod(k)
	if p == nil || !recreate {
		return
	}
	s.gen++
	np := p.DeepCopy()
	np.UID = types.UID(fmt.Sprintf("%s-%d", k, s.gen))
	np.Spec.NodeName = ""
	np.Status = corev1.PodStatus{Phase: corev1.PodPending}
	np.DeletionTimestamp = nil
	np.CreationTimestamp = metav1.NewTime(s.now)
	delete(np.Annotations, v1alpha1.GPUIndexAnnotation)
	delete(np.Annotations, v1alpha1.LoanAnnotation)
	np.Status.Conditions = nil
	_ = s.addPod(np, true)
}

// apply plays the runtime: bind pods, evict pods.
func (s *sim) apply(res engine.Result) error {
	var errs []error
	for _, b := range res.Bindings {
		p := s.pods[b.Pod]
		if p == nil {
			errs = append(errs, fmt.Errorf("binding of unknown pod %s", b.Pod))
			continue
		}
		p = p.DeepCopy()
		p.Spec.NodeName = b.Node
		p.Status.Phase = corev1.PodRunning
		st := metav1.NewTime(s.now)
		p.Status.StartTime = &st
		var idx []string
		for _, g := range b.GPUs {
			idx = append(idx, strconv.Itoa(g.Index))
		}
		if b.Shared != nil {
			idx = append(idx, strconv.Itoa(b.Shared.Index))
		}
		if len(idx) > 0 {
			p.Annotations[v1alpha1.GPUIndexAnnotation] = strings.Join(idx, ",")
		}
		if b.Shared != nil && b.Shared.Loan {
			p.Annotations[v1alpha1.LoanAnnotation] = "true"
			s.loans++
		}
		s.pods[b.Pod] = p
		if err := s.snap.UpsertPod(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range res.Evictions {
		p := s.pods[e.Pod]
		if p == nil {
			errs = append(errs, fmt.Errorf("eviction of unknown pod %s", e.Pod))
			continue
		}
		if e.Reason == engine.EvictLoanReturn {
			s.loanReturns++
		}
		if ok, err := s.admitEviction(e); !ok || err != nil {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		p = p.DeepCopy()
		t := metav1.NewTime(s.now)
		p.DeletionTimestamp = &t
		s.pods[e.Pod] = p
		if err := s.snap.UpsertPod(p); err != nil {
			errs = append(errs, err)
		}
		s.leaving[e.Pod] = s.evictionDelay
	}
	return errors.Join(errs...)
}

// checkResult checks decisions against the state before they are applied.
func (s *sim) checkResult(res engine.Result) error {
	var errs []error
	seen := map[types.NamespacedName]bool{}
	newBound := map[snapshot.GangKey]int32{}
	for _, b := range res.Bindings {
		if seen[b.Pod] {
			errs = append(errs, fmt.Errorf("pod %s bound twice", b.Pod))
		}
		seen[b.Pod] = true
		p := s.pods[b.Pod]
		if p == nil || p.Spec.NodeName != "" {
			errs = append(errs, fmt.Errorf("binding of pod %s that is not pending", b.Pod))
			continue
		}
		newBound[b.Gang]++
	}
	// Gangs are all or nothing: a gang that gets pods gets at least what it lacked.
	for g, n := range newBound {
		running, succeeded := s.gangCounts(g)
		if running+n+succeeded < s.minMember[g] {
			errs = append(errs, fmt.Errorf("partial gang %s: %d running + %d new + %d succeeded < minMember %d", g, running, n, succeeded, s.minMember[g]))
		}
	}
	for _, e := range res.Evictions {
		p := s.pods[e.Pod]
		if p == nil || p.Spec.NodeName == "" {
			errs = append(errs, fmt.Errorf("eviction of pod %s that is not running", e.Pod))
			continue
		}
		if e.Reason != engine.EvictStaleGang && !podPreemptible(p) {
			errs = append(errs, fmt.Errorf("non-preemptible pod %s evicted (%s)", e.Pod, e.Reason))
		}
		if t := s.snap.Task(e.Pod); t != nil {
			for _, b := range t.Budgets {
				if b.BlockedAt(s.now) && (e.OverridesBudget == nil || *e.OverridesBudget != b.Key) {
					errs = append(errs, fmt.Errorf("pod %s evicted (%s) while its PodDisruptionBudget %s is blocked until %s", e.Pod, e.Reason, b.Key, b.BlockedUntil()))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkReasons checks that every gang still waiting has a reason with a code and a message.
func (s *sim) checkReasons(res engine.Result) error {
	var errs []error
	got := map[snapshot.GangKey]engine.GangReason{}
	for _, r := range res.Unschedulable {
		got[r.Gang] = r
		if r.Code == "" || r.Message == "" {
			errs = append(errs, fmt.Errorf("gang %s: empty reason %+v", r.Gang, r))
		}
		if !r.Code.Known() {
			// Consumers (the CLI's hints, the pod condition's reader) know only the published set.
			errs = append(errs, fmt.Errorf("gang %s: reason code %q is not in v1alpha1.UnschedulableReasons()", r.Gang, r.Code))
		}
	}
	for _, q := range s.snap.Queues() {
		for _, g := range q.PendingGangs {
			if _, ok := got[g.Key]; !ok {
				errs = append(errs, fmt.Errorf("gang %s waits without a reason", g.Key))
			}
		}
	}
	return errors.Join(errs...)
}

func (s *sim) gangCounts(g snapshot.GangKey) (running, succeeded int32) {
	for _, p := range s.pods {
		if snapshot.PodInfoFromPod(p).Gang != g {
			continue
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case p.Spec.NodeName != "" && p.DeletionTimestamp == nil:
			running++
		}
	}
	return
}

func podPreemptible(p *corev1.Pod) bool {
	switch p.Labels[v1alpha1.PreemptibilityLabel] {
	case string(v1alpha1.Preemptible):
		return true
	case string(v1alpha1.NonPreemptible):
		return false
	}
	return p.Spec.Priority == nil || *p.Spec.Priority < v1alpha1.NonPreemptiblePriority
}

// checkCluster checks capacity and limits from the pod objects after the result is applied.
func (s *sim) checkCluster() error {
	var errs []error
	type nodeUse struct {
		cpu, mem, pods, gpus int64
		perGPU               map[int]*gpuUse
	}
	use := map[string]*nodeUse{}
	queueGPU := map[string]int64{}
	keys := slices.Collect(func(yield func(types.NamespacedName) bool) {
		for k := range s.pods {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := s.pods[k]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n := s.nodes[p.Spec.NodeName]
		if n == nil {
			continue
		}
		u := use[n.Name]
		if u == nil {
			u = &nodeUse{perGPU: map[int]*gpuUse{}}
			use[n.Name] = u
		}
		info := snapshot.PodInfoFromPod(p)
		if info.Loan {
			// A loan is kept apart from the GPU's shares (see checkLoans).
			u.cpu += info.Req.MilliCPU
			u.mem += info.Req.Memory
			u.pods++
			if len(info.GPUIndexes) == 0 {
				errs = append(errs, fmt.Errorf("loan %s without a GPU index", k))
				continue
			}
			g := perGPU(u.perGPU, info.GPUIndexes[0])
			g.loanMem += info.Req.SharedMemMiB(nodeGPUMem(n))
			if p.DeletionTimestamp == nil {
				g.liveLoans = append(g.liveLoans, k)
			}
			if q := info.Queue; q != "" {
				queueGPU[q] += info.Req.SharedMilli(nodeGPUMem(n))
			}
			continue
		}
		u.cpu += info.Req.MilliCPU
		u.mem += info.Req.Memory
		u.pods++
		u.gpus += info.Req.WholeGPUs
		memCap := nodeGPUMem(n)
		var milli int64
		switch {
		case info.Req.WholeGPUs > 0:
			milli = info.Req.WholeGPUs * 1000
			for _, i := range info.GPUIndexes {
				g := perGPU(u.perGPU, i)
				g.whole++
			}
		case info.Req.Shared() && len(info.GPUIndexes) > 0:
			g := perGPU(u.perGPU, info.GPUIndexes[0])
			g.holders = append(g.holders, p)
			m := info.Req.SharedMilli(memCap)
			g.milli += m
			g.mem += info.Req.SharedMemMiB(memCap)
			g.fractions++
			milli = m
		}
		if q := info.Queue; q != "" {
			queueGPU[q] += milli
		}
	}
	for name, u := range use {
		n := s.nodes[name]
		a := n.Status.Allocatable
		gpus := physicalGPUs(n)
		if u.cpu > a.Cpu().MilliValue() || u.mem > a.Memory().Value() || u.pods > a.Pods().Value() {
			errs = append(errs, fmt.Errorf("node %s over capacity: cpu %d mem %d pods %d", name, u.cpu, u.mem, u.pods))
		}
		shared := 0
		for i, g := range u.perGPU {
			if i >= int(gpus) {
				errs = append(errs, fmt.Errorf("node %s: GPU index %d out of range", name, i))
			}
			if g.whole > 1 || (g.whole == 1 && g.fractions > 0) {
				errs = append(errs, fmt.Errorf("node %s GPU %d: %d whole pods and %d fractions", name, i, g.whole, g.fractions))
			}
			if g.milli > 1000 {
				errs = append(errs, fmt.Errorf("node %s GPU %d: shares sum to %d milli-GPU", name, i, g.milli))
			}
			if mc := nodeGPUMem(n); mc > 0 && g.mem > mc {
				errs = append(errs, fmt.Errorf("node %s GPU %d: %d MiB of %d given out", name, i, g.mem, mc))
			}
			if g.fractions > 0 || g.loanMem > 0 {
				shared++
			}
			if err := s.checkLoans(n, i, g); err != nil {
				errs = append(errs, err)
			}
		}
		if u.gpus+int64(shared) > gpus {
			errs = append(errs, fmt.Errorf("node %s: %d whole GPUs and %d shared GPUs on %d", name, u.gpus, shared, gpus))
		}
	}
	// Limits: GPU of every queue and its ancestors.
	sub := map[string]int64{}
	for q, v := range queueGPU {
		seen := map[string]bool{}
		for name := q; name != "" && !seen[name]; {
			seen[name] = true
			sub[name] += v
			qq := s.queues[name]
			if qq == nil {
				break
			}
			name = qq.Spec.Parent
		}
	}
	for name, v := range sub {
		q := s.queues[name]
		if q == nil || q.Spec.Resources.GPU == nil || q.Spec.Resources.GPU.Limit == nil {
			continue
		}
		if lim := q.Spec.Resources.GPU.Limit.MilliValue(); v > lim {
			errs = append(errs, fmt.Errorf("queue %s holds %d milli-GPU, over its limit %d", name, v, lim))
		}
	}
	return errors.Join(errs...)
}

type gpuUse struct {
	whole     int
	milli     int64
	mem       int64
	fractions int
	// holders are the fractional pods (not loans); loanMem what loans take (leaving ones
	// included), liveLoans the loans not leaving.
	holders   []*corev1.Pod
	loanMem   int64
	liveLoans []types.NamespacedName
}

// checkLoans checks the loans of one GPU after the cycle's decisions are applied: the loans'
// memory fits in what the idle holders leave free; and once the cycle's evictions are issued,
// no loan still runs on a GPU that is not lendable: held whole, or shared by a pod that is not
// an idle interactive pod of a queue that lends (idle for its minimum, idle memory known), or by
// no pod at all.
func (s *sim) checkLoans(n *corev1.Node, idx int, g *gpuUse) error {
	if len(g.liveLoans) == 0 {
		return nil
	}
	var idleMem int64
	bad := ""
	if g.whole > 0 {
		bad = "a whole-GPU pod holds it"
	}
	if len(g.holders) == 0 {
		bad = "no pod shares it"
	}
	for _, h := range g.holders {
		info := snapshot.PodInfoFromPod(h)
		pol := s.lending(info.Queue)
		switch {
		case h.DeletionTimestamp != nil:
			bad = "holder " + h.Name + " is leaving"
		case !info.Interactive || !info.Idle:
			bad = "holder " + h.Name + " is not an idle interactive pod"
		case !pol.Lend:
			bad = "holder " + h.Name + "'s queue does not lend"
		case s.now.Sub(info.IdleChanged) < pol.MinIdleTime:
			bad = "holder " + h.Name + " has not been idle long enough"
		case info.IdleMemMiB < 0:
			bad = "holder " + h.Name + " has no idle memory"
		case info.Swap.State == v1alpha1.GPUSwapRestoreFailed:
			bad = "holder " + h.Name + "'s memory could not be restored"
		}
		// What the gpu-agent swapped out to host RAM is not resident.
		idleMem += max(info.IdleMemMiB-info.Swap.SwappedMiB(), 0)
		if int32(len(g.liveLoans)) > pol.MaxLoansPerGPU {
			bad = fmt.Sprintf("%d loans, over the cap %d of holder %s's queue", len(g.liveLoans), pol.MaxLoansPerGPU, h.Name)
		}
	}
	if bad != "" {
		return fmt.Errorf("node %s GPU %d: loans %v still run after the cycle, but %s", n.Name, idx, g.liveLoans, bad)
	}
	if mc := nodeGPUMem(n); g.loanMem+idleMem > mc {
		return fmt.Errorf("node %s GPU %d: loans take %d MiB, holders keep %d MiB, of %d", n.Name, idx, g.loanMem, idleMem, mc)
	}
	return nil
}

// lending resolves a queue's idle-lending policy from the Queue objects, independently of the
// snapshot: each field from the nearest queue up the tree that sets it.
func (s *sim) lending(queue string) snapshot.LendingPolicy {
	p := snapshot.DefaultLendingPolicy
	var lend, minIdle, maxLoans bool
	seen := map[string]bool{}
	for name := queue; name != "" && !seen[name]; {
		seen[name] = true
		q := s.queues[name]
		if q == nil {
			break
		}
		if l := q.Spec.IdleLending; l != nil {
			if !lend && l.Lend != nil {
				p.Lend, lend = *l.Lend, true
			}
			if !minIdle && l.MinIdleTime != nil {
				p.MinIdleTime, minIdle = l.MinIdleTime.Duration, true
			}
			if !maxLoans && l.MaxLoansPerGPU != nil {
				p.MaxLoansPerGPU, maxLoans = *l.MaxLoansPerGPU, true
			}
		}
		name = q.Spec.Parent
	}
	return p
}

// setIdle sets (or clears) the gpu-agent's GPUIdle condition of a pod, as of now; memMiB >= 0
// also writes the idle-memory annotation the agent writes with it.
func (s *sim) setIdle(k types.NamespacedName, idle bool, memMiB int64) error {
	p := s.pods[k]
	if p == nil {
		return fmt.Errorf("no pod %s", k)
	}
	p = p.DeepCopy()
	st := corev1.ConditionFalse
	if idle {
		st = corev1.ConditionTrue
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if memMiB >= 0 {
		p.Annotations[v1alpha1.IdleGPUMemoryAnnotation] = strconv.FormatInt(memMiB, 10)
	}
	p.Annotations[v1alpha1.GPUIdleObservedAnnotation] = v1alpha1.FormatGPUIdleObserved(s.now)
	cond := corev1.PodCondition{Type: v1alpha1.GPUIdleCondition, Status: st, LastTransitionTime: metav1.NewTime(s.now.Truncate(time.Second)),
		Message: "set by the test"}
	p.Status.Conditions = slices.DeleteFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == v1alpha1.GPUIdleCondition })
	p.Status.Conditions = append(p.Status.Conditions, cond)
	s.pods[k] = p
	return s.snap.UpsertPod(p)
}

// setSwap writes the gpu-agent's swap state on a pod (nothing when sw is nil).
func (s *sim) setSwap(k types.NamespacedName, sw *v1alpha1.GPUSwap) error {
	if sw == nil {
		return nil
	}
	p := s.pods[k]
	if p == nil {
		return fmt.Errorf("no pod %s", k)
	}
	p = p.DeepCopy()
	p.Annotations[v1alpha1.GPUSwapAnnotation] = v1alpha1.FormatGPUSwap(*sw)
	s.pods[k] = p
	return s.snap.UpsertPod(p)
}

func perGPU(m map[int]*gpuUse, i int) *gpuUse {
	g := m[i]
	if g == nil {
		g = &gpuUse{}
		m[i] = g
	}
	return g
}

// physicalGPUs is how many GPUs the node really has: its nvidia.com/gpu, divided by the
// time-slicing replicas its gpu-agent's inventory reports (v1alpha1.GPUInventory.PhysicalGPUs).
// Read from the node object, not the snapshot, so that a snapshot counting replicas as GPUs
// fails the checks.
func physicalGPUs(n *corev1.Node) int64 {
	q := n.Status.Allocatable[v1alpha1.ResourceGPU]
	var inv v1alpha1.GPUInventory
	if err := json.Unmarshal([]byte(n.Annotations[v1alpha1.GPUInventoryAnnotation]), &inv); err == nil {
		return inv.PhysicalGPUs(q.Value())
	}
	return q.Value()
}

func nodeGPUMem(n *corev1.Node) int64 {
	if inv, err := snapshot.ParseGPUInventory(n.Annotations[v1alpha1.GPUInventoryAnnotation]); err == nil && len(inv) > 0 {
		return inv[0].MemoryMiB
	}
	v, _ := strconv.ParseInt(n.Labels[v1alpha1.GPUMemoryLabel], 10, 64)
	return v
}

func ptrTrue() *bool { b := true; return &b }

// jobLabel marks a scenario job's pods, for PodDisruptionBudget selectors.
const jobLabel = "fairway-test/job"

// refusedEviction is an eviction the harness, playing the API server, refused.
type refusedEviction struct {
	pod    types.NamespacedName
	budget types.NamespacedName
}

// budgetBackoff is how long the harness, playing the runtime, blocks a budget after a refusal.
const budgetBackoff = time.Minute

// budgetMembers lists the pods a budget covers: its jobs' pods, as its selector would.
func (s *sim) budgetMembers(b *budgetSpec) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.pods {
		if p.Namespace == b.Namespace && slices.Contains(b.Jobs, p.Labels[jobLabel]) {
			out = append(out, p)
		}
	}
	return out
}

// syncBudgets plays the disruption controller and the runtime: each budget's allowed
// disruptions are its healthy pods (running, not terminating) less those it needs (every pod
// of its jobs less maxUnavailable), and every pod it covers that the API server has not
// disrupted already (terminating) is a member.
func (s *sim) syncBudgets() error {
	var errs []error
	member := map[types.NamespacedName][]types.NamespacedName{}
	for i := range s.budgets {
		b := &s.budgets[i]
		key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
		pods := s.budgetMembers(b)
		healthy := int32(0)
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				healthy++
			}
			if p.DeletionTimestamp == nil {
				k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
				member[k] = append(member[k], key)
			}
		}
		s.snap.UpsertBudget(key, max(healthy-(int32(len(pods))-b.MaxUnavailable), 0))
	}
	for k := range s.pods {
		if s.snap.Task(k) == nil {
			continue
		}
		if err := s.snap.SetPodBudgets(k, member[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// admitEviction plays the API server's eviction subresource: it refuses (429) an eviction its
// budget does not allow, and otherwise counts it against the budget. On a refusal it plays the
// runtime: the eviction is cancelled in the snapshot and the budget blocked for a while.
func (s *sim) admitEviction(e engine.Eviction) (bool, error) {
	k := e.Pod
	t := s.snap.Task(k)
	if t == nil {
		return true, nil
	}
	for _, b := range t.Budgets {
		if b.Allowed > 0 || (e.OverridesBudget != nil && *e.OverridesBudget == b.Key) {
			// The runtime deletes a pod whose budget the eviction overrides: no Eviction API.
			continue
		}
		s.refused = append(s.refused, refusedEviction{pod: k, budget: b.Key})
		s.refusals++
		if err := s.snap.CancelEviction(k); err != nil {
			return false, err
		}
		// The runtime takes what the pod would have freed off the beneficiary's holds.
		if e.Beneficiary != nil {
			if g := s.snap.Gang(*e.Beneficiary); g != nil {
				s.snap.ShrinkHolds(g, t)
			}
		}
		return false, s.snap.BlockBudget(b.Key, s.now.Add(budgetBackoff))
	}
	for _, b := range t.Budgets {
		s.snap.UpsertBudget(b.Key, b.Allowed-1)
	}
	return true, nil
}
