package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// WhyView is the output of `fairway why -o json|yaml`.
type WhyView struct {
	Kind string `json:"kind"` // Why
	// Object is what was asked about.
	Object ObjectRef `json:"object"`
	// PodGroup is the gang of a pod that belongs to one.
	PodGroup      string `json:"podGroup,omitempty"`
	Queue         string `json:"queue,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
	Priority      *int32 `json:"priority,omitempty"`
	// State is the PodGroup's or the pod's phase.
	State string `json:"state"`
	// Waiting is true while the gang (or pod) waits to be scheduled.
	Waiting     bool   `json:"waiting"`
	WaitSeconds *int64 `json:"waitSeconds,omitempty"`
	// Reason and Message are the engine's code and explanation; Hint says what would unblock it.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Hint    string `json:"hint,omitempty"`
	// Running pods of the gang, and its minimum.
	Running   int32 `json:"running"`
	MinMember int32 `json:"minMember"`
	// Pods are where the gang's (or the pod's) bound pods run.
	Pods []PlacementView `json:"pods"`
	// NoGPU says that the pod asked about asks for no GPU although its queue has GPU quota, and
	// names the misspelt GPU-share keys it carries: a newcomer whose notebook runs without the
	// GPU it "asked for" sees only Running otherwise.
	NoGPU string `json:"noGPU,omitempty"`
	// LastEviction is the newest of fairway's evictions of the pod asked about, or of the gang's
	// pods (by name: a recreated pod's earlier self counts), read from the events on them; nil
	// when none is known (events expire, an hour by default).
	LastEviction *EvictionView `json:"lastEviction,omitempty"`
	// Competing are the pending pods of other schedulers that ask for GPUs, per scheduler, while
	// the gang (or pod) waits for GPUs: fairway does not place them, and capacity it does not
	// hold for a gang goes to whichever scheduler binds first (docs/coexistence.md).
	Competing []CompetingView `json:"competing,omitempty"`
}

// EvictionView is one of fairway's evictions of a pod: when, why, and for whom.
type EvictionView struct {
	// Pod is the evicted pod's name.
	Pod string `json:"pod"`
	// Reason is the eviction's reason (v1alpha1.EvictionReason: Reclaim, Preempt, ...).
	Reason string `json:"reason"`
	// By is what the eviction made room for (the event's related object), when it had one.
	By *ObjectRef `json:"by,omitempty"`
	// Message is the scheduler's note: why, naming who it made room for.
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
	// AgoSeconds is how long before the command the eviction was.
	AgoSeconds int64 `json:"agoSeconds"`
	// ReplacedBy is set when Pod is not the pod asked about (or a member of the gang) but an
	// earlier pod of the same controller, gone, that this pod (a gang's member) replaced: a
	// Deployment's evicted replica, whose new replica has another name.
	ReplacedBy string `json:"replacedBy,omitempty"`
}

// CompetingView counts one other scheduler's pending pods that ask for GPUs.
type CompetingView struct {
	Scheduler string `json:"scheduler"`
	Pods      int    `json:"pods"`
	GPUs      int64  `json:"gpus"`
}

// ObjectRef names a PodGroup or a Pod.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// PlacementView is one pod and where it runs.
type PlacementView struct {
	Name  string `json:"name"`
	Phase string `json:"phase"`
	Node  string `json:"node,omitempty"`
	// GPUs is the number of whole GPUs.
	GPUs int64 `json:"gpus,omitempty"`
	// Share, GPUIndex and GPUUUID describe a fractional pod's GPU.
	Share    string `json:"share,omitempty"`
	GPUIndex *int32 `json:"gpuIndex,omitempty"`
	GPUUUID  string `json:"gpuUUID,omitempty"`
	// SharedWith lists the other pods on that GPU ("namespace/name=share", marked "(on loan)"
	// for a pod on loan).
	SharedWith []string `json:"sharedWith,omitempty"`
	// OnLoan is true for a pod on loan on the GPU of idle notebooks (fairway.dev/loan): it is
	// evicted, with a short grace period, as soon as one of them does GPU work again.
	OnLoan bool `json:"onLoan,omitempty"`
	// Evicting is the reason of the pod's DisruptionTarget condition while it is being evicted
	// (FairwayReclaim, FairwayPreempt, ...), and EvictingMessage its message.
	Evicting        string `json:"evicting,omitempty"`
	EvictingMessage string `json:"evictingMessage,omitempty"`
	// NotRecreated is true for a pod being evicted that nothing recreates
	// (v1alpha1.PodRecreatable): it will not come back.
	NotRecreated bool `json:"notRecreated,omitempty"`
}

// RunWhy explains one PodGroup, pod or Workflow. arg is NAME, pod/NAME, podgroup/NAME, pg/NAME
// or workflow/NAME.
func RunWhy(ctx context.Context, o *Options, arg string) error {
	kind, name, err := parseTarget(arg)
	if err != nil {
		return err
	}
	if kind == "workflow" {
		return runWhyWorkflow(ctx, o, name)
	}
	ns := o.namespace
	var pg *fairwayv1.PodGroup
	var pod *corev1.Pod
	if kind != "pod" {
		pg = &fairwayv1.PodGroup{}
		if err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil {
			if apierrors.IsNotFound(err) && kind == "podgroup" {
				return fmt.Errorf("no PodGroup named %s in namespace %s (%w); %s", name, ns, errNotFound, o.elsewhereHint(ctx, name, arg, "PodGroup"))
			}
			if !apierrors.IsNotFound(err) {
				return getError(err, "PodGroup", ns, name)
			}
			pg = nil
		}
	}
	if pg == nil {
		pod = &corev1.Pod{}
		if err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				what, kinds := "pod", []string{"pod"}
				if kind == "" {
					what, kinds = "PodGroup or pod", []string{"PodGroup", "pod"}
				}
				return fmt.Errorf("no %s named %s in namespace %s (%w); %s", what, name, ns, errNotFound, o.elsewhereHint(ctx, name, arg, kinds...))
			}
			return getError(err, "pod", ns, name)
		}
		if g := pod.Annotations[fairwayv1.PodGroupAnnotation]; g != "" {
			pg = &fairwayv1.PodGroup{}
			if err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: g}, pg); err != nil {
				if !apierrors.IsNotFound(err) {
					return getError(err, "PodGroup", ns, g)
				}
				pg = nil // the scheduler has not created it yet
			}
		}
	}
	var pods corev1.PodList
	if err := o.list(ctx, &pods, "pods", client.InNamespace(ns)); err != nil {
		return err
	}
	var pcs schedulingv1.PriorityClassList
	_ = o.Client.List(ctx, &pcs) // optional, as in `fairway jobs`
	s := &WhySnapshot{Pod: pod, PodGroup: pg, Pods: pods.Items, PriorityClasses: pcs.Items, Nodes: map[string]*corev1.Node{}, NodePods: map[string][]corev1.Pod{}}
	queue := ""
	switch {
	case pod != nil:
		queue = queueOf(pod)
	case pg != nil:
		queue = pg.Spec.Queue
	}
	if queue != "" {
		// Optional: only to say that GPU-less pods' queue has GPUs.
		q := &fairwayv1.Queue{}
		if err := o.Client.Get(ctx, client.ObjectKey{Name: queue}, q); err == nil {
			s.Queue = q
		}
	}
	// Optional too: a user who may not list pods cluster-wide does not see the competition.
	var foreign corev1.PodList
	if err := o.Client.List(ctx, &foreign, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
		fields.OneTermNotEqualSelector("spec.schedulerName", fairwayv1.SchedulerName),
		fields.OneTermEqualSelector("spec.nodeName", ""),
		fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)))}); err == nil {
		s.ForeignPending = foreign.Items
	}
	for _, p := range s.members() {
		if p.Spec.NodeName == "" || s.Nodes[p.Spec.NodeName] != nil {
			continue
		}
		var n corev1.Node
		if err := o.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err == nil {
			s.Nodes[n.Name] = &n
		}
		if gpuOf(p).shared() {
			var on corev1.PodList
			if err := o.Client.List(ctx, &on, client.MatchingFields{"spec.nodeName": p.Spec.NodeName}); err == nil {
				s.NodePods[p.Spec.NodeName] = on.Items
			}
		}
	}
	// Optional too: without the right to list events, no last eviction.
	var evs eventsv1.EventList
	if err := o.Client.List(ctx, &evs, client.InNamespace(ns)); err == nil {
		s.Events = evs.Items
	}
	view := BuildWhy(s, o.Now())
	if ok, err := o.printStructured(view); ok {
		return err
	}
	return PrintWhy(o.Out, view)
}

func parseTarget(arg string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return "", arg, nil
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		return "pod", name, nil
	case "podgroup", "podgroups", "pg", "fpg":
		return "podgroup", name, nil
	case "workflow", "workflows", "wf":
		return "workflow", name, nil
	}
	return "", "", fmt.Errorf("cannot explain %q: name a pod (pod/NAME), a PodGroup (podgroup/NAME) or an Argo Workflow (workflow/NAME)", arg)
}

func getError(err error, kind, ns, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no %s named %s in namespace %s (%w); `fairway jobs -n %s` lists the jobs", kind, name, ns, errNotFound, ns)
	}
	if meta.IsNoMatchError(err) {
		return apiError(err, kind+"s")
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
}

// WhySnapshot is what `fairway why` reads.
type WhySnapshot struct {
	// Pod is the pod asked about (nil when a PodGroup was named).
	Pod *corev1.Pod
	// PodGroup is the PodGroup asked about, or the pod's.
	PodGroup        *fairwayv1.PodGroup
	Pods            []corev1.Pod // of the namespace
	PriorityClasses []schedulingv1.PriorityClass
	Nodes           map[string]*corev1.Node
	// NodePods are the pods of the nodes where fractional members run.
	NodePods map[string][]corev1.Pod
	// ForeignPending are the pending pods of other schedulers (any namespace).
	ForeignPending []corev1.Pod
	// Queue is the queue of the pod asked about, nil when it could not be read.
	Queue *fairwayv1.Queue
	// Events are the namespace's events (those of fairway's evictions are read).
	Events []eventsv1.Event
}

// members are the pods explained: the pod asked about, or the PodGroup's pods.
func (s *WhySnapshot) members() []*corev1.Pod {
	if s.Pod != nil {
		return []*corev1.Pod{s.Pod}
	}
	var out []*corev1.Pod
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Annotations[fairwayv1.PodGroupAnnotation] == s.PodGroup.Name {
			out = append(out, p)
		}
	}
	return out
}

// BuildWhy explains the snapshot's object.
func BuildWhy(s *WhySnapshot, now time.Time) WhyView {
	prio := map[string]int32{}
	for _, pc := range s.PriorityClasses {
		prio[pc.Name] = pc.Value
	}
	var v WhyView
	switch {
	case s.Pod != nil:
		j := podJob(s.Pod, prio, now)
		v = WhyView{Object: ObjectRef{Kind: "Pod", Namespace: s.Pod.Namespace, Name: s.Pod.Name}, Queue: j.Queue,
			PriorityClass: j.PriorityClass, Priority: j.Priority, State: j.State, Running: j.Running, MinMember: 1,
			WaitSeconds: j.WaitSeconds, Waiting: s.Pod.Spec.NodeName == "" && !terminated(s.Pod)}
		v.Reason, v.Message = podReason(s.Pod)
		if s.PodGroup != nil {
			v.PodGroup = s.PodGroup.Name
			g := podGroupJob(s.PodGroup, s.members(), prio, now)
			v.MinMember, v.Running = g.MinMember, g.Running
			if !v.Waiting {
				// A waiting pod's wait stays its own, from its creation: the gang's may count from
				// an older pod, or end at a start this pod (recreated since) never had.
				v.WaitSeconds = g.WaitSeconds
			}
			if c := unschedulable(s.PodGroup); c != nil && v.Waiting {
				v.Reason, v.Message = c.Reason, c.Message
			}
		}
		if s.Pod.Spec.SchedulerName != fairwayv1.SchedulerName {
			v.Message = fmt.Sprintf("the pod's schedulerName is %q, not %q: fairway does not schedule it (its webhook did not take it; check the namespace's and the pod's %s label)",
				s.Pod.Spec.SchedulerName, fairwayv1.SchedulerName, fairwayv1.IgnoreLabel)
		}
	default:
		pods := s.members()
		j := podGroupJob(s.PodGroup, pods, prio, now)
		v = WhyView{Object: ObjectRef{Kind: "PodGroup", Namespace: s.PodGroup.Namespace, Name: s.PodGroup.Name},
			Queue: j.Queue, PriorityClass: j.PriorityClass, Priority: j.Priority, State: j.State, Running: j.Running,
			MinMember: j.MinMember, WaitSeconds: j.WaitSeconds}
		v.Waiting = gangWaits(s.PodGroup)
		if c := unschedulable(s.PodGroup); c != nil {
			v.Reason, v.Message = c.Reason, c.Message
		}
	}
	v.Kind = "Why"
	v.NoGPU = noGPU(s.members(), s.Queue)
	if v.Waiting {
		v.Hint = hintFor(v.Reason)
		if slices.ContainsFunc(s.members(), asksToBorrow) {
			v.Hint += " " + borrowHint
		}
		if v.Reason == "" {
			v.Hint = "The scheduler has not given a reason yet: it writes one within seconds of a cycle. If none comes, " +
				"check that `fairway scheduler` runs (its leader logs every cycle) and that the pods' schedulerName is fairway."
		}
	}
	v.LastEviction = lastEviction(s.Events, s.members(), s.Pods, now)
	v.Pods = []PlacementView{}
	for _, p := range s.members() {
		v.Pods = append(v.Pods, placement(p, s))
	}
	if v.Waiting && slices.ContainsFunc(s.members(), func(p *corev1.Pod) bool { g := gpuOf(p); return g.Whole > 0 || g.shared() }) {
		v.Competing = competing(s.ForeignPending)
	}
	return v
}

// lastEviction is the newest event of one of fairway's evictions (by its reason,
// v1alpha1.EvictionReason) on a pod named as one of pods, or on an earlier pod that one of them
// replaced (replaced); nil when there is none.
func lastEviction(events []eventsv1.Event, pods []*corev1.Pod, namespacePods []corev1.Pod, now time.Time) *EvictionView {
	var last *EvictionView
	for i := range events {
		ev := &events[i]
		if ev.Regarding.Kind != "Pod" || !fairwayv1.EvictionReason(ev.Reason).Known() {
			continue
		}
		at := EventTime(ev)
		same := slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.Name == ev.Regarding.Name && p.Namespace == ev.Regarding.Namespace })
		by := ""
		if !same {
			if i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return replaced(p, ev, at, namespacePods) }); i >= 0 {
				by = pods[i].Name
			}
		}
		if !same && by == "" {
			continue
		}
		if last != nil && !at.After(last.Time.Time) {
			continue
		}
		last = &EvictionView{Pod: ev.Regarding.Name, Reason: ev.Reason, Message: ev.Note, Time: metav1.NewTime(at), AgoSeconds: *seconds(now.Sub(at)), ReplacedBy: by}
		if r := ev.Related; r != nil && r.Name != "" {
			last.By = &ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		}
	}
	return last
}

// replaced reports whether p may be the replacement of the pod an eviction event (at at) is
// about: a pod its controller made under the same generated-name prefix (a Deployment's
// replica, a Ray worker), gone now, evicted before p was created. Without this, `fairway why`
// on a Deployment's new replica, the pod a user finds, said nothing of the eviction that made it.
func replaced(p *corev1.Pod, ev *eventsv1.Event, at time.Time, namespacePods []corev1.Pod) bool {
	if p.GenerateName == "" || ev.Regarding.Namespace != p.Namespace || !strings.HasPrefix(ev.Regarding.Name, p.GenerateName) ||
		at.After(p.CreationTimestamp.Time) {
		return false
	}
	return !slices.ContainsFunc(namespacePods, func(o corev1.Pod) bool { return o.Name == ev.Regarding.Name })
}

// EventTime is when an event last happened: its series' last observation, else its time,
// else the deprecated timestamp, else its creation (the console reads events the same way).
func EventTime(ev *eventsv1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

// noGPU explains pods (the pod asked about, or a gang's) that ask for no GPU in a queue that has
// GPU quota: what it would take to ask for one, and the misspelt GPU keys they carry
// (v1alpha1.PodKeyProblems). "" when a pod asks for GPUs, or when the queue has none to give (a
// CPU queue's pods need no note).
func noGPU(pods []*corev1.Pod, q *fairwayv1.Queue) string {
	if len(pods) == 0 || q == nil || !hasGPUQuota(&q.Spec) {
		return ""
	}
	var typos []string
	for _, p := range pods {
		if g := gpuOf(p); g.Whole > 0 || g.shared() || len(p.Spec.ResourceClaims) > 0 {
			return ""
		}
		for _, k := range fairwayv1.PodKeyProblems(p.Labels, p.Annotations) {
			if slices.Contains(fairwayv1.GPUShareKeys, k.Meant) && !slices.Contains(typos, k.Message) {
				typos = append(typos, k.Message)
			}
		}
	}
	who, has := "the pod asks", "it has"
	if len(pods) > 1 {
		who, has = fmt.Sprintf("the gang's %d pods ask", len(pods)), "they have"
	}
	msg := fmt.Sprintf("%s for no GPU, though queue %s has GPUs: %s no %s limit, no %s or %s annotation and no resource claim",
		who, q.Name, has, fairwayv1.ResourceGPU, fairwayv1.GPUFractionAnnotation, fairwayv1.GPUMemoryAnnotation)
	for _, t := range typos {
		msg += "; " + t
	}
	return msg
}

// hasGPUQuota reports whether a queue is given GPUs: a GPU quota or limit, or GPU types.
func hasGPUQuota(spec *fairwayv1.QueueSpec) bool {
	if len(spec.GPUTypes) > 0 {
		return true
	}
	gpu := spec.Resources.GPU
	return gpu != nil && ((gpu.Quota != nil && gpu.Quota.Sign() > 0) || (gpu.Limit != nil && gpu.Limit.Sign() > 0))
}

// competing counts the pending pods of other schedulers that ask for GPUs, per scheduler.
func competing(pods []corev1.Pod) []CompetingView {
	var out []CompetingView
	for i := range pods {
		p := &pods[i]
		if p.Spec.SchedulerName == fairwayv1.SchedulerName || p.Spec.NodeName != "" || terminated(p) {
			continue
		}
		n := gpuOf(p).Whole
		if n <= 0 {
			continue
		}
		j := slices.IndexFunc(out, func(c CompetingView) bool { return c.Scheduler == p.Spec.SchedulerName })
		if j < 0 {
			j = len(out)
			out = append(out, CompetingView{Scheduler: p.Spec.SchedulerName})
		}
		out[j].Pods++
		out[j].GPUs += n
	}
	slices.SortFunc(out, func(a, b CompetingView) int { return strings.Compare(a.Scheduler, b.Scheduler) })
	return out
}

func unschedulable(pg *fairwayv1.PodGroup) *metav1.Condition {
	c := meta.FindStatusCondition(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

func placement(p *corev1.Pod, s *WhySnapshot) PlacementView {
	g := gpuOf(p)
	pv := PlacementView{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName, GPUs: g.Whole, Share: g.share(), GPUUUID: g.UUID,
		OnLoan: p.Spec.NodeName != "" && isLoan(p)}
	if c := disruption(p); c != nil {
		pv.Evicting, pv.EvictingMessage = c.Reason, c.Message
		pv.NotRecreated = !fairwayv1.PodRecreatable(p)
	}
	if !g.shared() || p.Spec.NodeName == "" {
		return pv
	}
	if n := s.Nodes[p.Spec.NodeName]; n != nil && g.UUID != "" {
		if inv := inventoryOf(n); inv != nil {
			for _, d := range inv.GPUs {
				if d.UUID == g.UUID {
					idx := d.Index
					pv.GPUIndex = &idx
				}
			}
		}
	}
	for i := range s.NodePods[p.Spec.NodeName] {
		o := &s.NodePods[p.Spec.NodeName][i]
		og := gpuOf(o)
		if (o.Namespace == p.Namespace && o.Name == p.Name) || isReservation(o) || terminated(o) || !og.shared() {
			continue
		}
		if (g.UUID != "" && og.UUID == g.UUID) || (g.UUID == "" && og.Slot == g.Slot) {
			with := fmt.Sprintf("%s/%s=%s", o.Namespace, o.Name, og.share())
			if isLoan(o) {
				with += " (on loan)"
			}
			pv.SharedWith = append(pv.SharedWith, with)
		}
	}
	return pv
}

// PrintWhy writes the explanation for a person.
func PrintWhy(w io.Writer, v WhyView) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s%s\n", label+":", fmt.Sprintf(format, args...))
	}
	who := fmt.Sprintf("%s/%s", v.Object.Namespace, v.Object.Name)
	var meta []string
	if v.Queue != "" {
		meta = append(meta, "queue "+v.Queue)
	}
	if v.PriorityClass != "" || v.Priority != nil {
		p := v.PriorityClass
		if v.Priority != nil {
			p = strings.TrimSpace(fmt.Sprintf("%s (%d)", p, *v.Priority))
		}
		meta = append(meta, "priority "+p)
	}
	if len(meta) > 0 {
		who += " (" + strings.Join(meta, ", ") + ")"
	}
	line(v.Object.Kind, "%s", who)
	if v.PodGroup != "" {
		line("Gang", "podgroup/%s", v.PodGroup)
	}
	state := v.State + ", " + runningText(v.Running, v.MinMember)
	if v.WaitSeconds != nil {
		d := age(time.Duration(*v.WaitSeconds) * time.Second)
		if v.Waiting {
			state += ", waiting for " + d
		} else {
			state += ", started " + d + " after creation"
		}
	}
	line("State", "%s", state)
	if e := v.LastEviction; e != nil {
		// The message names who the eviction made room for; By is there for -o json|yaml.
		pod := e.Pod
		if e.ReplacedBy != "" {
			pod += " (gone, replaced by " + e.ReplacedBy + ")"
		}
		line("Evicted", "%s %s ago (%s): %s", pod, age(time.Duration(e.AgoSeconds)*time.Second), e.Reason, e.Message)
	}
	if v.NoGPU != "" {
		line("GPU", "%s", v.NoGPU)
	}
	if v.Waiting {
		reason := v.Reason
		if reason == "" {
			reason = "none yet"
		}
		line("Reason", "%s", reason)
		if v.Message != "" {
			line("Message", "%s", v.Message)
		}
		line("To unblock", "%s", v.Hint)
		for _, c := range v.Competing {
			line("Competing", "%s of scheduler %s %s for %s (%s); fairway does not place them, and only the capacity it holds for a gang is kept from them",
				plural(int64(c.Pods), "pod", "pods"), c.Scheduler, verbFor(c.Pods, "waits", "wait"), plural(c.GPUs, "GPU", "GPUs"), fairwayv1.ResourceGPU)
		}
	} else if v.Message != "" {
		line("Note", "%s", v.Message)
	}
	for i, p := range v.Pods {
		label := ""
		if i == 0 {
			label = "Pods"
		}
		fmt.Fprintf(&b, "%-12s%s\n", label+strings.Repeat(":", min(len(label), 1)), describePlacement(p))
	}
	_, err := io.WriteString(w, b.String())
	return err
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

func describePlacement(p PlacementView) string {
	if p.Node == "" {
		return fmt.Sprintf("%s %s, not bound", p.Name, p.Phase)
	}
	s := fmt.Sprintf("%s %s on %s", p.Name, p.Phase, p.Node)
	if p.Evicting != "" {
		s += ", being evicted (" + p.Evicting + ")"
		if p.NotRecreated {
			s += " and will not come back: nothing recreates it without losing its work"
		}
	}
	switch {
	case p.GPUs > 0:
		s += ", " + plural(p.GPUs, "whole GPU", "whole GPUs")
	case p.Share != "":
		gpu := "a shared GPU"
		switch {
		case p.GPUIndex != nil:
			gpu = fmt.Sprintf("GPU %d (%s)", *p.GPUIndex, p.GPUUUID)
		case p.GPUUUID != "":
			gpu = "GPU " + p.GPUUUID
		}
		s += fmt.Sprintf(", %s of %s", p.Share, gpu)
		if len(p.SharedWith) > 0 {
			s += ", shared with " + strings.Join(p.SharedWith, ", ")
		}
		if p.OnLoan {
			s += "; on loan from the GPU's idle notebooks, which get it back as soon as they do GPU work"
		}
	}
	return s
}

// runningText says how many of a gang's pods run, with its minimum when it has one above a
// single pod: "29 pods running (min 25)", "1 pod running".
func runningText(running, minMember int32) string {
	s := plural(int64(running), "pod", "pods") + " running"
	if minMember > 1 {
		s += fmt.Sprintf(" (min %d)", minMember)
	}
	return s
}

// verbFor is the verb that goes with a count: one for 1, many otherwise.
func verbFor(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
