package view

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// Workload kinds as the Workloads page names them: what a user started, not the pods it made.
const (
	KindKFPRun        = "KFP run"
	KindWorkflow      = "Argo Workflow"
	KindRayCluster    = "RayCluster"
	KindNotebook      = "Notebook"
	KindPyTorchJob    = "PyTorchJob"
	KindTrainingJob   = "Training job"
	KindInference     = "Inference"
	KindPodGroup      = "Gang"
	KindPod           = "Pod"
	maxMembersShown   = 64
	stateRunning      = "Running"
	stateWaiting      = "Waiting"
	statePartly       = "Partly running"
	stateSucceeded    = "Succeeded"
	stateFailed       = "Failed"
	stateBeingEvicted = "Being evicted"
)

// KindOrder is the order of the Workloads page's sections.
var KindOrder = []string{KindKFPRun, KindWorkflow, KindRayCluster, KindPyTorchJob, KindTrainingJob, KindNotebook, KindInference, KindPodGroup, KindPod}

// Workload is what a user started, with the pods it made: a KFP run or an Argo Workflow and
// its steps, a RayCluster and its head and workers, a notebook, a PyTorchJob and its replicas,
// an inference Deployment and its replicas; else a gang (PodGroup) or a pod of its own.
type Workload struct {
	Kind      string
	Namespace string
	Name      string
	// Controller is the kind of object that names it ("Deployment", "StatefulSet"), for
	// kinds of work that several controllers make (inference, notebooks).
	Controller string
	Queue      string
	// State is Running, Waiting, Partly running, Being evicted, Succeeded or Failed.
	State string
	// Waiting is true while some of its pods wait for the scheduler.
	Waiting bool
	// GPUs is what its live pods hold or ask: "8", "4×0.25"; GPUAmount the same in GPUs.
	GPUs      string
	GPUAmount float64
	// Pods counts its live pods, Running those running, Pending those waiting for a node.
	Pods, Running, Pending int
	// WaitSeconds is how long its oldest waiting pod has waited.
	WaitSeconds int64
	// Reason, Message and Hint say why it waits, as `fairway why` says it.
	Reason, Message, Hint string
	// MinMember is its gang's minimum when it is one gang of more than one pod.
	MinMember int32
	// Gangs are the PodGroups its pods belong to.
	Gangs []string
	// Roles count its pods per role (head, worker, step, replica, ...).
	Roles []Role

	// pods are its pods, by name; Members lists them when a page shows the workload.
	pods []*corev1.Pod
	// Evicting counts its pods being evicted; EvictingReason is the first one's reason
	// (FairwayReclaim, FairwayPreempt, ...) and EvictingMessage its message.
	Evicting                        int
	EvictingReason, EvictingMessage string
}

// Role counts a workload's pods of one role.
type Role struct {
	Name                       string
	Running, Waiting, Finished int
}

// Member is one pod of a workload.
type Member struct {
	Name string
	// Step is the Argo/KFP step name (the node-name annotation), "" for other kinds.
	Step   string
	Role   string
	Phase  string
	Node   string
	GPUs   string
	Reason string
	// Evicting is the reason of its DisruptionTarget condition while it is being evicted.
	Evicting string
	OnLoan   bool
	Waiting  bool
}

// groupKey says which workload a pod belongs to and its role in it.
type groupKey struct {
	kind, namespace, name, controller string
}

