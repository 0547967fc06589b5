//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// TestQueueIsolation: a team cannot spend another team's quota by labelling its pods with the
// other team's queue, neither past the webhook nor after admission. On a real local control
// plane with `fairway scheduler`:
//   - before any webhook runs, pods of namespace team-a naming team-b's queue (one per queue
//     label key) wait with ForeignQueue, and team-b's Queue status and fairway's metrics count
//     none of them; once team-b serves team-a they are placed;
//   - with `fairway webhook` running, relabelling a managed pending pod with each queue label key
//     (and changing its gang or preemptibility) is denied by the API server with the key named,
//     while other label changes and status updates go through;
//   - a Queue with spec.namespaceSelector serves the namespaces it selects, in the webhook and
//     in the scheduler, as namespaces appear and change labels; an empty selector is refused;
//   - with the webhook down, the same relabelling is still refused (failurePolicy Fail), and
//     other label changes and status updates still go through: the API server's match
//     condition keeps them off the webhook, and status updates never reach it.
func TestQueueIsolation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(1)}})
	ensureSchedFixtures(t, c)
	newNamespace(t, c, "team-a")
	newNamespace(t, c, "team-b")
	schedQueue(t, c, "team-a", "", "team-a")
	schedQueue(t, c, "team-b", "", "team-b")
	sched := startSched(t, c, bin, "fairway-scheduler", true)

	// 1. Pods that reached the scheduler without the webhook.
	foreign := map[string]string{ // pod -> the label key naming team-b
		"via-fairway-label": fairwayv1.QueueLabel,
		"via-runai-label":   fairwayv1.RunAIQueueLabel,
		"via-kai-label":     fairwayv1.KAIQueueLabel,
	}
	for name, key := range foreign {
		p := schedPod("team-a", name, "").Obj()
		p.Labels = map[string]string{key: "team-b", fairwayv1.ManagedLabel: "true"}
		mustCreate(t, c, p)
	}
	// team-b's own pod asks for more CPU than any node has: it waits, counted in team-b, so
	// team-b's status shows exactly its own demand.
	own := schedPod("team-b", "own-too-big", "team-b").Obj()
	own.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000")
	mustCreate(t, c, own)

	wantReason := string(engine.ReasonForeignQueue) + ": queue team-b does not serve namespace team-a"
	eventually(t, 30*time.Second, "the 3 foreign pods waiting with "+string(engine.ReasonForeignQueue), func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, "team-a", nil)
		if len(bound(pods)) != 0 {
			return false, fmt.Errorf("%d foreign pods bound", len(bound(pods)))
		}
		for _, p := range pods {
			if r := reasonOf(&p); !strings.HasPrefix(r, wantReason) {
				return false, fmt.Errorf("pod %s: reason %q", p.Name, r)
			}
		}
		return len(pods) == 3, nil
	})
	t.Logf("foreign pod waits: %s", reasonOf(ptr.To(podsIn(t, c, ctx, "team-a", nil)[0])))
	eventually(t, 30*time.Second, "team-b's status counting its own pod only", func(ctx context.Context) (bool, error) {
		q, err := queueStatus(ctx, c, "team-b")
		if err != nil {
			return false, err
		}
		if q.Status.PendingPods != 1 || amount(q.Status.Requested, "cpu") != 1000 {
			return false, fmt.Errorf("team-b: %d pending pods, requested cpu %v (want 1 and 1000)", q.Status.PendingPods, amount(q.Status.Requested, "cpu"))
		}
		a, err := queueStatus(ctx, c, "team-a")
		if err != nil {
			return false, err
		}
		if a.Status.PendingPods != 0 || amount(a.Status.Requested, "cpu") != 0 {
			return false, fmt.Errorf("team-a: %d pending pods, requested cpu %v (want none)", a.Status.PendingPods, amount(a.Status.Requested, "cpu"))
		}
		return true, nil
	})
	eventually(t, 20*time.Second, "fairway's metrics counting the foreign pods in no queue", func(ctx context.Context) (bool, error) {
		fams, err := scrape(ctx, sched.MetricsURL)
		if err != nil {
			return false, err
		}
		if v, _ := value(fams, "fairway_queue_requested", map[string]string{"queue": "team-b", "resource": "cpu"}); v != 1000 {
			return false, fmt.Errorf("fairway_queue_requested{queue=team-b,resource=cpu} = %v, want 1000 (its own pod only)", v)
		}
		for _, q := range []string{"team-a", "team-b"} {
			if v, ok := value(fams, "fairway_pending_pods", map[string]string{"queue": q, "reason": string(engine.ReasonForeignQueue)}); ok && v != 0 {
				return false, fmt.Errorf("fairway_pending_pods{queue=%s,reason=ForeignQueue} = %v, want none: no queue counts foreign pods", q, v)
			}
		}
		if v, _ := value(fams, "fairway_pending_pods", map[string]string{"queue": "", "reason": string(engine.ReasonForeignQueue)}); v != 3 {
			return false, fmt.Errorf("fairway_pending_pods{queue=\"\",reason=ForeignQueue} = %v, want 3", v)
		}
		return true, nil
	})

	// The refusal is the namespaces check: once team-b serves team-a, the same pods are placed.
	updateQueue(t, c, "team-b", func(q *fairwayv1.QueueSpec) { q.Namespaces = append(q.Namespaces, "team-a") })
	eventually(t, 30*time.Second, "the 3 pods placed once team-b serves team-a", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "team-a", nil))) == 3, nil
	})
	updateQueue(t, c, "team-b", func(q *fairwayv1.QueueSpec) { q.Namespaces = []string{"team-b"} })
	for name := range foreign {
		if err := c.Client().Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}

	// 2. With the webhook: a managed pending pod (gated, so it stays pending) keeps its keys.
	wh, err := fairwayproc.StartWebhook(ctx, c, fairwayproc.WebhookOptions{
		Binary: bin, Namespace: schedNamespace, ProbeNamespace: "team-a", Args: []string{"--v=2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := plainPod("managed-pending")
	pod.Namespace = "team-a"
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	if err := c.Client().Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[fairwayv1.ManagedLabel] != "true" || pod.Labels[fairwayv1.QueueLabel] != "team-a" {
		t.Fatalf("the webhook did not admit the pod: labels %v", pod.Labels)
	}
	key := client.ObjectKeyFromObject(pod)
	denied := `admission webhook "` + mutatingwebhook.ImmutableWebhookName + `" denied the request: `
	refused := map[string]struct {
		patch string
		want  string
	}{
		fairwayv1.QueueLabel:          {labelPatch(fairwayv1.QueueLabel, "team-b"), `label "fairway.dev/queue" may not change after admission (was "team-a", now "team-b")`},
		fairwayv1.RunAIQueueLabel:     {labelPatch(fairwayv1.RunAIQueueLabel, "team-b"), `label "runai/queue" may not change after admission (was unset, now "team-b")`},
		fairwayv1.KAIQueueLabel:       {labelPatch(fairwayv1.KAIQueueLabel, "team-b"), `label "kai.scheduler/queue" may not change after admission (was unset, now "team-b")`},
		fairwayv1.PreemptibilityLabel: {labelPatch(fairwayv1.PreemptibilityLabel, "non-preemptible"), `label "fairway.dev/preemptibility" may not change after admission (was unset, now "non-preemptible")`},
		fairwayv1.PodGroupAnnotation:  {fmt.Sprintf(`{"metadata":{"annotations":{%q:"team-b-gang"}}}`, fairwayv1.PodGroupAnnotation), `annotation "fairway.dev/pod-group" may not change after admission`},
		fairwayv1.MinMemberAnnotation: {fmt.Sprintf(`{"metadata":{"annotations":{%q:"5"}}}`, fairwayv1.MinMemberAnnotation), `annotation "fairway.dev/min-member" may not change after admission (was "1", now "5")`},
		fairwayv1.SubGroupsAnnotation: {fmt.Sprintf(`{"metadata":{"annotations":{%q:"head=1"}}}`, fairwayv1.SubGroupsAnnotation), `annotation "fairway.dev/sub-groups" may not change after admission (was unset, now "head=1")`},
	}
	patchPod := func(body string) error {
		return c.Client().Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	for k, tc := range refused {
		err := patchPod(tc.patch)
		if err == nil || !strings.Contains(err.Error(), denied+tc.want) {
			t.Errorf("changing %s: error %v, want %q", k, err, denied+tc.want)
		}
	}
	ordinary := func(phase string) {
		t.Helper()
		if err := patchPod(labelPatch("example.com/owner", phase)); err != nil {
			t.Errorf("%s: an ordinary label change of a managed pod was refused: %v", phase, err)
		}
		// The scheduler writes the pending pod's PodScheduled condition meanwhile: a Conflict is
		// that race, retried; what must not happen is a refusal by a webhook.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur corev1.Pod
			if err := c.Client().Get(ctx, key, &cur); err != nil {
				return err
			}
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{
				Type: corev1.PodConditionType("example.com/" + phase), Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
			return c.Client().Status().Update(ctx, &cur)
		}); err != nil {
			t.Errorf("%s: a status update of a managed pod was refused: %v", phase, err)
		}
	}
	ordinary("webhook-up")

	testNamespaceSelector(t, c)

	// 3. The webhook down: the keys stay refused; nothing else waits for it.
	if err := wh.Process.Stop(); err != nil {
		t.Logf("stopping the webhook: %v", err)
	}
	err = patchPod(labelPatch(fairwayv1.RunAIQueueLabel, "team-b"))
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+mutatingwebhook.ImmutableWebhookName+`"`) {
		t.Errorf("relabelling with the webhook down: error %v, want the API server's failed call to %s", err, mutatingwebhook.ImmutableWebhookName)
	}
	ordinary("webhook-down")
	var cur corev1.Pod
	if err := c.Client().Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	for _, k := range fairwayv1.QueueLabels() {
		if want := map[string]string{fairwayv1.QueueLabel: "team-a"}[k]; cur.Labels[k] != want {
			t.Errorf("label %s = %q after the refused changes, want %q", k, cur.Labels[k], want)
		}
	}
	if q, err := queueStatus(ctx, c, "team-b"); err != nil || q.Status.PendingPods != 1 {
		t.Errorf("team-b status after the refused changes: %+v, %v; want its own pod only", q.Status, err)
	}
}

func labelPatch(key, value string) string {
	return fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
}

// testNamespaceSelector: Kubeflow profile namespaces served by one Queue's namespaceSelector.
func testNamespaceSelector(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	profile := map[string]string{"app.kubernetes.io/part-of": "kubeflow-profile"}
	empty := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "everything"}, Spec: fairwayv1.QueueSpec{NamespaceSelector: &metav1.LabelSelector{}}}
	if err := c.Client().Create(ctx, empty); err == nil || !strings.Contains(err.Error(), "spec.namespaceSelector: an empty selector would select every namespace") {
		t.Errorf("creating a queue with an empty namespaceSelector: error %v, want the CRD's refusal", err)
	}
	// admit All: the CPU pods below are fairway's too.
	mustCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "profiles"},
		Spec: fairwayv1.QueueSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: profile}, Admit: fairwayv1.AdmitAll}})
	createNamespace(t, c, "kubeflow-user-alice", profile)
	createNamespace(t, c, "kubeflow-user-bob", nil)

	// served: rewritten by the webhook for queue profiles, then placed by the scheduler.
	served := func(ns, name string) {
		t.Helper()
		eventually(t, 30*time.Second, "a pod of "+ns+" admitted to queue profiles", func(ctx context.Context) (bool, error) {
			pod := plainPod(name)
			pod.Namespace = ns
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
			if err := c.Client().Create(ctx, pod); err != nil {
				return false, err
			}
			if pod.Labels[fairwayv1.QueueLabel] == "profiles" && pod.Spec.SchedulerName == fairwayv1.SchedulerName {
				return true, nil
			}
			err := fmt.Errorf("pod %s/%s: scheduler %q, labels %v", ns, pod.Name, pod.Spec.SchedulerName, pod.Labels)
			_ = c.Client().Delete(ctx, pod, client.GracePeriodSeconds(0))
			return false, err
		})
		eventually(t, 30*time.Second, "the pod of "+ns+" placed by fairway", func(ctx context.Context) (bool, error) {
			var p corev1.Pod
			if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
				return false, err
			}
			if p.Spec.NodeName == "" {
				return false, fmt.Errorf("waiting: %s", reasonOf(&p))
			}
			return true, nil
		})
	}
	served("kubeflow-user-alice", "nb")

	// An unlabelled namespace is not served; labelling it makes it a profile.
	pod := plainPod("nb")
	pod.Namespace = "kubeflow-user-bob"
	if err := c.Client().Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.SchedulerName == fairwayv1.SchedulerName {
		t.Errorf("a pod of the unlabelled namespace was handed to fairway: labels %v", pod.Labels)
	}
	var bob corev1.Namespace
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "kubeflow-user-bob"}, &bob); err != nil {
		t.Fatal(err)
	}
	bob.Labels = profile
	if err := c.Client().Update(ctx, &bob); err != nil {
		t.Fatal(err)
	}
	served("kubeflow-user-bob", "nb")
}
