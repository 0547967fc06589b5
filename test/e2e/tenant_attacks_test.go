//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
)

// checkTenantAttacks tries, as a tenant with the `edit` role in one namespace (user alice,
// impersonated), to write the keys fairway trusts, on the chart's RBAC and admission policies:
// each attempt must be refused with a message naming what it tried, and afterwards the victim
// pod (a bound half-GPU pod of alice's own namespace), its GPU ConfigMap and the queues are as
// they were. victim is that pod.
func checkTenantAttacks(t *testing.T, c *cluster.Cluster, victim client.ObjectKey) {
	ctx := t.Context()
	ns := victim.Namespace
	const user = "alice"
	mustCreate(t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	alice, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	aliceClient, err := client.New(cfg, client.Options{Scheme: c.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var before corev1.Pod
	if err := c.Client().Get(ctx, victim, &before); err != nil {
		t.Fatal(err)
	}
	// Nothing in her namespace names the victim's GPU (issue 35): the kubelet gets it from the
	// gpu-agent's device plugin, which reads the binding keys attacked below.
	if err := shareTicketOnly(&before); err != nil {
		t.Fatal(err)
	}
	// The victim's queue shows the pod's half GPU before the attacks.
	var queuesBefore map[string]string
	eventually(t, 30*time.Second, "queue "+ns+"'s status to show the victim's half GPU", func(ctx context.Context) (bool, error) {
		queuesBefore = queueUsage(t, c)
		return queuesBefore[ns] == "500m", fmt.Errorf("allocated %v", queuesBefore)
	})

	pods := alice.CoreV1().Pods(ns)
	patchPod := func(patch string) error {
		_, err := pods.Patch(ctx, victim.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	annotation := func(k, v string) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
	}
	createPod := func(p *corev1.Pod) func() error {
		return func() error {
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	podWith := func(name string, labels, annotations map[string]string, gpus int64) func() error {
		return createPod(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{fairwayv1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		})
	}
	// onNode is a pod created already bound to the victim's node and naming fairway's scheduler,
	// which neither the webhook (it leaves bound pods alone) nor the seal (checked on pending
	// pods) sees: fairway would read its keys as those of a pod it had placed. It asks for no GPU
	// of the kubelet, so it would cost its author nothing.
	onNode := func(name string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, NodeName: before.Spec.NodeName,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
	}
	const boundByFairway = "only fairway's scheduler binds the pods that name it"
	cms := alice.CoreV1().ConfigMaps(ns)
	type attack struct {
		what string
		do   func() error
		// refused is a part of the refusal's message; forbidden means RBAC's refusal.
		refused string
	}
	const forbidden = "is forbidden: User \"alice\" cannot"
	attacks := []attack{
		{"move her half-GPU pod's share to another GPU (gpu-index patched)", func() error {
			return patchPod(annotation(fairwayv1.GPUIndexAnnotation, "7"))
		}, "changing annotation fairway.dev/gpu-index is refused"},
		{"change the GPU UUID her pod's share is on", func() error {
			return patchPod(annotation(fairwayv1.GPUUUIDAnnotation, "GPU-forged"))
		}, "annotation fairway.dev/gpu-uuid"},
		{"mark her pod a loan, out of her queue's usage", func() error {
			return patchPod(annotation(fairwayv1.LoanAnnotation, "true"))
		}, "annotation fairway.dev/loan"},
		{"point her pod at another GPU ConfigMap", func() error {
			return patchPod(annotation(fairwayv1.GPUConfigMapAnnotation, "mine"))
		}, "annotation fairway.dev/gpu-configmap"},
		{"take her pod out of its gang (pod-group patched)", func() error {
			return patchPod(annotation(fairwayv1.PodGroupAnnotation, "elsewhere"))
		}, "fairway.dev/pod-group"},
		{"take fairway's managed label off her pod", func() error {
			return patchPod(`{"metadata":{"labels":{"fairway.dev/managed":null}}}`)
		}, "fairway.dev/managed"},
		{"move her pod to team-a's queue", func() error {
			return patchPod(`{"metadata":{"labels":{"fairway.dev/queue":"team-a"}}}`)
		}, "fairway.dev/queue"},
		// Pods the webhook does not rewrite (opted out with fairway.dev/ignore): the policy
		// refuses. Without GPUs: an opted-out pod asking for GPUs is refused before (below).
		{"create a pod labelled as a reservation", podWith("forged-reservation",
			map[string]string{fairwayv1.ReservationLabel: "true", fairwayv1.IgnoreLabel: "true"}, nil, 0), "setting label fairway.dev/reservation is refused"},
		{"create a pod that names its GPU (gpu-index at creation)", podWith("forged-index",
			map[string]string{fairwayv1.IgnoreLabel: "true"}, map[string]string{fairwayv1.GPUIndexAnnotation: "0", fairwayv1.GPUUUIDAnnotation: "GPU-x"}, 0), "annotation fairway.dev/gpu-index, annotation fairway.dev/gpu-uuid"},
		{"create a pod already on loan", podWith("forged-loan",
			map[string]string{fairwayv1.IgnoreLabel: "true"}, map[string]string{fairwayv1.LoanAnnotation: "true"}, 0), "annotation fairway.dev/loan"},
		// GPUs outside her queue: a pod kube-scheduler (or another scheduler) places is charged
		// to no queue and takes GPUs other teams are guaranteed.
		{"take 8 GPUs outside her queue: a pod opted out of fairway", podWith("opted-out-gpus",
			map[string]string{fairwayv1.IgnoreLabel: "true"}, nil, 8), "asks for 8 nvidia.com/gpu (container c) in namespace " + ns + ", which a fairway queue serves, but is opted out of fairway"},
		{"take a GPU outside her queue: a pod created on a node", func() error {
			p := onNode("on-node-gpu", nil, nil)
			p.Spec.SchedulerName = ""
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			return err
		}, "but is created on node " + before.Spec.NodeName + " (spec.nodeName)"},
		{"take a GPU outside her queue: a pod naming another scheduler", func() error {
			p := onNode("volcano-gpu", nil, nil)
			p.Spec.SchedulerName, p.Spec.NodeName = "volcano", ""
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			return err
		}, `but names scheduler "volcano", which fairway does not take pods from`},
		{"create a pod in fairway's namespace", func() error {
			_, err := alice.CoreV1().Pods(chart.Namespace).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{fairwayv1.ReservationLabel: "true"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{})
			return err
		}, forbidden},
		{"create a GPU ConfigMap of an earlier release's kind", func() error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fairway-gpu-forged",
				Labels: map[string]string{fairwayv1.ManagedByLabel: fairwayv1.ManagedByValue}},
				Data: map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}}, metav1.CreateOptions{})
			return err
		}, "is labelled app.kubernetes.io/managed-by=fairway"},
		{"ask for fairway's share ticket without a share", func() error {
			one := corev1.ResourceList{fairwayv1.ResourceGPUShare: resource.MustParse("1")}
			_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged-ticket"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: one}}}}},
				metav1.CreateOptions{})
			return err
		}, "asks for fairway.dev/gpu-share, which fairway sets itself"},
		{"take a share's slot straight on a node (ticket, fairway's name, spec.nodeName)", func() error {
			one := corev1.ResourceList{fairwayv1.ResourceGPUShare: resource.MustParse("1")}
			_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged-slot"},
				Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, NodeName: "h100-0",
					Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: one}}}}},
				metav1.CreateOptions{})
			return err
		}, "asks for fairway.dev/gpu-share, which fairway sets itself"},
		{"fill a GPU with a phantom share: a CPU-only pod created on a node, gpu-fraction 0.999", createPod(onNode("phantom-share",
			nil, map[string]string{fairwayv1.GPUFractionAnnotation: "0.999"})), boundByFairway},
		{"charge team-a's queue with a non-preemptible pod created on a node", createPod(onNode("charged-to-team-a",
			map[string]string{fairwayv1.QueueLabel: "team-a", fairwayv1.PreemptibilityLabel: "non-preemptible"},
			map[string]string{fairwayv1.GPUFractionAnnotation: "0.5"})), boundByFairway},
		{"make fairway write a PodGroup naming team-a's queue (a gang's keys on a pod created on a node)", createPod(onNode("forged-gang",
			map[string]string{fairwayv1.QueueLabel: "team-a"},
			map[string]string{fairwayv1.PodGroupAnnotation: "forged", fairwayv1.MinMemberAnnotation: "1"})), boundByFairway},
		{"write a PodGroup naming team-a's queue", func() error {
			return aliceClient.Create(ctx, &fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns},
				Spec: fairwayv1.PodGroupSpec{Queue: "team-a", MinMember: 1}})
		}, forbidden},
		{"raise her queue's guarantee", func() error {
			var q fairwayv1.Queue
			if err := aliceClient.Get(ctx, client.ObjectKey{Name: "team-c"}, &q); err != nil {
				return err
			}
			return aliceClient.Update(ctx, &q)
		}, forbidden},
	}
	for _, a := range attacks {
		err := a.do()
		switch {
		case err == nil:
			t.Errorf("tenant attack %q: allowed", a.what)
		case !strings.Contains(err.Error(), a.refused):
			t.Errorf("tenant attack %q: refused with %q, want a message containing %q", a.what, err, a.refused)
		case a.refused == forbidden && !apierrors.IsForbidden(err):
			t.Errorf("tenant attack %q: %v, want Forbidden", a.what, err)
		default:
			t.Logf("tenant attack %q: refused: %s", a.what, err)
		}
	}

	// Through pods/status, whose updates keep labels and annotations: every kubelet may write
	// its pods' status, and so may any operator granted it; bob is such an operator.
	mustCreate(t, c, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-status-writer", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "patch", "update"}}},
	})
	mustCreate(t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-pod-status", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-status-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "bob"}},
	})
	bcfg := c.RESTConfig()
	bcfg.Impersonate = rest.ImpersonationConfig{UserName: "bob", Groups: []string{"system:authenticated"}}
	bob, err := kubernetes.NewForConfig(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct{ what, patch, refused string }{
		{"move the half-GPU pod's share to another GPU", annotation(fairwayv1.GPUIndexAnnotation, "7"), "changing (through pods/status) annotation fairway.dev/gpu-index"},
		{"mark the pod a loan", annotation(fairwayv1.LoanAnnotation, "true"), "annotation fairway.dev/loan"},
		{"move the pod to team-a's queue", `{"metadata":{"labels":{"fairway.dev/queue":"team-a"}}}`, "label fairway.dev/queue"},
		{"halve the pod's GPU fraction", annotation(fairwayv1.GPUFractionAnnotation, "0.25"), "annotation fairway.dev/gpu-fraction"},
		{"take fairway's managed label off the pod", `{"metadata":{"labels":{"fairway.dev/managed":null}}}`, "label fairway.dev/managed"},
	} {
		_, err := bob.CoreV1().Pods(ns).Patch(ctx, victim.Name, types.MergePatchType, []byte(a.patch), metav1.PatchOptions{}, "status")
		switch {
		case err == nil:
			t.Errorf("pods/status attack %q: allowed", a.what)
		case !strings.Contains(err.Error(), a.refused):
			t.Errorf("pods/status attack %q: refused with %q, want a message containing %q", a.what, err, a.refused)
		default:
			t.Logf("pods/status attack %q: refused: %s", a.what, err)
		}
	}

	// Through controllers: their creations are refused as hers are, so a template cannot bring
	// such a pod back. refusedController waits for the controller's FailedCreate event.
	refusedController := func(what, kind, name, want string) {
		t.Helper()
		eventually(t, 30*time.Second, what+": the "+kind+" controller's pod to be refused", func(ctx context.Context) (bool, error) {
			evs, err := c.Clientset().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
			if err != nil {
				return false, err
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Reason == "FailedCreate" && strings.Contains(e.Message, want) {
					t.Logf("tenant attack %q: the %s controller was refused: %s", what, kind, e.Message)
					return true, nil
				}
				seen = append(seen, e.Reason+": "+e.Message)
			}
			return false, fmt.Errorf("events %q", seen)
		})
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "charged-to-team-a", Namespace: ns},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fairwayv1.QueueLabel: "team-a"},
				Annotations: map[string]string{fairwayv1.GPUFractionAnnotation: "0.5"}},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, NodeName: before.Spec.NodeName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}},
	}
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Job (her role allows it): %v", err)
	}
	refusedController("charge team-a's queue through a Job's template", "Job", job.Name, boundByFairway)
	_ = alice.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	// A DaemonSet's pods are never fairway's: one asking for a GPU would take one on every node,
	// outside her queue.
	dsLabels := map[string]string{"app": "every-gpu"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "every-gpu", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: dsLabels},
			Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}}}}},
		}},
	}
	if _, err := alice.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a DaemonSet (her role allows it): %v", err)
	}
	refusedController("take 8 GPUs of every node through a DaemonSet", "DaemonSet", ds.Name, "belongs to a DaemonSet, whose pods fairway does not schedule")
	_ = alice.AppsV1().DaemonSets(ns).Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})

	// Pods the webhook rewrites lose the forged keys, with a warning, and are scheduled as what
	// they are.
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-through-webhook", Namespace: ns,
			Labels:      map[string]string{fairwayv1.ReservationLabel: "true", fairwayv1.GPUGroupLabel: "h100-1-0"},
			Annotations: map[string]string{fairwayv1.LoanAnnotation: "true", fairwayv1.GPUIndexAnnotation: "0"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	var warned []string
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = warningsTo(&warned)
	aliceW, err := kubernetes.NewForConfig(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	if created, err := aliceW.CoreV1().Pods(ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Errorf("a pod with forged binding keys, through the webhook: %v", err)
	} else {
		for _, k := range []string{fairwayv1.ReservationLabel, fairwayv1.GPUGroupLabel} {
			if _, ok := created.Labels[k]; ok {
				t.Errorf("the webhook kept label %s on a tenant's new pod", k)
			}
		}
		for _, k := range []string{fairwayv1.LoanAnnotation, fairwayv1.GPUIndexAnnotation} {
			if _, ok := created.Annotations[k]; ok {
				t.Errorf("the webhook kept annotation %s on a tenant's new pod", k)
			}
		}
		if !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, "removed label fairway.dev/reservation") }) {
			t.Errorf("no warning named the removed keys: %q", warned)
		}
		t.Logf("tenant attack \"create a pod with binding keys through the webhook\": created without them, warned: %q", warned)
		_ = alice.CoreV1().Pods(ns).Delete(ctx, forged.Name, metav1.DeleteOptions{})
	}

	// Nothing changed: the pod's keys, its GPU ConfigMap, every queue's usage.
	var after corev1.Pod
	if err := c.Client().Get(ctx, victim, &after); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) || after.Spec.NodeName != before.Spec.NodeName {
		t.Errorf("the victim pod changed: labels %v -> %v, annotations %v -> %v", before.Labels, after.Labels, before.Annotations, after.Annotations)
	}
	// Two scheduler cycles later, still nothing.
	time.Sleep(3 * time.Second)
	if after := queueUsage(t, c); !maps.Equal(queuesBefore, after) {
		t.Errorf("queues' usage changed: %v -> %v", queuesBefore, after)
	}
	for _, name := range []string{"forged-reservation", "forged-index", "forged-loan", "phantom-share", "charged-to-team-a", "forged-gang",
		"opted-out-gpus", "on-node-gpu", "volcano-gpu"} {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s/%s: %v, want not found", ns, name, err)
		}
	}
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "forged"}, &fairwayv1.PodGroup{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodGroup %s/forged (from a pod created on a node): %v, want not found", ns, err)
	}
}