func keyOf(p *corev1.Pod) (groupKey, string) {
	l := p.Labels
	ns := p.Namespace
	kind := fairwayv1.WorkloadKind(p.Annotations[fairwayv1.WorkloadKindAnnotation])
	switch {
	case l[kfp.RunIDLabel] != "":
		return groupKey{KindKFPRun, ns, firstOf(l[argo.WorkflowLabel], l[kfp.RunIDLabel]), ""}, "step"
	case l[argo.WorkflowLabel] != "":
		return groupKey{KindWorkflow, ns, l[argo.WorkflowLabel], ""}, "step"
	case l[kuberay.ClusterLabel] != "":
		return groupKey{KindRayCluster, ns, l[kuberay.ClusterLabel], ""}, firstOf(l[kuberay.NodeTypeLabel], "worker")
	case l[kubeflowjob.JobNameLabel] != "":
		k := KindTrainingJob
		if l[fairwayv1.FrameworkLabel] == "pytorchjob" || l[kubeflowjob.OperatorNameLabel] == "pytorchjob-controller" {
			k = KindPyTorchJob
		}
		return groupKey{k, ns, l[kubeflowjob.JobNameLabel], ""}, firstOf(l[kubeflowjob.ReplicaTypeLabel], "replica")
	case kind == fairwayv1.KindNotebook:
		if n := l[kubeflownotebook.NotebookNameLabel]; n != "" {
			return groupKey{KindNotebook, ns, n, "Notebook"}, ""
		}
		w := fairwayv1.WorkloadOf(p)
		if w.Kind == "" {
			return groupKey{KindNotebook, ns, p.Name, ""}, ""
		}
		return groupKey{KindNotebook, ns, w.Name, w.Kind}, ""
	case kind == fairwayv1.KindInference:
		w := fairwayv1.WorkloadOf(p)
		if w.Kind == "" {
			return groupKey{KindInference, ns, p.Name, "Pod"}, "replica"
		}
		return groupKey{KindInference, ns, w.Name, w.Kind}, "replica"
	}
	if g := p.Annotations[fairwayv1.PodGroupAnnotation]; g != "" {
		w := fairwayv1.WorkloadOf(p)
		return groupKey{KindPodGroup, ns, g, w.Kind}, firstOf(p.Annotations[fairwayv1.SubGroupAnnotation], "member")
	}
	return groupKey{KindPod, ns, p.Name, ""}, ""
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// nsName names a namespaced object.
type nsName struct{ namespace, name string }

// podGroupIndex finds the PodGroups by namespace and name.
func podGroupIndex(pgs []fairwayv1.PodGroup) map[nsName]*fairwayv1.PodGroup {
	out := make(map[nsName]*fairwayv1.PodGroup, len(pgs))
	for i := range pgs {
		pg := &pgs[i]
		out[nsName{pg.Namespace, pg.Name}] = pg
	}
	return out
}

// workloadPods are the pods of one workload: its key, its pods and its pods per role.
type workloadPods struct {
	key   groupKey
	pods  []*corev1.Pod
	roles []Role
	n     int // pods counted before they are filled in
}

// groupPods groups fairway's pods (not its reservations, not other schedulers' pods) by the
// workload keyOf says they belong to, sorted by key, and counts them per role. It allocates
// little for 20,000 pods, as what a rebuild allocates makes the collector scan the whole cache
// that much more often: the groups come out of blocks rather than a slice grown (and copied)
// to thousands, and their pods are windows on one array.
func groupPods(pods []corev1.Pod) []*workloadPods {
	// A guess: workloads of a few pods each. The map grows past it if need be.
	index := make(map[groupKey]*workloadPods, len(pods)/4)
	of := make([]*workloadPods, len(pods)) // each pod's group, nil for none
	// The groups of a namespace share one copy of its name: sorting them compares namespaces
	// most, and equal strings at one address compare without reading them.
	namespaces := map[string]string{}
	var block []workloadPods
	total := 0
	for i := range pods {
		p := &pods[i]
		if !cli.IsFairwayPod(p) {
			continue
		}
		k, role := keyOf(p)
		g := index[k]
		if g == nil {
			if len(block) == 0 {
				block = make([]workloadPods, groupBlock)
			}
			g, block = &block[0], block[1:]
			g.key = k
			g.key.namespace = intern(namespaces, k.namespace)
			index[k] = g
		}
		of[i] = g
		g.n++
		total++
		if role != "" {
			g.roles = countRole(g.roles, role, p)
		}
	}
	sorted := make([]*workloadPods, 0, len(index))
	for _, g := range index {
		sorted = append(sorted, g)
	}
	slices.SortFunc(sorted, func(a, b *workloadPods) int { return compareKeys(&a.key, &b.key) })
	all := make([]*corev1.Pod, 0, total)
	for _, g := range sorted {
		n := len(all)
		all = all[:n+g.n]
		g.pods = all[n:n:len(all)]
	}
	for i, g := range of {
		if g != nil {
			g.pods = append(g.pods, &pods[i])
		}
	}
	return sorted
}

// intern returns the copy of s in seen, adding s when there is none.
func intern(seen map[string]string, s string) string {
	if v, ok := seen[s]; ok {
		return v
	}
	seen[s] = s
	return s
}

// groupBlock is how many groups groupPods allocates at a time.
const groupBlock = 256

// countRole counts p in its role: a workload has few roles, searched in a slice.
func countRole(roles []Role, role string, p *corev1.Pod) []Role {
	i := slices.IndexFunc(roles, func(r Role) bool { return r.Name == role })
	if i < 0 {
		i = len(roles)
		roles = append(roles, Role{Name: role})
	}
	r := &roles[i]
	switch {
	case cli.Terminated(p):
		r.Finished++
	case p.Spec.NodeName == "":
		r.Waiting++
	default:
		r.Running++
	}
	return roles
}

// compareKeys orders workloads by namespace, kind, name and controller.
func compareKeys(a, b *groupKey) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return strings.Compare(a.controller, b.controller)
}

