//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestWebhook runs `fairway webhook` against a real local cluster and checks, through the real API
// server calling it over TLS, what it does to pods: plain pods, bad input, access control, the
// namespaces it serves, and the pods of the real Argo workflow-controller (plain and
// Kubeflow-Pipelines-shaped workflows), the real KubeRay operator and JupyterHub's KubeSpawner.
// The subtests share one cluster and one webhook.
func TestWebhook(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	// kube-scheduler runs too: KFP's drivers are left to it (Queue spec.admit).
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(2)}, KubeScheduler: true})
	createPriorityClasses(t, c)
	createNamespace(t, c, fairwayNamespace, nil)
	for _, ns := range []string{"team-a", "team-b", "team-ray", "jhub", "elsewhere"} {
		createNamespace(t, c, ns, nil)
	}
	createQueue(t, c, "team-a", "team-a")
	createQueue(t, c, "team-b", "team-b")
	createQueue(t, c, "ray-team", "team-ray")
	createQueue(t, c, "notebooks", "jhub")
	// Notebooks are non-preemptible: they run only within the queue's guaranteed quota.
	notebooks := &fairwayv1.Queue{}
	if err := c.Client().Get(t.Context(), client.ObjectKey{Name: "notebooks"}, notebooks); err != nil {
		t.Fatal(err)
	}
	oneGPU := resource.MustParse("1")
	notebooks.Spec.Resources.GPU = &fairwayv1.ResourceQuota{Quota: &oneGPU}
	if err := c.Client().Update(t.Context(), notebooks); err != nil {
		t.Fatal(err)
	}
	startWebhook(t, c, "team-a")
	t.Logf("cluster and webhook ready after %v", time.Since(begin).Round(time.Millisecond))

	t.Run("Configuration", func(t *testing.T) { testConfiguration(t, c) })
	t.Run("PlainPodWithGPUShare", func(t *testing.T) { testPlainPod(t, c) })
	t.Run("Denials", func(t *testing.T) { testDenials(t, c) })
	t.Run("LeftAlone", func(t *testing.T) { testLeftAlone(t, c) })
	t.Run("Guard", func(t *testing.T) { testGuard(t, c) })
	t.Run("NewQueueIsServed", func(t *testing.T) { testNewQueue(t, c) })
	t.Run("JupyterHub", func(t *testing.T) { testJupyterHub(t, c) })

	// The framework tests need pods to run: Argo creates a step's pod only after the one before
	// finished.
	startScheduler(t, c)
	t.Run("ArgoWorkflow", func(t *testing.T) { testArgoWorkflow3Steps(t, c) })
	t.Run("ArgoRetriesMakeRecreatable", func(t *testing.T) { testArgoRecreatable(t, c) })
	t.Run("KFPWorkflow", func(t *testing.T) { testKFPWorkflow(t, c) })
	t.Run("KubeRay", func(t *testing.T) { testKubeRay(t, c) })
	t.Run("NotebooksShareOneGPU", func(t *testing.T) { testNotebooksShareOneGPU(t, c) })
}

