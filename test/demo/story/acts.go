package story

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// act is one part of the story: a title, a caption in the product's terms, what is done (each
// action returns the line shown for it) and the outcomes that must follow.
type act struct {
	title, caption string
	actions        []func(context.Context, *Env) (string, error)
	expect         []expectation
}

// expectation is an outcome an act waits for: check says whether it holds now and what it sees.
type expectation struct {
	what    string
	timeout time.Duration
	check   func(context.Context, *Env) (bool, string, error)
}

// users are the researchers whose notebooks share GPUs by day.
var users = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
	"ivan", "judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil"}

// Labels the acts select pods by (set by JupyterHub, Argo, KubeRay and the manifests).
const (
	workflowLabel   = "workflows.argoproj.io/workflow"
	rayClusterLabel = "ray.io/cluster"
	rayNodeLabel    = "ray.io/node-type"
)

var acts = []act{
	{
		title: "Day: notebooks share GPUs, team B borrows",
		caption: "16 researchers open JupyterHub notebooks at 0.25 GPU each: fairway packs them onto 4 shared GPUs\n" +
			"(the notebooks queue's guarantee; notebooks are never preempted). Team B starts a 24-trial Argo\n" +
			"sweep: 4 GPUs are guaranteed to it, the other 20 are borrowed from the idle guarantee of team A.",
		actions: []func(context.Context, *Env) (string, error){
			func(ctx context.Context, e *Env) (string, error) {
				for _, u := range users {
					if err := e.apply(ctx, notebookManifest, map[string]string{"User": u}); err != nil {
						return "", err
					}
				}
				return fmt.Sprintf("kubectl apply -f %s  # for %d users: %s, ..., %s", manifestPath(notebookManifest), len(users), users[0], users[len(users)-1]), nil
			},
			applyAction(sweepManifest, "Argo Workflow sweep: 24 one-GPU trials"),
		},
		expect: []expectation{
			{what: "16 notebooks run on 4 shared GPUs", timeout: 90 * time.Second, check: notebooksShare},
			{what: "team B runs 24 trials, 20 of them on borrowed GPUs", timeout: 90 * time.Second, check: func(ctx context.Context, e *Env) (bool, string, error) {
				trials, err := e.pods(ctx, "team-b", map[string]string{workflowLabel: "sweep"})
				if err != nil {
					return false, "", err
				}
				running := len(gpuPods(bound(trials)))
				_, borrowed, err := e.queueGPU(ctx, "team-b")
				seen := fmt.Sprintf("%s running, queue team-b borrows %s", count(running, "trial", "trials"), gpuAmount(borrowed))
				return running == 24 && borrowed == 20, seen, err
			}},
		},
	},
	{
		title: "Team A claims its guarantee; team B is reclaimed",
		caption: "Team A starts a 16-GPU Ray cluster: its guarantee, promised on demand. The GPUs are busy with\n" +
			"team B's borrowed trials, so fairway reclaims 12 of them (team B keeps its fair share: 4 guaranteed\n" +
			"+ 8 of the surplus). Argo retries the reclaimed trials; they wait, and say why.",
		actions: []func(context.Context, *Env) (string, error){
			applyAction(teamAManifest, "RayCluster tune: a head and 16 one-GPU workers, one gang"),
		},
		expect: []expectation{
			{what: "team A's Ray cluster starts whole (head + 16 GPU workers)", timeout: 90 * time.Second, check: rayBound("team-a", "tune", 17)},
			{what: "12 trials of team B reclaimed, retried by Argo and waiting", timeout: 90 * time.Second, check: func(ctx context.Context, e *Env) (bool, string, error) {
				trials, err := e.pods(ctx, "team-b", map[string]string{workflowLabel: "sweep"})
				if err != nil {
					return false, "", err
				}
				running, waiting := len(gpuPods(bound(trials))), waitingPods(trials)
				reclaims, err := e.events(ctx, "team-b", "Reclaim")
				if err != nil {
					return false, "", err
				}
				_, borrowed, err := e.queueGPU(ctx, "team-b")
				seen := fmt.Sprintf("%d reclaimed, %d running, %d waiting, queue team-b borrows %s", len(reclaims), running, len(waiting), gpuAmount(borrowed))
				if len(waiting) > 0 {
					seen += "; " + waiting[0].Name + " waits: " + shortReason(reason(&waiting[0]))
				}
				return len(reclaims) == 12 && running == 12 && len(waiting) == 12 && allHaveReasons(waiting) && borrowed == 8, seen, err
			}},
		},
	},
	{
		title: "Night: one 32-GPU gang gets all four nodes",
		caption: "The researchers go home (JupyterHub culls their notebooks), team B's sweep and team A's tuning\n" +
			"end. Team A submits its pre-training run: a Ray cluster of 32 one-GPU workers, elastic down to 24.\n" +
			"It starts whole or not at all: fairway places all 32 workers at once, filling the four nodes.",
		actions: []func(context.Context, *Env) (string, error){
			func(ctx context.Context, e *Env) (string, error) {
				err := e.C.Client().DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("notebooks"))
				return "kubectl delete pods -n notebooks --all  # JupyterHub culls the idle servers", err
			},
			deleteAction("argoproj.io", "Workflow", "team-b", "sweep", "kubectl delete workflow -n team-b sweep"),
			deleteAction("ray.io", "RayCluster", "team-a", "tune", "kubectl delete raycluster -n team-a tune"),
			applyAction(nightManifest, "RayCluster llm: 32 one-GPU workers, gang minimum head + 24"),
		},
		expect: []expectation{
			{what: "the day's pods are gone, their GPUs free", timeout: 90 * time.Second, check: dayGone},
			{what: "the 32-GPU gang runs whole, 8 workers on each node", timeout: 120 * time.Second, check: func(ctx context.Context, e *Env) (bool, string, error) {
				ok, seen, err := rayBound("team-a", "llm", 33)(ctx, e)
				if !ok || err != nil {
					return ok, seen, err
				}
				workers, err := e.pods(ctx, "team-a", map[string]string{rayClusterLabel: "llm", rayNodeLabel: "worker"})
				if err != nil {
					return false, "", err
				}
				perNode := map[string]int{}
				for _, p := range bound(workers) {
					perNode[p.Spec.NodeName]++
				}
				var pg fairwayv1.PodGroup
				if err := e.C.Client().Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "ray-llm"}, &pg); err != nil {
					return false, seen, err
				}
				// Counted from the pods bound, head included, as `fairway jobs` shows a gang: "33 (min
				// 25)". The PodGroup's status.running lags the bindings by a status write, and
				// "(30 running, minimum 25)" next to "runs whole" read as a contradiction.
				seen = fmt.Sprintf("workers per node %v, PodGroup ray-llm %s, running %d (min %d)", sortedMap(perNode), pg.Status.Phase, 1+len(bound(workers)), pg.Spec.MinMember)
				whole := len(perNode) == 4
				for _, n := range perNode {
					whole = whole && n == 8
				}
				return whole && pg.Status.Phase == fairwayv1.PodGroupRunning, seen, nil
			}},
		},
	},
	{
		title: "Morning: an inference burst takes GPUs back from training",
		caption: "Early users arrive and team A scales its inference service to 4 replicas; the Deployment names no\n" +
			"priority class: fairway knows vLLM replicas as inference and gives them fairway-inference (125),\n" +
			"non-preemptible. Within team A's queue higher priority preempts lower: the night training gives\n" +
			"4 workers back (KubeRay re-creates them; they wait) and keeps running on 28, above its minimum.",
		actions: []func(context.Context, *Env) (string, error){
			applyAction(inferenceManifest, "Deployment serve: 4 one-GPU vLLM replicas, no priority class"),
		},
		expect: []expectation{
			{what: "4 inference replicas run", timeout: 90 * time.Second, check: func(ctx context.Context, e *Env) (bool, string, error) {
				pods, err := e.pods(ctx, "team-a", map[string]string{"app": "serve"})
				if err != nil {
					return false, "", err
				}
				b := bound(pods)
				prio := ""
				if len(b) > 0 && b[0].Spec.Priority != nil {
					prio = fmt.Sprintf(" at priority %d", *b[0].Spec.Priority)
				}
				// The kind, not the manifest, chose the class and preemptibility.
				inference := 0
				for _, p := range b {
					if p.Spec.PriorityClassName == fairwayv1.PriorityClassInference && fairwayv1.KindOf(&p) == fairwayv1.KindInference &&
						p.Labels[fairwayv1.PreemptibilityLabel] == string(fairwayv1.NonPreemptible) {
						inference++
					}
				}
				return len(b) == 4 && inference == 4, fmt.Sprintf("%d of 4 replicas running%s, %d as non-preemptible inference", len(b), prio, inference), nil
			}},
			{what: "the night job gives 4 GPUs back and runs on 28 workers", timeout: 90 * time.Second, check: func(ctx context.Context, e *Env) (bool, string, error) {
				workers, err := e.pods(ctx, "team-a", map[string]string{rayClusterLabel: "llm", rayNodeLabel: "worker"})
				if err != nil {
					return false, "", err
				}
				running, waiting := len(bound(workers)), waitingPods(workers)
				preempts, err := e.events(ctx, "team-a", "Preempt")
				if err != nil {
					return false, "", err
				}
				var pg fairwayv1.PodGroup
				if err := e.C.Client().Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "ray-llm"}, &pg); err != nil {
					return false, "", err
				}
				seen := fmt.Sprintf("%s preempted, %d running, %d waiting; PodGroup ray-llm %s", count(len(preempts), "worker", "workers"), running, len(waiting), pg.Status.Phase)
				if len(waiting) > 0 {
					seen += "; " + waiting[0].Name + " waits: " + shortReason(reason(&waiting[0]))
				}
				return len(preempts) == 4 && running == 28 && len(waiting) == 4 && allHaveReasons(waiting) && pg.Status.Phase == fairwayv1.PodGroupRunning, seen, nil
			}},
		},
	},
}

