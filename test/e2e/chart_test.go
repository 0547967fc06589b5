//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestChart installs the Helm chart's rendering into a real API server and runs every component
// under its chart ServiceAccount (impersonation), through a workload that exercises what each
// does: the webhook rewrites pods and follows a new Queue; a fractional pod gets its reservation
// and GPU ConfigMap; the agent labels its node, reports the reservation's GPU and marks an idle
// notebook; a queue borrows and is reclaimed; PodGroup and Queue status are written; pods left on
// a deleted node are removed; the uninstall hook deletes the webhook's configuration. The API
// server's audit log then shows that no request of these ServiceAccounts was refused, and that
// every verb each chart rule grants was used or is justified in the template. Last, the chart's
// ValidatingAdmissionPolicies refuse what RBAC grants but the identities must not do
// (checkAdmissionPolicies).
func TestChart(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(chart.AuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartT(t, cluster.Config{
		NodePools:      []cluster.NodePool{cluster.H100Pool(2)},
		SkipCRDs:       true, // the chart's rendering brings them
		APIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	ctx := t.Context()

	begin := time.Now()
	r, err := chart.Template(ctx, chart.Local())
	if err != nil {
		t.Fatal(err)
	}
	in, err := chart.Install(ctx, c, r, chart.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart installed in %v: %d objects applied, %d workloads admitted with server-side dry-run",
		time.Since(begin).Round(time.Millisecond), len(in.Applied), len(in.DryRun))
	rules, err := chart.BoundRules(r)
	if err != nil {
		t.Fatal(err)
	}

	// KubeRay's CRDs, so that the webhook watches RayClusters, RayJobs and RayServices too.
	mod, err := cluster.ModuleDir(ctx, "kuberay", cluster.KubeRayModule)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyCRDs(ctx, filepath.Join(mod, "config", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		newNamespace(t, c, ns)
	}
	schedQueue(t, c, "team-a", "2", "team-a")
	schedQueue(t, c, "team-b", "", "team-b")
	s, err := stack.Start(ctx, c, stack.Options{
		Binary: bin, RunAs: chart.ServiceAccounts(chart.Namespace), ProbeNamespace: "team-a",
		Agents: gpuagents.Options{IdleAfter: 2 * time.Second}, Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Logf("fairway runs under the chart's ServiceAccounts, %v after the install", time.Since(begin).Round(time.Millisecond))
	checkFlowSchemas(t, c)

	chartWorkload(t, c, func() error { return s.RestartScheduler(ctx, c) })
	checkWebhookOutage(t, c, s.Webhook.Process.Stop, "team-c")

	// The components stop before the log is read, so every request they made is in it; then the
	// uninstall hook runs under its own ServiceAccount.
	s.Stop()
	cleanup := cluster.ServiceAccountUser(chart.Namespace, "fairway-webhook-cleanup")
	kc, err := c.KubeconfigAs(cleanup)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "webhook", "uninstall", "--kubeconfig="+kc, "--settle=0s").CombinedOutput()
	if err != nil {
		t.Fatalf("fairway webhook uninstall: %v\n%s", err, out)
	}
	err = c.Client().Get(ctx, client.ObjectKey{Name: fairwayproc.ConfigurationName}, &admissionregistrationv1.MutatingWebhookConfiguration{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the uninstall hook left the webhook configuration: %v", err)
	}

	checkRBAC(t, c, rules, auditLog)
	checkAdmissionPolicies(t, c)

	t.Run("AllOptions", func(t *testing.T) {
		// cert-manager and the Prometheus Operator are not in the local cluster: stand-in CRDs
		// give their kinds, so the API server validates everything else of those objects.
		root, err := cluster.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyCRDs(ctx, filepath.Join(root, "test", "chart", "testdata", "crds")); err != nil {
			t.Fatal(err)
		}
		r, err := chart.Template(ctx, chart.Options{
			Set: []string{"agent.mps.enabled=true", "webhook.certManager.enabled=true", "serviceMonitor.enabled=true",
				"defaultQueue.enabled=true", "defaultQueue.name=everyone", "defaultQueue.namespaces={default}",
				"admissionPolicies.webhookURLPrefix=https://webhooks.example.com/"},
			SetJSON: []string{`defaultQueue.resources={"gpu":{"quota":4,"limit":8,"overQuotaWeight":2},"memory":{"quota":"1Ti"}}`},
		})
		if err != nil {
			t.Fatal(err)
		}
		in, err := chart.Install(ctx, c, r, chart.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, o := range in.Applied {
			kinds[o.GetKind()]++
		}
		t.Logf("every option on: %d objects applied (%v), %d workloads admitted with server-side dry-run", len(in.Applied), kinds, len(in.DryRun))
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, client.ObjectKey{Name: "everyone"}, &q); err != nil {
			t.Fatalf("the default Queue: %v", err)
		}
	})
}

// chartWorkload drives every component through what needs its permissions.
func chartWorkload(t *testing.T, c *cluster.Cluster, restartScheduler func() error) {
	ctx := t.Context()
	step := func(what string) func() {
		begin := time.Now()
		return func() { t.Logf("%s: %v", what, time.Since(begin).Round(time.Millisecond)) }
	}

	// The webhook follows a new Queue: its configuration serves team-c within moments.
	done := step("the webhook configuration serves a new queue's namespace")
	schedQueue(t, c, "team-c", "1", "team-c") // notebooks run within guaranteed quota only
	eventually(t, 20*time.Second, "the webhook configuration to serve team-c", func(ctx context.Context) (bool, error) {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Client().Get(ctx, client.ObjectKey{Name: fairwayproc.ConfigurationName}, &mwc); err != nil {
			return false, err
		}
		for _, w := range mwc.Webhooks {
			if w.NamespaceSelector == nil {
				continue
			}
			for _, e := range w.NamespaceSelector.MatchExpressions {
				if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpIn && slices.Contains(e.Values, "team-c") {
					return true, nil
				}
			}
		}
		return false, nil
	})
	done()

	// A notebook-like pod asks for half a GPU: the webhook rewrites it, the scheduler holds a GPU
	// with a reservation pod, the agent reports its UUID, the scheduler records it on the pod and
	// binds it (the pod asks the kubelet for a fairway.dev/gpu-share; nothing in its namespace
	// names the GPU); the pod does no GPU work, so the agent marks it idle.
	done = step("a half-GPU pod bound with its GPU recorded and marked idle")
	nb := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-c", Annotations: map[string]string{fairwayv1.GPUFractionAnnotation: "0.5"}},
		Spec: corev1.PodSpec{PriorityClassName: fairwayv1.PriorityClassInteractive, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Affinity: onNodes("h100-1"),
			Containers: []corev1.Container{{Name: "notebook", Image: "jupyter/base-notebook", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	mustCreate(t, c, nb)
	eventually(t, 60*time.Second, "the half-GPU pod bound, with its GPU recorded, and idle", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), &p); err != nil {
			return false, err
		}
		if p.Labels[fairwayv1.QueueLabel] != "team-c" || p.Spec.NodeName == "" || p.Annotations[fairwayv1.GPUUUIDAnnotation] == "" {
			return false, fmt.Errorf("queue %q, node %q, GPU %q", p.Labels[fairwayv1.QueueLabel], p.Spec.NodeName, p.Annotations[fairwayv1.GPUUUIDAnnotation])
		}
		if err := shareTicketOnly(&p); err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == fairwayv1.GPUIdleCondition && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("not marked idle yet")
	})
	done()

	done = step("a tenant's attacks on the keys fairway trusts, all refused")
	checkTenantAttacks(t, c, client.ObjectKeyFromObject(nb))
	done()

	done = step("after the attacks, a new leader rebuilds from the API server: no GPU over-committed")
	checkAfterLeaderRestart(t, c, restartScheduler, client.ObjectKeyFromObject(nb))
	done()

	// Team B borrows a whole node; team A asks for its guarantee and two of B's pods are reclaimed;
	// their ReplicaSet re-creates them and they wait with a reason.
	done = step("team B borrows a node, team A reclaims its guarantee")
	mustCreate(t, c, replicaSet(userPod("team-b", "borrow").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes("h100-0"), 8))
	eventually(t, 60*time.Second, "team B's 8 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "team-b", nil))) == 8, nil
	})
	for i := range 2 {
		mustCreate(t, c, userPod("team-a", fmt.Sprintf("train-%d", i)).GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes("h100-0").Obj())
	}
	eventually(t, 60*time.Second, "team A's 2 pods bound, 2 of team B's waiting with a reason", func(ctx context.Context) (bool, error) {
		a, b := podsIn(t, c, ctx, "team-a", nil), podsIn(t, c, ctx, "team-b", nil)
		waiting := pendingPods(b)
		if len(bound(a)) != 2 || len(waiting) != 2 {
			return false, fmt.Errorf("team A %d bound, team B %d waiting", len(bound(a)), len(waiting))
		}
		for _, p := range waiting {
			if reasonOf(&p) == "" {
				return false, fmt.Errorf("%s waits without a reason", p.Name)
			}
		}
		return true, nil
	})
	eventually(t, 20*time.Second, "team B's Queue status shows what it borrows", func(ctx context.Context) (bool, error) {
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, client.ObjectKey{Name: "team-b"}, &q); err != nil {
			return false, err
		}
		b := q.Status.Borrowed[corev1.ResourceName("gpu")]
		return b.Value() == 6, fmt.Errorf("borrowed %v", q.Status.Borrowed)
	})
	done()

	// A node goes away with fairway's pods on it: the scheduler makes sure it is gone and deletes
	// them.
	done = step("pods of a deleted node removed")
	mustCreate(t, c, userPod("team-a", "on-h100-1").GPUs(1).OnNodes("h100-1").Obj())
	eventually(t, 30*time.Second, "a pod bound on h100-1", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := c.Client().Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "on-h100-1"}, &p)
		return err == nil && p.Spec.NodeName == "h100-1", err
	})
	if err := c.Clientset().CoreV1().Nodes().Delete(ctx, "h100-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "no pod left on h100-1", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.Client().List(ctx, &list, client.MatchingFields{"spec.nodeName": "h100-1"}); err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d pods left", len(list.Items))
	})
	done()
}