// testConfiguration: the configuration the webhook keeps has the CA bundle, the served
// namespaces, and the safety settings the issue asks for.
func testConfiguration(t *testing.T, c *cluster.Cluster) {
	mwc := webhookConfiguration(t, c)
	if len(mwc.Webhooks) != 6 {
		t.Fatalf("want 6 webhooks (guard, pods, bypass, immutable pods, workflows, immutable workflows), got %d", len(mwc.Webhooks))
	}
	// The API server compiled its match condition (it refuses a configuration whose CEL does not).
	if b := mwc.Webhooks[2]; b.Name != mutatingwebhook.BypassWebhookName || ptr.Deref(b.FailurePolicy, "") != "Fail" || len(b.MatchConditions) != 1 {
		t.Errorf("webhook %s failurePolicy %v match conditions %d, want %s with Fail and one", b.Name, b.FailurePolicy, len(b.MatchConditions), mutatingwebhook.BypassWebhookName)
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("webhook %s has no CA bundle", w.Name)
		}
		if ptr.Deref(w.TimeoutSeconds, 0) != 5 || ptr.Deref(w.SideEffects, "") != "None" {
			t.Errorf("webhook %s: timeout %v, sideEffects %v", w.Name, w.TimeoutSeconds, w.SideEffects)
		}
	}
	pods := mwc.Webhooks[1]
	if pods.Name != mutatingwebhook.PodsWebhookName || ptr.Deref(pods.FailurePolicy, "") != "Fail" {
		t.Errorf("webhook %s failurePolicy %v, want %s with Fail", pods.Name, pods.FailurePolicy, mutatingwebhook.PodsWebhookName)
	}
	served := pods.NamespaceSelector.MatchExpressions[0]
	if served.Key != mutatingwebhook.NamespaceNameLabel || strings.Join(served.Values, ",") != "jhub,team-a,team-b,team-ray" {
		t.Errorf("served namespaces selector %+v", served)
	}
	// The API server's defaulting must not make the webhook rewrite its configuration forever.
	time.Sleep(2 * time.Second)
	if again := webhookConfiguration(t, c); again.ResourceVersion != mwc.ResourceVersion {
		t.Errorf("the webhook configuration keeps changing: resourceVersion %s, then %s", mwc.ResourceVersion, again.ResourceVersion)
	}
}

// testPlainPod: a bare pod asking for half a GPU through the Run:ai annotation.
func testPlainPod(t *testing.T, c *cluster.Cluster) {
	pod := plainPod("half-gpu")
	pod.Namespace = "team-a"
	pod.Annotations = map[string]string{"gpu-fraction": "0.50"}
	if err := c.Client().Create(t.Context(), pod); err != nil {
		t.Fatalf("creating the pod: %v", err)
	}
	checkPod(t, pod, expectPod{queue: "team-a", framework: "none", kind: "pod", podGroup: "pod-half-gpu", minMember: 1,
		priority: ptr.To[int32](0), gpuFraction: "0.5", gpuContainer: "c"})
}

