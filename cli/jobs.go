package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// JobList is the output of `fairway jobs -o json|yaml`, sorted by namespace and name.
type JobList struct {
	Kind  string    `json:"kind"` // JobList
	Items []JobView `json:"items"`
}

// JobView is one gang: a PodGroup, or a fairway pod outside any PodGroup (a gang of one); or
// the replicas of a Deployment or a StatefulSet, each a gang of its own, as one workload.
type JobView struct {
	Kind      string `json:"kind"` // PodGroup, Pod, Deployment or StatefulSet
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Queue     string `json:"queue"`
	// PriorityClass and Priority (its value; absent when the class is unknown).
	PriorityClass string `json:"priorityClass,omitempty"`
	Priority      *int32 `json:"priority,omitempty"`
	// State is the PodGroup's phase (the pod's phase for a single pod; for replicas, Running
	// while one runs, else Pending while one waits).
	State string `json:"state"`
	// Reason is the engine's reason code while the gang (or a replica) waits.
	Reason string `json:"reason,omitempty"`
	// GPUs is what the gang's pods hold or ask: "8", "3×0.25", "2+4×0.5", "-".
	GPUs string `json:"gpus"`
	// GPUAmount is the same in GPUs (shares by memory count 0).
	GPUAmount float64 `json:"gpuAmount"`
	// Running is the number of running pods; MinMember the gang's minimum (1 for replicas).
	Running   int32 `json:"running"`
	MinMember int32 `json:"minMember"`
	// WaitSeconds is how long the gang has waited (pending) or waited before it started
	// (creation to lastStartTime); absent when unknown.
	WaitSeconds *int64 `json:"waitSeconds,omitempty"`
	// Framework is the pods' fairway.dev/framework label.
	Framework string `json:"framework,omitempty"`
	// WorkloadKind is the pods' kind of work (fairway.dev/workload-kind: inference, notebook,
	// training, ...), which decided their default priority and preemptibility.
	WorkloadKind string `json:"workloadKind,omitempty"`
	// OnLoan counts the running pods that run on loan on an idle notebook's GPU
	// (fairway.dev/loan): they are evicted as soon as the notebook does GPU work again.
	OnLoan int32 `json:"onLoan,omitempty"`
}

// onLoan counts the pods bound on loan.
func onLoan(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !terminated(p) && isLoan(p) {
			n++
		}
	}
	return n
}

// JobsSnapshot is what `fairway jobs` reads from the cluster.
type JobsSnapshot struct {
	PodGroups       []fairwayv1.PodGroup
	Pods            []corev1.Pod
	PriorityClasses []schedulingv1.PriorityClass
}

func (o *Options) loadJobs(ctx context.Context) (*JobsSnapshot, error) {
	s := &JobsSnapshot{}
	var pgs fairwayv1.PodGroupList
	if err := o.list(ctx, &pgs, "PodGroups", client.InNamespace(o.ListNamespace())); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := o.list(ctx, &pods, "pods", client.InNamespace(o.ListNamespace())); err != nil {
		return nil, err
	}
	var pcs schedulingv1.PriorityClassList
	if err := o.Client.List(ctx, &pcs); err != nil {
		// Priority values are a nicety: without the right to read PriorityClasses, show classes.
		pcs.Items = nil
	}
	s.PodGroups, s.Pods, s.PriorityClasses = pgs.Items, pods.Items, pcs.Items
	return s, nil
}

// RunJobs prints the gangs.
func RunJobs(ctx context.Context, o *Options) error {
	s, err := o.loadJobs(ctx)
	if err != nil {
		return err
	}
	view := BuildJobs(s, o.Now())
	if ok, err := o.printStructured(view); ok {
		return err
	}
	if len(view.Items) == 0 {
		if o.AllNamespaces {
			_, err := fmt.Fprintln(o.Out, "No fairway jobs in any namespace.")
			return err
		}
		msg := fmt.Sprintf("No fairway jobs in namespace %s.", o.ListNamespace())
		if others, first := o.jobsElsewhere(ctx, o.ListNamespace()); others != "" {
			msg += fmt.Sprintf(" Jobs by namespace: %s. `fairway jobs -A` lists them all, `fairway jobs -n %s` one namespace's.", others, first)
		} else {
			msg += " `fairway jobs -A` lists every namespace's."
		}
		_, err := fmt.Fprintln(o.Out, msg)
		return err
	}
	return PrintJobs(o.Out, view, o.AllNamespaces)
}