// applyAction applies a manifest; what says what it holds.
func applyAction(name, what string) func(context.Context, *Env) (string, error) {
	return func(ctx context.Context, e *Env) (string, error) {
		return fmt.Sprintf("kubectl apply -f %s  # %s", manifestPath(name), what), e.apply(ctx, name, nil)
	}
}

// deleteAction deletes a framework object; its controller's pods go with it.
func deleteAction(group, kind, namespace, name, line string) func(context.Context, *Env) (string, error) {
	return func(ctx context.Context, e *Env) (string, error) {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind})
		if group == "argoproj.io" {
			o.SetAPIVersion("argoproj.io/v1alpha1")
		}
		o.SetNamespace(namespace)
		o.SetName(name)
		return line, client.IgnoreNotFound(e.C.Client().Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}
}

func notebooksShare(ctx context.Context, e *Env) (bool, string, error) {
	nbs, err := e.pods(ctx, "notebooks", nil)
	if err != nil {
		return false, "", err
	}
	gpus := map[string]bool{}
	b := bound(nbs)
	for _, p := range b {
		if g := p.Labels[fairwayv1.GPUGroupLabel]; g != "" {
			gpus[g] = true
		}
	}
	return len(b) == 16 && len(gpus) == 4, fmt.Sprintf("%s running on %s", count(len(b), "notebook", "notebooks"), count(len(gpus), "shared GPU", "shared GPUs")), nil
}