// checkAfterLeaderRestart kills the scheduler after the attacks and has a new one rebuild its
// view from the API server, then asks for a 0.75 share on the victim's node: had the attack on
// gpu-index (or gpu-uuid, or loan) landed, the new leader would see the victim's half GPU
// elsewhere and could put the 0.75 share on the GPU the victim really holds (1.25 GPUs). The
// share must land on another GPU, and the queues' usage must be what it was.
func checkAfterLeaderRestart(t *testing.T, c *cluster.Cluster, restart func() error, victim client.ObjectKey) {
	ctx := t.Context()
	var v corev1.Pod
	if err := c.Client().Get(ctx, victim, &v); err != nil {
		t.Fatal(err)
	}
	before := queueUsage(t, c)
	if err := restart(); err != nil {
		t.Fatalf("restarting the scheduler: %v", err)
	}
	share := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: victim.Namespace,
			Annotations: map[string]string{fairwayv1.GPUFractionAnnotation: "0.75"}},
		Spec: corev1.PodSpec{Affinity: onNodes(v.Spec.NodeName), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	mustCreate(t, c, share)
	defer func() { _ = c.Client().Delete(context.Background(), share) }()
	eventually(t, 60*time.Second, "the 0.75 share bound by the new leader", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(share), &p); err != nil {
			return false, err
		}
		if p.Spec.NodeName == "" || p.Annotations[fairwayv1.GPUUUIDAnnotation] == "" {
			return false, fmt.Errorf("node %q, GPU %q, reason %q", p.Spec.NodeName, p.Annotations[fairwayv1.GPUUUIDAnnotation], reasonOf(&p))
		}
		if got, held := p.Annotations[fairwayv1.GPUUUIDAnnotation], v.Annotations[fairwayv1.GPUUUIDAnnotation]; p.Spec.NodeName == v.Spec.NodeName && got == held {
			t.Fatalf("the new leader put a 0.75 share on GPU %s, which the victim's half-GPU pod holds: 1.25 GPUs", got)
		}
		return true, nil
	})
	after := queueUsage(t, c)
	for q, a := range before {
		if q != victim.Namespace && after[q] != a {
			t.Errorf("queue %s's usage changed across the restart: %s -> %s", q, a, after[q])
		}
	}
	t.Logf("after a leader restart the 0.75 share landed beside, not on, the victim's GPU; queues %v", after)
}

