package view

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// Why is the answer to a search on the Why page.
type Why struct {
	Query string
	// Explanations are `fairway why` for each pod or gang found (a workload's gangs, at most
	// maxExplained), with the CLI's text.
	Explanations []Explanation
	// Queue is set when the query names a queue the user sees: its row, its policy and what
	// waits in it.
	Queue   *cli.QueueView
	Policy  *cli.PolicyView
	Waiting []*Workload
	// Workload is set when the query names a workload.
	Workload *Workload
	// Candidates are the names that contain the query, when nothing is named exactly.
	Candidates []string
}

// Explanation is `fairway why` for one pod or gang.
type Explanation struct {
	View cli.WhyView
	// Text is what `fairway why` prints.
	Text string
}

const (
	maxExplained  = 8
	maxCandidates = 20
)

// Why searches a pod, gang (PodGroup), workload or queue the user sees and explains it as
// `fairway why` does. query is NAME or NAMESPACE/NAME; kind prefixes are those of `fairway
// why` (pod/, podgroup/, pg/) and queue/.
func (m *Model) Why(sc Scope, query string) Why {
	query = strings.TrimSpace(query)
	out := Why{Query: query}
	if query == "" {
		return out
	}
	kind, rest := "", query
	if k, r, ok := strings.Cut(query, "/"); ok {
		switch strings.ToLower(k) {
		case "pod", "pods", "po":
			kind, rest = "pod", r
		case "podgroup", "podgroups", "pg":
			kind, rest = "podgroup", r
		case "queue", "queues", "q":
			kind, rest = "queue", r
		case "workload", "workflow", "wf":
			kind, rest = "workload", r
		}
	}
	ns, name := "", rest
	if a, b, ok := strings.Cut(rest, "/"); ok {
		ns, name = a, b
	}
	if kind == "" || kind == "queue" {
		if q := m.queueRow(sc, name); q != nil && ns == "" {
			out.Queue = q
			p := m.Policy(q.Name)
			out.Policy = &p
			for _, w := range m.WorkloadsFor(sc, "") {
				if w.Queue == q.Name && w.Waiting {
					out.Waiting = append(out.Waiting, w)
				}
			}
			return out
		}
	}
	matchNS := func(n string) bool { return sc.Sees(n) && (ns == "" || ns == n) }
	if kind == "" || kind == "podgroup" {
		for i := range m.snap.PodGroups {
			pg := &m.snap.PodGroups[i]
			if pg.Name == name && matchNS(pg.Namespace) {
				out.Explanations = append(out.Explanations, m.explain(sc, nil, pg))
			}
		}
	}
	if (kind == "" && len(out.Explanations) == 0) || kind == "pod" {
		for i := range m.snap.Pods {
			p := &m.snap.Pods[i]
			if p.Name == name && matchNS(p.Namespace) {
				out.Explanations = append(out.Explanations, m.explain(sc, p, nil))
			}
		}
	}
	if len(out.Explanations) > 0 {
		return out
	}
	if kind == "" || kind == "workload" {
		for i := range m.Workloads {
			w := &m.Workloads[i]
			if w.Name != name || !matchNS(w.Namespace) {
				continue
			}
			out.Workload = m.redactWorkload(sc, w)
			for _, g := range w.Gangs {
				if len(out.Explanations) == maxExplained {
					break
				}
				if pg := m.podGroup(w.Namespace, g); pg != nil {
					out.Explanations = append(out.Explanations, m.explain(sc, nil, pg))
				}
			}
			if len(w.Gangs) == 0 {
				mbs := w.Members()
				for _, mb := range mbs[:min(len(mbs), maxExplained)] {
					if p := w.pod(mb.Name); p != nil {
						out.Explanations = append(out.Explanations, m.explain(sc, p, nil))
					}
				}
			}
			return out
		}
	}
	out.Candidates = m.candidates(sc, strings.ToLower(name))
	return out
}

func (m *Model) queueRow(sc Scope, name string) *cli.QueueView {
	for _, q := range m.QueuesFor(sc).Items {
		if q.Name == name {
			return &q
		}
	}
	return nil
}

func (m *Model) podGroup(ns, name string) *fairwayv1.PodGroup {
	for i := range m.snap.PodGroups {
		if pg := &m.snap.PodGroups[i]; pg.Namespace == ns && pg.Name == name {
			return pg
		}
	}
	return nil
}

// pod is the workload's pod of that name, or nil.
func (w *Workload) pod(name string) *corev1.Pod {
	if i, ok := slices.BinarySearchFunc(w.pods, name, func(p *corev1.Pod, name string) int { return strings.Compare(p.Name, name) }); ok {
		return w.pods[i]
	}
	return nil
}