// userPod is a pod as a user writes it: no scheduler name, queue or gang; the webhook adds them.
func userPod(namespace, name string) *podB {
	p := schedPod(namespace, name, "")
	p.Spec.SchedulerName = ""
	p.Labels = map[string]string{}
	p.Annotations = map[string]string{}
	return p
}

func onNodes(names ...string) *corev1.Affinity {
	return (&podB{}).OnNodes(names...).Spec.Affinity
}

// checkRBAC reads the audit log: no request of the chart's ServiceAccounts was refused, no
// component logged a refusal, and every verb the chart grants was used or is justified.
func checkRBAC(t *testing.T, c *cluster.Cluster, rules []chart.Rule, auditLog string) {
	events, err := chart.ReadAudit(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range rules {
		if !slices.Contains(users, r.User) {
			users = append(users, r.User)
		}
	}
	requests := map[string]int{}
	for _, e := range events {
		if slices.Contains(users, e.User) {
			requests[e.User]++
		}
	}
	t.Logf("audit log: %d events, requests by the chart's ServiceAccounts: %v", len(events), requests)
	for _, e := range chart.Denied(events, users...) {
		t.Errorf("refused: %s %s %s (%s)", e.User, e.Verb, e.URI, e.Resource)
	}
	for _, p := range c.Processes() {
		if n := p.Name(); !strings.HasPrefix(n, "fairway-scheduler") && n != "fairway-webhook" && !strings.HasPrefix(n, "gpu-agent-") {
			continue
		}
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s logged a refusal: %.300s", p.Name(), line)
			}
		}
	}
	usage := chart.RuleUsage(rules, events)
	report := chart.FormatUsage(usage)
	t.Logf("what the chart grants and what was used:\n%s", report)
	if dir, err := cluster.ArtifactsDir(t); err == nil && os.MkdirAll(dir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(dir, "rbac-report.txt"), []byte(report), 0o644)
	}
	for _, u := range usage {
		if u.Unused() {
			t.Errorf("%s: %s %s.%s is granted but was never used, and the rule does not say why (\"# justified: %s — ...\" above it)",
				u.Role, u.Verb, u.Resource, u.Group, u.Verb)
		}
	}
}