// queueUsage is each Queue's allocated GPUs, as its status says.
func queueUsage(t *testing.T, c *cluster.Cluster) map[string]string {
	var list fairwayv1.QueueList
	if err := c.Client().List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, q := range list.Items {
		a := q.Status.Allocated[corev1.ResourceName("gpu")]
		out[q.Name] = a.String()
	}
	return out
}

// warningsTo collects the API server's warnings.
type attackWarnings struct{ to *[]string }

func (w attackWarnings) HandleWarningHeader(_ int, _ string, text string) {
	*w.to = append(*w.to, text)
}

func warningsTo(to *[]string) rest.WarningHandler { return attackWarnings{to: to} }

// checkWebhookOutage stops the webhook and has the tenant create, in its served namespace, a pod
// that opts out of the webhook (fairway.dev/ignore) yet names fairway's scheduler, with the keys
// the webhook would have decided forged (managed, a notebook's kind, its own gang): the guard
// that refuses such a pod fails open, so the API server takes it, but the scheduler places
// only pods the webhook sealed, and this one waits with reason NotAdmitted.
func checkWebhookOutage(t *testing.T, c *cluster.Cluster, stopWebhook func() error, ns string) {
	ctx := t.Context()
	if err := stopWebhook(); err != nil {
		t.Fatalf("stopping the webhook: %v", err)
	}
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "while-webhook-down", Namespace: ns,
			Labels: map[string]string{fairwayv1.IgnoreLabel: "true", fairwayv1.QueueLabel: ns, fairwayv1.ManagedLabel: "true"},
			Annotations: map[string]string{fairwayv1.WorkloadKindAnnotation: string(fairwayv1.KindNotebook),
				fairwayv1.PodGroupAnnotation: "mine", fairwayv1.MinMemberAnnotation: "7", fairwayv1.AdmittedAnnotation: "v1:forged"}},
		Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}}}}},
	}
	if _, err := alice.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a pod while the webhook is down: %v (the guard fails open; this test needs the pod to exist)", err)
	}
	var reason string
	eventually(t, 20*time.Second, "the unsealed pod to wait with reason NotAdmitted", func(ctx context.Context) (bool, error) {
		var got corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err
		}
		if got.Spec.NodeName != "" {
			t.Fatalf("a pod the webhook never admitted was bound to %s", got.Spec.NodeName)
		}
		reason = reasonOf(&got)
		return strings.HasPrefix(reason, string(fairwayv1.ReasonNotAdmitted)+":"), fmt.Errorf("reason %q", reason)
	})
	t.Logf("tenant attack \"a pod created while the webhook is down, with forged keys\": waits: %s", reason)
	time.Sleep(3 * time.Second)
	var got corev1.Pod
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil || got.Spec.NodeName != "" {
		t.Errorf("the unsealed pod: %v, node %q", err, got.Spec.NodeName)
	}
	// Nor does its gang get a PodGroup of fairway's made from the keys its author wrote.
	var pg fairwayv1.PodGroup
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, &pg); !apierrors.IsNotFound(err) {
		t.Errorf("PodGroup %s/mine derived from the unsealed pod (queue %q, minMember %d): %v, want not found", ns, pg.Spec.Queue, pg.Spec.MinMember, err)
	}
	_ = c.Clientset().CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
}