// explain builds `fairway why`'s snapshot from the model's, as RunWhy builds it from the API
// server, and explains it with cli.BuildWhy.
func (m *Model) explain(sc Scope, pod *corev1.Pod, pg *fairwayv1.PodGroup) Explanation {
	ns := ""
	if pod != nil {
		ns = pod.Namespace
		if g := pod.Annotations[fairwayv1.PodGroupAnnotation]; g != "" {
			pg = m.podGroup(ns, g)
		}
	} else {
		ns = pg.Namespace
	}
	s := &cli.WhySnapshot{Pod: pod, PodGroup: pg, PriorityClasses: m.snap.PriorityClasses,
		Nodes: map[string]*corev1.Node{}, NodePods: map[string][]corev1.Pod{}}
	for i := range m.snap.Pods {
		if p := &m.snap.Pods[i]; p.Namespace == ns {
			s.Pods = append(s.Pods, *p)
		}
	}
	queue := ""
	switch {
	case pod != nil:
		_, queue, _ = fairwayv1.QueueOf(pod.Labels)
	case pg != nil:
		queue = pg.Spec.Queue
	}
	s.Queue = m.queues[queue]
	var members []*corev1.Pod
	if pod != nil {
		members = []*corev1.Pod{pod}
	} else {
		for i := range s.Pods {
			if s.Pods[i].Annotations[fairwayv1.PodGroupAnnotation] == pg.Name {
				members = append(members, &s.Pods[i])
			}
		}
	}
	nodes := map[string]bool{}
	for _, p := range members {
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	for i := range m.snap.Nodes {
		if n := &m.snap.Nodes[i]; nodes[n.Name] {
			s.Nodes[n.Name] = n
		}
	}
	for i := range m.snap.Pods {
		p := &m.snap.Pods[i]
		if nodes[p.Spec.NodeName] {
			// Who shares a GPU is shown only for namespaces the user sees.
			if sc.Sees(p.Namespace) || p.Labels[fairwayv1.ReservationLabel] == "true" {
				s.NodePods[p.Spec.NodeName] = append(s.NodePods[p.Spec.NodeName], *p)
			}
		}
		// Other schedulers' waiting pods are counted for administrators only, as the CLI counts
		// them only for users who may list pods everywhere.
		if sc.All && p.Spec.SchedulerName != fairwayv1.SchedulerName && p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
			s.ForeignPending = append(s.ForeignPending, *p)
		}
	}
	for i := range m.snap.Events {
		if ev := &m.snap.Events[i]; ev.Regarding.Namespace == ns {
			s.Events = append(s.Events, *ev)
		}
	}
	// The API server lists by namespace and name; the cache in no order. Sort as the CLI reads.
	byName := func(a, b corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}
	slices.SortFunc(s.Pods, byName)
	for _, pods := range s.NodePods {
		slices.SortFunc(pods, byName)
	}
	v := cli.BuildWhy(s, m.Now)
	// Messages that name another team's work are replaced before the text is printed, so the
	// text and the fields say the same.
	v.Message = m.redact(sc, v.Message)
	if e := v.LastEviction; e != nil {
		c := *e
		c.Message = m.redact(sc, c.Message)
		if c.By != nil && !sc.Sees(c.By.Namespace) && c.By.Namespace != "" {
			c.By = nil
		}
		v.LastEviction = &c
	}
	for i := range v.Pods {
		v.Pods[i].EvictingMessage = m.redact(sc, v.Pods[i].EvictingMessage)
	}
	var b strings.Builder
	_ = cli.PrintWhy(&b, v)
	return Explanation{View: v, Text: b.String()}
}

// candidates are names of pods, gangs, workloads and queues the user sees that contain q.
func (m *Model) candidates(sc Scope, q string) []string {
	seen := map[string]bool{}
	add := func(s string) {
		if len(seen) < maxCandidates && !seen[s] {
			seen[s] = true
		}
	}
	for _, qv := range m.QueuesFor(sc).Items {
		if strings.Contains(strings.ToLower(qv.Name), q) {
			add("queue/" + qv.Name)
		}
	}
	for i := range m.Workloads {
		if w := &m.Workloads[i]; sc.Sees(w.Namespace) && strings.Contains(strings.ToLower(w.Name), q) {
			add("workload/" + w.Namespace + "/" + w.Name)
		}
	}
	for i := range m.snap.Pods {
		p := &m.snap.Pods[i]
		if sc.Sees(p.Namespace) && cli.IsFairwayPod(p) && strings.Contains(strings.ToLower(p.Name), q) {
			add("pod/" + p.Namespace + "/" + p.Name)
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