// buildWorkloads groups fairway's pods into workloads, by namespace, kind and name. The first
// request after a change waits for the rebuild, so the work is spread over the CPUs the process
// may use: the PodGroups are indexed while the pods are grouped, and the workloads are built in
// runs, one per CPU, each by its own builder. Nothing else is shared but read-only inputs and
// the output's disjoint runs.
func buildWorkloads(s *Snapshot) []Workload {
	var pgs map[nsName]*fairwayv1.PodGroup
	var wg sync.WaitGroup
	wg.Go(func() { pgs = podGroupIndex(s.PodGroups) })
	groups := groupPods(s.Pods)
	wg.Wait()
	out := make([]Workload, len(groups))
	runs := max(runtime.GOMAXPROCS(0), 1)
	per := max((len(groups)+runs-1)/runs, 1)
	for lo := 0; lo < len(groups); lo += per {
		hi := min(lo+per, len(groups))
		wg.Go(func() {
			b := workloadBuilder{pgs: pgs, now: s.Now, gangs: make([]string, 0, len(s.PodGroups)/runs)}
			for i := lo; i < hi; i++ {
				g := groups[i]
				b.build(&out[i], g.key, g.pods, g.roles)
			}
		})
	}
	wg.Wait()
	return out
}

// workloadBuilder digests one group of pods after another into its workload. What it keeps
// between workloads is scratch space and the gangs' names, which the workloads' Gangs are
// windows on.
type workloadBuilder struct {
	pgs   map[nsName]*fairwayv1.PodGroup
	now   time.Time
	live  []*corev1.Pod
	gangs []string
}

// manyGangs is how many gangs a workload's are searched in a slice before a map is built.
const manyGangs = 32

