//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// chromiumPackage is the Debian package the browser test needs; .ci/run installs it.
const chromiumPackage = "chromium"

// TestConsole drives the web console (`fairway console --auth=token`) in Debian's chromium,
// headless, against a local cluster where fairway's scheduler and gpu-agents play a small
// version of the demo's story on 4 nodes of 8 H100s: 8 notebooks share 2 GPUs, team B's sweep
// borrows above its guarantee, team A's 16-GPU Ray gang reclaims from it, a 32-GPU gang waits
// with its reason, an inference Deployment serves. An administrator signs in with a token and
// checks each page for what matters, a team-b user sees team-b only (no pod of another
// namespace anywhere in the pages' HTML), and an open page shows a pod that binds, without a
// reload, within 2 s. Screenshots of every page go to _output/console/.
func TestConsole(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console's browser test needs Debian's %q package (apt-get install -y %s; .ci/run installs it): %v", chromiumPackage, chromiumPackage, err)
	}
	ctx := t.Context()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(4)}})
	s, err := stack.Start(ctx, c, stack.Options{Binary: bin, NoWebhook: true, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	shots := filepath.Join(root, "_output", "console")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// The story's queues: a department with two teams, and the notebooks'.
	for _, ns := range []string{"team-a", "team-b", "notebooks"} {
		newNamespace(t, c, ns)
	}
	gpus := func(n string) *fairwayv1.ResourceQuota {
		q := resource.MustParse(n)
		return &fairwayv1.ResourceQuota{Quota: &q}
	}
	mustCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: gpus("24")}}})
	mustCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: fairwayv1.QueueSpec{Parent: "research", Namespaces: []string{"team-a"}, Resources: fairwayv1.QueueResources{GPU: gpus("16")}}})
	mustCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}, Spec: fairwayv1.QueueSpec{Parent: "research", Namespaces: []string{"team-b"}, Resources: fairwayv1.QueueResources{GPU: gpus("8")}}})
	mustCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "notebooks"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{"notebooks"}, Resources: fairwayv1.QueueResources{GPU: gpus("4")}}})

	// Act 1: notebooks share GPUs; team B's sweep borrows.
	notebook := func(name string) *corev1.Pod {
		return schedPod("notebooks", name, "notebooks").Fraction("0.25").Priority(fairwayv1.PriorityClassInteractive).
			Annotate(fairwayv1.WorkloadKindAnnotation, string(fairwayv1.KindNotebook)).Label(fairwayv1.FrameworkLabel, "jupyterhub").Obj()
	}
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"} {
		mustCreate(t, c, notebook("jupyter-"+u))
	}
	for i := range 18 {
		mustCreate(t, c, schedPod("team-b", fmt.Sprintf("sweep-%02d", i), "team-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).
			Annotate(fairwayv1.WorkloadKindAnnotation, string(fairwayv1.KindWorkflowStep)).Annotate(fairwayv1.ArgoNodeNameAnnotation, fmt.Sprintf("sweep.trial(%d)", i)).
			Label(argo.WorkflowLabel, "sweep").Label(fairwayv1.FrameworkLabel, "argo").Obj())
	}
	waitBound(t, c, "notebooks", 8)
	waitBound(t, c, "team-b", 18)

	// Act 2: team A's 16-GPU Ray gang claims its guarantee; a 32-GPU gang waits; inference serves.
	for i, role := range []string{"head", "worker"} {
		mustCreate(t, c, schedPod("team-a", fmt.Sprintf("llm-%s-%d", role, i), "team-a").GPUs(8).Gang("llm", 2).Priority(fairwayv1.PriorityClassTraining).
			Annotate(fairwayv1.WorkloadKindAnnotation, string(fairwayv1.KindRay)).Label(kuberay.ClusterLabel, "llm").Label(kuberay.NodeTypeLabel, role).
			Label(fairwayv1.FrameworkLabel, "ray").Obj())
	}
	waitBound(t, c, "team-a", 2)
	for i := range 4 {
		mustCreate(t, c, schedPod("team-a", fmt.Sprintf("pretrain-%d", i), "team-a").GPUs(8).Gang("pretrain", 4).Priority(fairwayv1.PriorityClassTraining).
			Annotate(fairwayv1.WorkloadKindAnnotation, string(fairwayv1.KindTraining)).Obj())
	}
	tmpl := schedPod("team-a", "", "team-a").GPUs(1).Priority(fairwayv1.PriorityClassInference).
		Annotate(fairwayv1.WorkloadKindAnnotation, string(fairwayv1.KindInference)).Label("app", "serve").Obj()
	mustCreate(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serve"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}}})
	eventually(t, 90*time.Second, "a Reclaim of team B's sweep, and the 32-GPU gang waiting with a reason", func(ctx context.Context) (bool, error) {
		evs, err := c.Clientset().EventsV1().Events("team-b").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		reclaimed := false
		for _, e := range evs.Items {
			reclaimed = reclaimed || e.Reason == string(fairwayv1.EvictReclaim)
		}
		var pg fairwayv1.PodGroup
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "pretrain"}, &pg); err != nil {
			return false, nil
		}
		_, waits := unschedulableReason(&pg)
		return reclaimed && waits, fmt.Errorf("reclaimed %v, pretrain waits with a reason %v", reclaimed, waits)
	})

	// Identities: an administrator, and alice, who may view team-b only.
	adminToken := serviceAccountToken(t, c, "default", "console-admin", &rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, "")
	aliceToken := serviceAccountToken(t, c, "team-b", "alice", &rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}, "team-b")

	ports, err := cluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	base := "http://" + addr
	if _, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-console", Path: bin, Args: []string{"console", "--auth=token", "--listen=" + addr,
		"--kubeconfig=" + c.Kubeconfig(), "--history-interval=1s"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the console serving", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	browse := func(t *testing.T, token string) context.Context {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
			chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
		actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
		t.Cleanup(cancel)
		bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
		t.Cleanup(cancel)
		// The first action starts the browser and ties it to the context it runs in: bctx, not
		// a shorter one.
		if err := chromedp.Do(bctx); err != nil {
			t.Fatalf("starting chromium: %v", err)
		}
		lctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(lctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SetValue(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("sign-in")),
			chromedp.WaitVisible(chromedp.ID("user"))); err != nil {
			body, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("signing in: %v; the browser shows %s", err, body)
		}
		return bctx
	}
	// page opens path, waits until every selector is on it, saves a screenshot and returns the
	// page's HTML.
	page := func(t *testing.T, bctx context.Context, path, shot string, selectors ...string) string {
		t.Helper()
		tctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		actions := []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + path)}
		for _, s := range selectors {
			actions = append(actions, chromedp.WaitReady(chromedp.CSS(s)))
		}
		if err := chromedp.Do(tctx, actions...); err != nil {
			body, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: waiting for %q: %v; the page shows:\n%s", path, selectors, err, body)
		}
		html, err := chromedp.Run(tctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, shot), png, 0o644); err != nil {
			t.Fatal(err)
		}
		return html
	}

	t.Run("Administrator", func(t *testing.T) {
		b := browse(t, adminToken)
		page(t, b, "/", "overview.png",
			`#gpu-types tr[data-type="H100"]`,
			`#queues tr[data-queue="team-b"] td.borrowing`,
			`#queues tr[data-queue="research"]`,
			`#waiting tr.waiting-row[data-name="pretrain"]`,
			`#evictions tr.eviction[data-reason="Reclaim"]`)
		page(t, b, "/queues", "queues.png", `#queue-tree tr[data-queue="team-a"][data-resource="gpu"]`, `#queue-tree tr[data-queue="notebooks"]`)
		page(t, b, "/queues/team-b", "queue-team-b.png", `#charts svg.chart.gpu rect.bar`, `#queue-amounts tr[data-resource="gpu"] td.borrowing`)
		html := page(t, b, "/workloads", "workloads.png",
			`details.workload[data-kind="Notebook"][data-name="jupyter-alice"]`,
			`details.workload[data-kind="Argo Workflow"][data-name="sweep"]`,
			`details.workload[data-kind="RayCluster"][data-name="llm"][data-state="Running"]`,
			`details.workload[data-kind="Gang"][data-name="pretrain"][data-state="Waiting"] p.hint`,
			`details.workload[data-kind="Inference"][data-name="serve"]`)
		if !strings.Contains(html, "(gang, min 4)") || !strings.Contains(html, "head: 1 running") {
			t.Errorf("the Workloads page does not show the gangs' shapes")
		}
		page(t, b, "/nodes", "nodes.png", `.gpu.shared [data-holder="notebooks/jupyter-alice"]`, `.gpu.whole [data-holder="team-a/llm-head-0"]`)
		page(t, b, "/why?q=team-a/pretrain", "why.png", `section.explanation[data-object="PodGroup/team-a/pretrain"] p.hint`)

		// Live: a notebook created now appears on the open Nodes page once it binds.
		if err := chromedp.Do(b, chromedp.Navigate(base+"/nodes"), chromedp.WaitReady(chromedp.CSS(`.gpu`))); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(b, chromedp.Evaluate[string](`window.__notReloaded = "yes"`)); err != nil {
			t.Fatal(err)
		}
		live := notebook("jupyter-live")
		mustCreate(t, c, live)
		var bound time.Time
		eventually(t, 90*time.Second, "jupyter-live bound", func(ctx context.Context) (bool, error) {
			err := c.Client().Get(ctx, client.ObjectKeyFromObject(live), live)
			if err == nil && live.Spec.NodeName != "" {
				bound = time.Now()
			}
			return err == nil && live.Spec.NodeName != "", err
		})
		var seen time.Time
		for deadline := bound.Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			n, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('[data-holder="notebooks/jupyter-live"]').length`))
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				seen = time.Now()
				break
			}
		}
		marker, _ := chromedp.Run(b, chromedp.Evaluate[string](`window.__notReloaded || "reloaded"`))
		switch {
		case seen.IsZero():
			t.Fatalf("the open Nodes page did not show jupyter-live within 10 s of its binding")
		case marker != "yes":
			t.Errorf("the page was reloaded, not updated in place")
		case seen.Sub(bound) > 2*time.Second:
			t.Errorf("the open Nodes page showed jupyter-live %v after it bound; want within 2 s", seen.Sub(bound).Round(time.Millisecond))
		default:
			t.Logf("the open Nodes page showed jupyter-live %v after it bound", seen.Sub(bound).Round(time.Millisecond))
		}
		page(t, b, "/nodes", "nodes-live.png", `[data-holder="notebooks/jupyter-live"]`)
	})

	t.Run("RestrictedUser", func(t *testing.T) {
		b := browse(t, aliceToken)
		var others []string
		for _, ns := range []string{"team-a", "notebooks"} {
			var pods corev1.PodList
			if err := c.Client().List(ctx, &pods, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				others = append(others, p.Name)
			}
		}
		if len(others) < 10 {
			t.Fatalf("only %d pods in team-a and notebooks: the scenario did not run", len(others))
		}
		pages := map[string][]string{
			"/":                          {`#sees`, `#queues tr[data-queue="team-b"]`},
			"/queues":                    {`#queue-tree tr[data-queue="team-b"]`},
			"/workloads":                 {`details.workload[data-namespace="team-b"]`},
			"/nodes":                     {`#nodes-forbidden`},
			"/why?q=team-a/pretrain":     {`#not-found`},
			"/why?q=pod/team-b/sweep-00": {`#main`},
		}
		for path, sel := range pages {
			shot := "restricted-" + strings.Trim(strings.NewReplacer("/", "-", "?", "-", "=", "-").Replace(path), "-") + ".png"
			if path == "/" {
				shot = "restricted-overview.png"
			}
			html := page(t, b, path, shot, sel...)
			if !strings.Contains(html, "sees namespace team-b") {
				t.Errorf("%s: the header does not say alice sees namespace team-b", path)
			}
			for _, name := range others {
				if strings.Contains(html, name) {
					t.Errorf("%s shows %q, a pod of another namespace, to alice", path, name)
				}
			}
			for _, q := range []string{`data-queue="team-a"`, `data-queue="notebooks"`, `data-namespace="team-a"`, `data-namespace="notebooks"`} {
				if strings.Contains(html, q) {
					t.Errorf("%s shows %s to alice", path, q)
				}
			}
		}
	})

	// Local mode, as `make demo` and `fairway console --kubeconfig` run it: the kubeconfig's user
	// (here the cluster admin), asked about with SelfSubjectAccessReviews, no sign-in.
	t.Run("LocalMode", func(t *testing.T) {
		ports, err := cluster.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		local := fmt.Sprintf("127.0.0.1:%d", ports[0])
		if _, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-console-local", Path: bin, Args: []string{"console", "--auth=local",
			"--listen=" + local, "--kubeconfig=" + c.Kubeconfig()}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the local console's Overview", func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+local+"/workloads", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(b), "sees all namespaces") &&
				strings.Contains(string(b), `data-name="jupyter-alice"`), fmt.Errorf("HTTP %d", resp.StatusCode)
		})
	})
}

// unschedulableReason is a PodGroup's Unschedulable reason, when it has one.
func unschedulableReason(pg *fairwayv1.PodGroup) (string, bool) {
	for _, c := range pg.Status.Conditions {
		if c.Type == fairwayv1.PodGroupConditionUnschedulable && c.Status == metav1.ConditionTrue && c.Reason != "" {
			return c.Reason, true
		}
	}
	return "", false
}

// serviceAccountToken creates a ServiceAccount bound to role (in namespace bindIn, or cluster-wide
// when empty) and returns a token for it from the TokenRequest API: what `kubectl create token`
// gives a user.
func serviceAccountToken(t *testing.T, c *cluster.Cluster, namespace, name string, role *rbacv1.RoleRef, bindIn string) string {
	t.Helper()
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}}
	if bindIn == "" {
		mustCreate(t, c, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "console-test-" + name}, RoleRef: *role, Subjects: subject})
	} else {
		mustCreate(t, c, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: bindIn, Name: "console-test-" + name}, RoleRef: *role, Subjects: subject})
	}
	tr, err := c.Clientset().CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}