// rayBound checks that a Ray cluster's pods (head and workers) are all running.
func rayBound(namespace, cluster string, want int) func(context.Context, *Env) (bool, string, error) {
	return func(ctx context.Context, e *Env) (bool, string, error) {
		pods, err := e.pods(ctx, namespace, map[string]string{rayClusterLabel: cluster})
		if err != nil {
			return false, "", err
		}
		b := bound(pods)
		seen := fmt.Sprintf("%d of %d pods of RayCluster %s running", len(b), want, cluster)
		if w := waitingPods(pods); len(w) > 0 {
			seen += "; " + w[0].Name + " waits: " + shortReason(reason(&w[0]))
		}
		return len(b) == want, seen, nil
	}
}

// dayGone checks that no pod of the day holds a GPU any more, reservations included.
func dayGone(ctx context.Context, e *Env) (bool, string, error) {
	var left []string
	for _, ns := range []string{"notebooks", "team-b"} {
		pods, err := e.pods(ctx, ns, nil)
		if err != nil {
			return false, "", err
		}
		if len(pods) > 0 {
			left = append(left, count(len(pods), "pod", "pods")+" in "+ns)
		}
	}
	tune, err := e.pods(ctx, "team-a", map[string]string{rayClusterLabel: "tune"})
	if err != nil {
		return false, "", err
	}
	if len(tune) > 0 {
		left = append(left, count(len(tune), "pod", "pods")+" of RayCluster tune")
	}
	resv, err := e.pods(ctx, "fairway-system", map[string]string{fairwayv1.ReservationLabel: "true"})
	if err != nil {
		return false, "", err
	}
	if len(resv) > 0 {
		left = append(left, count(len(resv), "GPU reservation", "GPU reservations"))
	}
	if len(left) > 0 {
		return false, strings.Join(left, ", ") + " left", nil
	}
	return true, "no notebook, trial or tuning pod left; shared GPUs released", nil
}

// pods lists the pods of a namespace matching labels.
func (e *Env) pods(ctx context.Context, namespace string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := e.C.Client().List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// events lists the events of a reason on the pods of a namespace.
func (e *Env) events(ctx context.Context, namespace, reason string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := e.C.Client().List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out, nil
}

// queueGPU reads a queue's allocated and borrowed GPUs from its status.
func (e *Env) queueGPU(ctx context.Context, name string) (allocated, borrowed float64, err error) {
	var q fairwayv1.Queue
	if err := e.C.Client().Get(ctx, client.ObjectKey{Name: name}, &q); err != nil {
		return 0, 0, err
	}
	a, b := q.Status.Allocated[corev1.ResourceName("gpu")], q.Status.Borrowed[corev1.ResourceName("gpu")]
	return a.AsApproximateFloat64(), b.AsApproximateFloat64(), nil
}

// bound keeps the pods bound to a node and not leaving.
func bound(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// gpuPods keeps the pods that ask for whole GPUs.
func gpuPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			if q := c.Resources.Limits[fairwayv1.ResourceGPU]; !q.IsZero() {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// waitingPods keeps the pods not bound yet.
func waitingPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// reason is the scheduler's message on a waiting pod (PodScheduled=False).
func reason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

func allHaveReasons(pods []corev1.Pod) bool {
	for i := range pods {
		if reason(&pods[i]) == "" {
			return false
		}
	}
	return true
}

func sortedMap(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