func (b *workloadBuilder) build(w *Workload, k groupKey, pods []*corev1.Pod, roles []Role) {
	*w = Workload{Kind: k.kind, Namespace: k.namespace, Name: k.name, Controller: k.controller}
	slices.SortFunc(pods, func(x, y *corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	b.live = b.live[:0]
	first := len(b.gangs)
	var gangSet map[string]bool // the gangs seen, once there are too many to search
	seen := func(g string) bool {
		switch gs := b.gangs[first:]; {
		case gangSet != nil:
		case len(gs) < manyGangs:
			return slices.Contains(gs, g)
		default:
			gangSet = make(map[string]bool, 2*len(gs))
			for _, x := range gs {
				gangSet[x] = true
			}
		}
		return gangSet[g]
	}
	failed := 0
	oldest := time.Time{}
	var waitPod *corev1.Pod
	for _, p := range pods {
		if w.Queue == "" {
			_, w.Queue, _ = fairwayv1.QueueOf(p.Labels)
		}
		if g := p.Annotations[fairwayv1.PodGroupAnnotation]; g != "" && !seen(g) {
			b.gangs = append(b.gangs, g)
			if gangSet != nil {
				gangSet[g] = true
			}
		}
		if cli.Terminated(p) {
			if p.Status.Phase == corev1.PodFailed {
				failed++
			}
			continue
		}
		b.live = append(b.live, p)
		if p.Spec.NodeName == "" {
			w.Pending++
			if oldest.IsZero() || p.CreationTimestamp.Time.Before(oldest) {
				oldest, waitPod = p.CreationTimestamp.Time, p
			}
		} else if p.Status.Phase == corev1.PodRunning {
			w.Running++
		}
		if c := disruption(p); c != nil {
			w.Evicting++
			if w.EvictingReason == "" {
				w.EvictingReason, w.EvictingMessage = c.Reason, c.Message
			}
		}
	}
	if n := len(b.gangs); n > first {
		w.Gangs = b.gangs[first:n:n]
	}
	w.Pods = len(b.live)
	w.GPUs, w.GPUAmount = cli.GPUSummary(b.live)
	w.State = workloadState(w, len(b.live), failed)
	if p := waitPod; p != nil {
		w.Waiting = true
		w.WaitSeconds = int64(max(b.now.Sub(oldest), 0) / time.Second)
		w.Reason, w.Message = cli.WaitReason(b.pgs[nsName{p.Namespace, p.Annotations[fairwayv1.PodGroupAnnotation]}], p)
		w.Hint = cli.Hint(w.Reason)
		if h := cli.BorrowHint(p); h != "" {
			w.Hint += " " + h
		}
	}
	// The gang's minimum is shown for a workload of one gang: only its PodGroup is looked up.
	if len(w.Gangs) == 1 {
		if pg := b.pgs[nsName{w.Namespace, w.Gangs[0]}]; pg != nil && pg.Spec.MinMember > 1 {
			w.MinMember = pg.Spec.MinMember
		}
	}
	slices.SortFunc(roles, func(x, y Role) int { return strings.Compare(x.Name, y.Name) })
	w.Roles = roles
	w.pods = pods
}

// workloadState is a workload's state from its counts: live pods (not ended) and failed ones.
func workloadState(w *Workload, live, failed int) string {
	switch {
	case w.Evicting > 0:
		return stateBeingEvicted
	case live == 0 && failed > 0:
		return stateFailed
	case live == 0:
		return stateSucceeded
	case w.Pending == live:
		return stateWaiting
	case w.Pending > 0:
		return statePartly
	}
	return stateRunning
}

// Members lists the workload's pods (the first maxMembersShown), live ones waiting first, then
// running, then ended. It is computed when a page shows the workload, not for every workload
// at every change.
func (w *Workload) Members() []Member {
	m, _ := members(w.pods, w.Kind)
	return m
}

// More counts the pods Members leaves out.
func (w *Workload) More() int { return max(len(w.pods)-maxMembersShown, 0) }

func members(pods []*corev1.Pod, kind string) ([]Member, int) {
	rank := func(p *corev1.Pod) int {
		switch {
		case cli.Terminated(p):
			return 2
		case p.Spec.NodeName == "":
			return 0
		}
		return 1
	}
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b *corev1.Pod) int { return rank(a) - rank(b) })
	n := min(len(sorted), maxMembersShown)
	out := make([]Member, 0, n)
	for _, p := range sorted[:n] {
		_, role := keyOf(p)
		m := Member{Name: p.Name, Role: role, Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
			OnLoan:  p.Spec.NodeName != "" && p.Annotations[fairwayv1.LoanAnnotation] == "true",
			Waiting: p.Spec.NodeName == "" && !cli.Terminated(p)}
		if kind == KindKFPRun || kind == KindWorkflow {
			m.Step = p.Annotations[fairwayv1.ArgoNodeNameAnnotation]
		}
		m.GPUs, _ = cli.GPUSummary([]*corev1.Pod{p})
		if m.Waiting {
			m.Reason, _ = cli.WaitReason(nil, p)
		}
		if c := disruption(p); c != nil {
			m.Evicting = c.Reason
		}
		out = append(out, m)
	}
	return out, len(sorted) - n
}

// disruption is the pod's DisruptionTarget condition while it is True, or nil.
func disruption(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