// testDenials: bad input comes back from the API server with the webhook's message.
func testDenials(t *testing.T, c *cluster.Cluster) {
	gpu := corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
	cases := map[string]struct {
		ann, labels map[string]string
		limits      corev1.ResourceList
		want        string
	}{
		"fraction above 1":      {ann: map[string]string{fairwayv1.GPUFractionAnnotation: "1.5"}, want: `fairway.dev/gpu-fraction "1.5": must be a decimal greater than 0 and less than 1 (e.g. 0.5)`},
		"fraction not a number": {ann: map[string]string{"gpu-fraction": "half"}, want: `gpu-fraction "half": must be a decimal`},
		"fraction and memory":   {ann: map[string]string{fairwayv1.GPUFractionAnnotation: "0.5", fairwayv1.GPUMemoryAnnotation: "1000"}, want: "not both"},
		"fraction and whole GPUs": {ann: map[string]string{fairwayv1.GPUFractionAnnotation: "0.5"}, limits: gpu,
			want: `cannot be combined with container "c" asking for 1 whole GPU`},
		"memory above the largest GPU": {ann: map[string]string{fairwayv1.GPUMemoryAnnotation: "100000"}, want: "must be at most 81559 MiB"},
		"unknown queue":                {labels: map[string]string{fairwayv1.QueueLabel: "nope"}, want: `fairway.dev/queue "nope": no such queue; pods in namespace "team-a" may use queue "team-a"`},
		"another team's queue":         {labels: map[string]string{fairwayv1.KAIQueueLabel: "team-b"}, want: `kai.scheduler/queue "team-b": queue "team-b" does not serve namespace "team-a"`},
		"misspelt share key": {ann: map[string]string{"fairway.dev/gpu-fracton": "0.25"},
			want: "unknown annotation key fairway.dev/gpu-fracton; did you mean fairway.dev/gpu-fraction?"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := plainPod("denied")
			pod.Namespace = "team-a"
			pod.Annotations, pod.Labels = tc.ann, tc.labels
			pod.Spec.Containers[0].Resources.Limits = tc.limits
			err := c.Client().Create(t.Context(), pod)
			prefix := `admission webhook "` + mutatingwebhook.PodsWebhookName + `" denied the request: `
			if err == nil || !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create error = %v, want %q%q", err, prefix, tc.want)
			}
		})
	}
	// GPUs outside fairway in a served namespace: refused by the bypass webhook, which the pods
	// webhook never saw (opted out); the same pod where no queue serves is left alone.
	optedOut := func(ns string) *corev1.Pod {
		pod := plainPod("gpus-outside")
		pod.Namespace, pod.Labels = ns, map[string]string{fairwayv1.IgnoreLabel: "true"}
		pod.Spec.Containers[0].Resources.Limits = gpu
		return pod
	}
	err := c.Client().Create(t.Context(), optedOut("team-a"), client.DryRunAll)
	want := `admission webhook "` + mutatingwebhook.BypassWebhookName + `" denied the request: pod gpus-outside asks for 1 nvidia.com/gpu (container c) in namespace team-a, which a fairway queue serves, but is opted out of fairway (label fairway.dev/ignore=true)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an opted-out GPU pod in a served namespace: %v, want %q", err, want)
	}
	if err := c.Client().Create(t.Context(), optedOut("elsewhere"), client.DryRunAll); err != nil {
		t.Errorf("an opted-out GPU pod where no queue serves: %v", err)
	}
}

// testLeftAlone: pods outside served namespaces, opted-out pods and kube-system pods never reach
// the webhook (or come back unchanged).
func testLeftAlone(t *testing.T, c *cluster.Cluster) {
	cases := map[string]struct {
		ns     string
		labels map[string]string
	}{
		"namespace no queue serves": {ns: "elsewhere"},
		"opted-out pod":             {ns: "team-a", labels: map[string]string{fairwayv1.IgnoreLabel: "true"}},
		"kube-system":               {ns: "kube-system"},
		"fairway's namespace":       {ns: fairwayNamespace},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := plainPod("left-alone")
			pod.Namespace, pod.Labels = tc.ns, tc.labels
			if err := c.Client().Create(t.Context(), pod, client.DryRunAll); err != nil {
				t.Fatalf("create: %v", err)
			}
			if pod.Spec.SchedulerName != corev1.DefaultSchedulerName || pod.Labels[fairwayv1.ManagedLabel] != "" {
				t.Errorf("pod was rewritten: scheduler %q, labels %v", pod.Spec.SchedulerName, pod.Labels)
			}
		})
	}
}

// testGuard: naming fairway's scheduler does not get a pod past the webhook.
func testGuard(t *testing.T, c *cluster.Cluster) {
	cases := map[string]struct {
		ns     string
		labels map[string]string
		want   string
	}{
		"namespace no queue serves": {ns: "elsewhere", want: `namespace "elsewhere" is not served by any fairway queue`},
		"opted out":                 {ns: "team-a", labels: map[string]string{fairwayv1.IgnoreLabel: "true"}, want: "label fairway.dev/ignore=true opts the pod out of fairway"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := plainPod("guarded")
			pod.Namespace = tc.ns
			pod.Spec.SchedulerName = fairwayv1.SchedulerName
			// Another team's queue: what a pod that skipped the defaulter would try to spend.
			pod.Labels = map[string]string{fairwayv1.QueueLabel: "team-b"}
			for k, v := range tc.labels {
				pod.Labels[k] = v
			}
			err := c.Client().Create(t.Context(), pod, client.DryRunAll)
			prefix := `admission webhook "` + mutatingwebhook.GuardWebhookName + `" denied the request: `
			if err == nil || !strings.Contains(err.Error(), prefix+tc.want) {
				t.Errorf("create error = %v, want %q", err, prefix+tc.want)
			}
		})
	}
}

// testNewQueue: a namespace joins the webhook as soon as a Queue lists it.
func testNewQueue(t *testing.T, c *cluster.Cluster) {
	createNamespace(t, c, "team-late", nil)
	gpu := corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
	pod := plainPod("before")
	pod.Namespace = "team-late"
	pod.Spec.Containers[0].Resources.Limits = gpu
	if err := c.Client().Create(t.Context(), pod, client.DryRunAll); err != nil || pod.Spec.SchedulerName == fairwayv1.SchedulerName {
		t.Fatalf("before any queue serves team-late: err %v, scheduler %q", err, pod.Spec.SchedulerName)
	}
	createQueue(t, c, "late", "team-late")
	begin := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod := plainPod("after")
		pod.Namespace = "team-late"
		pod.Spec.Containers[0].Resources.Limits = gpu
		if err := c.Client().Create(ctx, pod, client.DryRunAll); err != nil {
			return false, nil
		}
		return pod.Labels[fairwayv1.QueueLabel] == "late", nil
	})
	if err != nil {
		t.Fatalf("pods in team-late are not handed to fairway after queue late lists it: %v", err)
	}
	t.Logf("namespace served %v after its queue was created", time.Since(begin).Round(time.Millisecond))
}

// testJupyterHub: notebooks as KubeSpawner 7.x under z2jh builds them (the JupyterHub adapter's
// fixture), three at a third of a GPU each. The user-scheduler is replaced, the share normalized
// to 0.333, and the API server resolves the interactive class the webhook set to priority 100:
// non-preemptible. This also pins down the admission order: the Priority plugin runs before the
// webhook (the pod arrives with priority 0) and again after it; had the webhook kept that 0, the
// API server would refuse the pod with "the integer value of priority (0) must not be provided in
// pod spec; priority admission controller computed 100 from the given PriorityClass name" (seen
// on kube-apiserver 1.37.2).
func testJupyterHub(t *testing.T, c *cluster.Cluster) {
	for _, user := range []string{"alice", "bob", "carol"} {
		pod := notebookPod(t, user)
		if err := c.Client().Create(t.Context(), pod); err != nil {
			t.Fatalf("creating %s: %v", pod.Name, err)
		}
		checkPod(t, pod, expectPod{queue: "notebooks", framework: "jupyterhub", kind: "notebook", podGroup: "nb-" + pod.Name,
			minMember: 1, priorityClass: fairwayv1.PriorityClassInteractive, priority: ptr.To[int32](fairwayv1.NonPreemptiblePriority),
			gpuFraction: "0.333", gpuContainer: "notebook"})
		if pod.Spec.PreemptionPolicy == nil {
			t.Errorf("pod %s: the API server did not resolve preemptionPolicy from the class", pod.Name)
		}
	}
}

// testNotebooksShareOneGPU: the three notebooks land on one GPU and are never preempted. Needs
// fairway's scheduler, which places GPU shares.
func testNotebooksShareOneGPU(t *testing.T, c *cluster.Cluster) {
	var gpu string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		pods := podsOf(t, c, "jhub", map[string]string{"component": "singleuser-server"})
		gpus := map[string]bool{}
		for _, p := range pods {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
			gpus[p.Spec.NodeName+"/"+p.Annotations[fairwayv1.GPUIndexAnnotation]] = true
		}
		for g := range gpus {
			gpu = g
		}
		return len(pods) == 3 && len(gpus) == 1, nil
	})
	if err != nil {
		t.Fatalf("the three notebooks do not run on one GPU: %s", describePods(podsOf(t, c, "jhub", nil)))
	}
	t.Logf("three notebooks share GPU %s", gpu)
	// A burst of preemptible training in the same queue must not evict them.
	for i := range 8 {
		p := plainPod("train-" + string(rune('a'+i)))
		p.Namespace = "jhub"
		p.Labels = map[string]string{"app": "train"}
		p.Spec.PriorityClassName = fairwayv1.PriorityClassTraining
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}
		if err := c.Client().Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Second)
	for _, p := range podsOf(t, c, "jhub", map[string]string{"component": "singleuser-server"}) {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Errorf("notebook %s was preempted: %s", p.Name, p.Status.Phase)
		}
	}
}

// notebookPod is the z2jh single-user pod of the JupyterHub adapter's fixture, for another user.
func notebookPod(t *testing.T, user string) *corev1.Pod {
	pod := loadFixture(t, "adapters/jupyterhub/testdata/z2jh-notebook.yaml")
	pod.Name = "jupyter-" + user
	pod.Namespace = "jhub"
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		m["hub.jupyter.org/username"] = user
	}
	pod.Spec.Volumes = nil // no PVC in this cluster
	pod.Spec.Containers[0].VolumeMounts = nil
	return pod
}
