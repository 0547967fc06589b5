package view

import (
	"cmp"
	"slices"
	"strings"
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
	key  groupKey
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

// buildWorkloads groups fairway's pods into workloads.
func buildWorkloads(s *Snapshot) []Workload {
	pgs := map[[2]string]*fairwayv1.PodGroup{}
	for i := range s.PodGroups {
		pg := &s.PodGroups[i]
		pgs[[2]string{pg.Namespace, pg.Name}] = pg
	}
	type acc struct {
		w       *Workload
		pods    []*corev1.Pod
		roles   map[string]*Role
		waitPod *corev1.Pod
	}
	groups := map[groupKey]*acc{}
	var order []groupKey
	for i := range s.Pods {
		p := &s.Pods[i]
		if !cli.IsFairwayPod(p) {
			continue
		}
		k, role := keyOf(p)
		a := groups[k]
		if a == nil {
			a = &acc{w: &Workload{Kind: k.kind, Namespace: k.namespace, Name: k.name, Controller: k.controller}, roles: map[string]*Role{}}
			groups[k] = a
			order = append(order, k)
		}
		a.pods = append(a.pods, p)
		if role != "" {
			r := a.roles[role]
			if r == nil {
				r = &Role{Name: role}
				a.roles[role] = r
			}
			switch {
			case cli.Terminated(p):
				r.Finished++
			case p.Spec.NodeName == "":
				r.Waiting++
			default:
				r.Running++
			}
		}
	}
	// By namespace, kind and name; sorted as keys, not as the (large) workloads.
	slices.SortFunc(order, func(a, b groupKey) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.kind, b.kind), strings.Compare(a.name, b.name),
			strings.Compare(a.controller, b.controller))
	})
	out := make([]Workload, 0, len(order))
	for _, k := range order {
		a := groups[k]
		w := a.w
		slices.SortFunc(a.pods, func(x, y *corev1.Pod) int {
			return strings.Compare(x.Name, y.Name)
		})
		var live []*corev1.Pod
		failed, gangs := 0, map[string]bool{}
		oldest := time.Time{}
		for _, p := range a.pods {
			if w.Queue == "" {
				_, w.Queue, _ = fairwayv1.QueueOf(p.Labels)
			}
			if g := p.Annotations[fairwayv1.PodGroupAnnotation]; g != "" && !gangs[g] {
				gangs[g] = true
				w.Gangs = append(w.Gangs, g)
				if pg := pgs[[2]string{p.Namespace, g}]; pg != nil && pg.Spec.MinMember > w.MinMember {
					w.MinMember = pg.Spec.MinMember
				}
			}
			if cli.Terminated(p) {
				if p.Status.Phase == corev1.PodFailed {
					failed++
				}
				continue
			}
			live = append(live, p)
			if p.Spec.NodeName == "" {
				w.Pending++
				if oldest.IsZero() || p.CreationTimestamp.Time.Before(oldest) {
					oldest, a.waitPod = p.CreationTimestamp.Time, p
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
		w.Pods = len(live)
		w.GPUs, w.GPUAmount = cli.GPUSummary(live)
		w.State = workloadState(w, len(live), failed)
		if p := a.waitPod; p != nil {
			w.Waiting = true
			w.WaitSeconds = int64(max(s.Now.Sub(oldest), 0) / time.Second)
			w.Reason, w.Message = cli.WaitReason(pgs[[2]string{p.Namespace, p.Annotations[fairwayv1.PodGroupAnnotation]}], p)
			w.Hint = cli.Hint(w.Reason)
			if b := cli.BorrowHint(p); b != "" {
				w.Hint += " " + b
			}
		}
		if w.MinMember <= 1 || len(w.Gangs) != 1 {
			w.MinMember = 0
		}
		for _, r := range a.roles {
			w.Roles = append(w.Roles, *r)
		}
		slices.SortFunc(w.Roles, func(x, y Role) int { return strings.Compare(x.Name, y.Name) })
		w.pods, w.key = a.pods, k
		out = append(out, *w)
	}
	return out
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
	m, _ := members(w.pods, w.key)
	return m
}

// More counts the pods Members leaves out.
func (w *Workload) More() int { return max(len(w.pods)-maxMembersShown, 0) }

func members(pods []*corev1.Pod, k groupKey) ([]Member, int) {
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
		if k.kind == KindKFPRun || k.kind == KindWorkflow {
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