// BuildJobs makes one row per PodGroup and per fairway pod outside any PodGroup, but the replicas
// of a Deployment or a StatefulSet, which make one row named after it.
func BuildJobs(s *JobsSnapshot, now time.Time) JobList {
	prio := map[string]int32{}
	for _, pc := range s.PriorityClasses {
		prio[pc.Name] = pc.Value
	}
	members := map[[2]string][]*corev1.Pod{}
	replicas := map[replicaSet][]*corev1.Pod{}
	// replicaGroups are the PodGroups of replicas: the webhook names one per pod, which means
	// nothing to the workload's user, and they are listed under the workload instead.
	replicaGroups := map[[2]string]bool{}
	var singles []*corev1.Pod
	for i := range s.Pods {
		p := &s.Pods[i]
		if !isFairwayPod(p) {
			continue
		}
		g := p.Annotations[fairwayv1.PodGroupAnnotation]
		switch w, ok := replicaOf(p); {
		case ok:
			k := replicaSet{p.Namespace, w}
			replicas[k] = append(replicas[k], p)
			if g != "" {
				replicaGroups[[2]string{p.Namespace, g}] = true
			}
		case g != "":
			k := [2]string{p.Namespace, g}
			members[k] = append(members[k], p)
		default:
			singles = append(singles, p)
		}
	}
	out := JobList{Kind: "JobList", Items: []JobView{}}
	for i := range s.PodGroups {
		pg := &s.PodGroups[i]
		k := [2]string{pg.Namespace, pg.Name}
		if replicaGroups[k] && len(members[k]) == 0 {
			continue
		}
		out.Items = append(out.Items, podGroupJob(pg, members[k], prio, now))
	}
	for _, p := range singles {
		out.Items = append(out.Items, podJob(p, prio, now))
	}
	for k, pods := range replicas {
		out.Items = append(out.Items, replicasJob(k, pods, prio, now))
	}
	slices.SortFunc(out.Items, func(a, b JobView) int {
		return cmp.Or(compareNamespaced(a.Namespace, a.Name, b.Namespace, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	return out
}

// replicaSet names a Deployment or a StatefulSet; not to be confused with the ReplicaSet kind.
type replicaSet struct {
	namespace string
	workload  fairwayv1.Workload
}

// replicaOf returns the Deployment or StatefulSet whose replica the pod is, when the pod is a
// gang of its own (a workload whose replicas form gangs of several pods lists its gangs).
func replicaOf(p *corev1.Pod) (fairwayv1.Workload, bool) {
	if n, _, err := fairwayv1.MinMemberOf(p.Annotations); err != nil || n > 1 {
		return fairwayv1.Workload{}, false
	}
	w := fairwayv1.WorkloadOf(p)
	return w, w.Kind == "Deployment" || w.Kind == "StatefulSet"
}

// replicasJob is the row of a Deployment's or a StatefulSet's replicas: Running while one runs,
// else Pending while one waits, with the reason of the first that waits; what the live replicas
// hold or ask; the wait of the oldest that waits, else the scheduling wait of the last started.
func replicasJob(k replicaSet, pods []*corev1.Pod, prio map[string]int32, now time.Time) JobView {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	live := slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return terminated(p) || p.DeletionTimestamp != nil })
	if len(live) == 0 {
		live = pods
	}
	first := live[0]
	j := JobView{Kind: k.workload.Kind, Namespace: k.namespace, Name: k.workload.Name, Queue: queueOf(first),
		PriorityClass: first.Spec.PriorityClassName, Priority: first.Spec.Priority, State: string(first.Status.Phase), MinMember: 1}
	if v, ok := prio[j.PriorityClass]; ok {
		j.Priority = &v
	}
	var lastStart time.Time
	for _, p := range live {
		if j.Framework == "" {
			j.Framework = p.Labels[fairwayv1.FrameworkLabel]
		}
		if j.WorkloadKind == "" {
			j.WorkloadKind = p.Annotations[fairwayv1.WorkloadKindAnnotation]
		}
		switch {
		case p.Status.Phase == corev1.PodRunning:
			j.Running++
		case p.Spec.NodeName == "" && j.Reason == "":
			j.Reason, _ = podReason(p)
		}
		if c := podCondition(p, corev1.PodScheduled); p.Spec.NodeName != "" && c != nil && c.Status == corev1.ConditionTrue &&
			c.LastTransitionTime.After(lastStart) {
			lastStart = c.LastTransitionTime.Time
			j.WaitSeconds = seconds(lastStart.Sub(p.CreationTimestamp.Time))
		}
	}
	switch since, waits := oldestWaiting(live); {
	case j.Running > 0:
		j.State = string(corev1.PodRunning)
		if waits {
			j.WaitSeconds = seconds(now.Sub(since))
		}
	case waits:
		j.State = string(corev1.PodPending)
		j.WaitSeconds = seconds(now.Sub(since))
	}
	j.GPUs, j.GPUAmount = gpuSummary(live)
	j.OnLoan = onLoan(live)
	return j
}

func podGroupJob(pg *fairwayv1.PodGroup, pods []*corev1.Pod, prio map[string]int32, now time.Time) JobView {
	j := JobView{Kind: "PodGroup", Namespace: pg.Namespace, Name: pg.Name, Queue: pg.Spec.Queue,
		PriorityClass: pg.Spec.PriorityClassName, State: string(pg.Status.Phase),
		Running: pg.Status.Running, MinMember: pg.Spec.MinMember}
	if j.State == "" {
		j.State = string(fairwayv1.PodGroupPending)
	}
	if v, ok := prio[j.PriorityClass]; ok {
		j.Priority = &v
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable); c != nil && c.Status == metav1.ConditionTrue {
		j.Reason = c.Reason
	}
	j.GPUs, j.GPUAmount = gpuSummary(pods)
	j.OnLoan = onLoan(pods)
	for _, p := range pods {
		if f := p.Labels[fairwayv1.FrameworkLabel]; f != "" {
			j.Framework = f
			break
		}
	}
	for _, p := range pods {
		if k := p.Annotations[fairwayv1.WorkloadKindAnnotation]; k != "" {
			j.WorkloadKind = k
			break
		}
	}
	if j.Queue == "" && len(pods) > 0 {
		j.Queue = queueOf(pods[0])
	}
	switch {
	case gangWaits(pg):
		// From the creation of the oldest pod that waits (the PodGroup may be younger, and a gang
		// that ran before waits again from its recreated pods' creation, not from its first start).
		since := pg.CreationTimestamp.Time
		if c, ok := oldestWaiting(pods); ok {
			since = c
		}
		j.WaitSeconds = seconds(now.Sub(since))
	case pg.Status.LastStartTime != nil:
		j.WaitSeconds = seconds(pg.Status.LastStartTime.Sub(pg.CreationTimestamp.Time))
	}
	return j
}

// gangWaits reports whether the PodGroup's gang waits to be scheduled: it is Pending, or the
// scheduler says it is unschedulable (a running gang whose evicted pods wait to come back).
func gangWaits(pg *fairwayv1.PodGroup) bool {
	return pg.Status.Phase == "" || pg.Status.Phase == fairwayv1.PodGroupPending || unschedulable(pg) != nil
}

// oldestWaiting is the creation time of the oldest pod that waits for a node: how long a gang
// has waited is measured from it.
func oldestWaiting(pods []*corev1.Pod) (time.Time, bool) {
	var oldest time.Time
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminated(p) {
			continue
		}
		if c := p.CreationTimestamp.Time; oldest.IsZero() || c.Before(oldest) {
			oldest = c
		}
	}
	return oldest, !oldest.IsZero()
}

func podJob(p *corev1.Pod, prio map[string]int32, now time.Time) JobView {
	j := JobView{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Queue: queueOf(p),
		PriorityClass: p.Spec.PriorityClassName, State: string(p.Status.Phase), MinMember: 1,
		Framework: p.Labels[fairwayv1.FrameworkLabel], WorkloadKind: p.Annotations[fairwayv1.WorkloadKindAnnotation], Priority: p.Spec.Priority}
	if v, ok := prio[j.PriorityClass]; ok {
		j.Priority = &v
	}
	if p.Status.Phase == corev1.PodRunning {
		j.Running = 1
	}
	j.GPUs, j.GPUAmount = gpuSummary([]*corev1.Pod{p})
	j.OnLoan = onLoan([]*corev1.Pod{p})
	code, _ := podReason(p)
	j.Reason = code
	if p.Spec.NodeName == "" {
		j.WaitSeconds = seconds(now.Sub(p.CreationTimestamp.Time))
	} else if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
		j.WaitSeconds = seconds(c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
	}
	return j
}

func seconds(d time.Duration) *int64 {
	s := int64(max(d, 0) / time.Second)
	return &s
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podReason reads the scheduler's code and message from a waiting pod's PodScheduled condition
// (fairwayv1.PodScheduledMessage); for a message in another format (kube-scheduler's) it returns
// the condition's own reason and message.
func podReason(p *corev1.Pod) (code, message string) {
	c := podCondition(p, corev1.PodScheduled)
	if c == nil || c.Status != corev1.ConditionFalse {
		return "", ""
	}
	r, message, ok := fairwayv1.ParsePodScheduledMessage(c.Message)
	if !ok {
		return c.Reason, c.Message
	}
	return string(r), message
}

// PrintJobs writes the jobs as a table. Pods on loan on an idle notebook's GPU are marked in
// the state column.
func PrintJobs(w io.Writer, v JobList, withNamespace bool) error {
	headers := []string{"NAME", "QUEUE", "KIND", "PRIORITY", "STATE", "REASON", "GPUS", "RUNNING", "WAIT", "FRAMEWORK"}
	if withNamespace {
		headers = append([]string{"NAMESPACE"}, headers...)
	}
	t := newTable(w, headers...)
	for _, j := range v.Items {
		name := j.Name
		if j.Kind != "PodGroup" {
			name = strings.ToLower(j.Kind) + "/" + j.Name // pod/debug, deployment/serve
		}
		prio := j.PriorityClass
		if j.Priority != nil {
			if prio == "" {
				prio = fmt.Sprint(*j.Priority)
			} else {
				prio = fmt.Sprintf("%s (%d)", prio, *j.Priority)
			}
		}
		wait := ""
		if j.WaitSeconds != nil {
			wait = age(time.Duration(*j.WaitSeconds) * time.Second)
		}
		state := j.State
		switch {
		case j.OnLoan == 0:
		case j.Kind == "Pod":
			state += " (on loan)"
		default:
			state += fmt.Sprintf(" (%d on loan)", j.OnLoan)
		}
		cells := []string{name, j.Queue, j.WorkloadKind, prio, state, j.Reason, j.GPUs, runningCell(j.Running, j.MinMember), wait, j.Framework}
		if withNamespace {
			cells = append([]string{j.Namespace}, cells...)
		}
		t.row(cells...)
	}
	return t.flush()
}

// runningCell is the RUNNING column: the pods running, and the gang's minimum when it has one
// above a single pod ("29 (min 25)"; "29/25" read as a fraction, or as 29 of 25 asked for).
func runningCell(running, minMember int32) string {
	if minMember <= 1 {
		return strconv.Itoa(int(running))
	}
	return fmt.Sprintf("%d (min %d)", running, minMember)
}
