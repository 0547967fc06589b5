//go:build e2enodes

package e2enodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/nodes"
)

// Images `make images` builds (hack/images/lib.sh names the same): fairway's own, and those of
// the tools' own pods (hack/images/standins.sh): Argo's real executor, and stand-ins for KFP's
// driver and launcher and for Ray's CLI, whose images no registry here serves.
const (
	fairwayImage  = "ghcr.io/fairway-sched/fairway:dev"
	argoexecImage = "fairway.local/argoexec:dev"
	kfpImage      = "fairway.local/kfp-standin:dev"
	rayImage      = "fairway.local/ray-standin:dev"
)

// TestChartOnRealNodes installs fairway as a user does, `helm install` of charts/fairway with the
// image `make images` built, on three real nodes, and runs the tools' own work on it: a Kubeflow
// Pipelines run (examples/kubeflow-pipelines/workflow.yaml, through the real Argo controller and
// executor) and a RayCluster (examples/ray/raycluster.yaml, through the real KubeRay operator).
// The operators stay local processes; everything of fairway runs in the chart's pods.
//
// kwok could show none of it: the chart's Deployments and DaemonSet only dry-run there, so an
// image that does not start, a probe that never passes, in-cluster credentials or the webhook's
// own TLS that the API server refuses, RBAC the pods lack at run time, and an agent that cannot
// read the kubelet's PodResources socket through the chart's hostPath all pass it. Here the
// scheduler's leader is a chart pod, the API server calls the webhook's pods over the TLS the
// webhook set up itself, the agents label their nodes from go-nvml's mock inside the container,
// and the workloads' containers run: KFP's driver writes the executor's GPU patch, Argo's
// executor reports outputs through the API server, Ray's probes pass, and every GPU container
// sees the devices the kubelet gave it.
//
// The nodes have no kube-proxy and no cluster DNS: the kubernetes Service is routed to the API
// server as kube-proxy would (nodes.Config.KubernetesService), the API server reaches webhook
// pods at their endpoints (--enable-aggregator-routing), and what needs a Service's DNS name
// (Ray workers' wait for the head's GCS) is stood in for (hack/images/ray/ray). The workloads'
// CPU and memory requests are scaled to the test machine; their GPUs are unchanged.
func TestChartOnRealNodes(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{KubeScheduler: true,
		APIServerFlags: []string{"--enable-aggregator-routing=true"}})
	ns := nodes.StartT(t, c, nodes.Config{Count: 3, KubernetesService: true,
		// The chart's agents run on GPU nodes, as NVIDIA's feature discovery labels them.
		Labels:       map[string]string{"nvidia.com/gpu.present": "true"},
		ExtraImages:  []string{fairwayImage, argoexecImage, kfpImage, rayImage},
		ReadyTimeout: 5 * time.Minute})
	ctx := t.Context()

	begin := time.Now()
	helmInstall(t, c,
		"image.tag=dev", "image.pullPolicy=Never",
		// go-nvml's mock H100 node inside the agent's container, on the default runtime.
		"agent.nvml=mock:dgxh100", "agent.runtimeClassName=",
		"scheduler.reservation.image="+pauseImage)
	t.Logf("helm install --wait: every Deployment and the DaemonSet ready after %s", time.Since(begin).Round(time.Second))

	t.Run("Components", func(t *testing.T) {
		cs := c.Clientset()
		for _, name := range []string{"fairway-scheduler", "fairway-webhook"} {
			d, err := cs.AppsV1().Deployments(chart.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Status.ReadyReplicas != *d.Spec.Replicas {
				t.Errorf("Deployment %s: %d of %d replicas ready", name, d.Status.ReadyReplicas, *d.Spec.Replicas)
			}
		}
		// helm's --wait counts a DaemonSet ready with maxUnavailable (10%, rounded up: 1 of 3)
		// agents still starting.
		eventually(t, time.Minute, "an agent ready on each node", func(ctx context.Context) (bool, error) {
			ds, err := cs.AppsV1().DaemonSets(chart.Namespace).Get(ctx, "fairway-agent", metav1.GetOptions{})
			return err == nil && ds.Status.NumberReady == int32(len(ns.Nodes)), nil
		})
		// The leader is one of the chart's scheduler pods.
		pods := podsOf(t, c, chart.Namespace, map[string]string{"app.kubernetes.io/component": "scheduler"})
		eventually(t, time.Minute, "a scheduler pod holding the leader Lease", func(ctx context.Context) (bool, error) {
			var lease coordinationv1.Lease
			if err := c.Client().Get(ctx, client.ObjectKey{Namespace: chart.Namespace, Name: "fairway-scheduler"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
				return false, nil
			}
			for _, p := range pods {
				if strings.HasPrefix(*lease.Spec.HolderIdentity, p.Name) {
					t.Logf("leader: %s", *lease.Spec.HolderIdentity)
					return true, nil
				}
			}
			return false, nil
		})
		// Each agent labelled its node from the mock NVML inside its container.
		for _, n := range ns.Nodes {
			eventually(t, time.Minute, "node "+n.Name+" labelled by its agent", func(ctx context.Context) (bool, error) {
				node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				return err == nil && node.Labels[fairwayv1.GPUTypeLabel] == "H100" && node.Labels[fairwayv1.GPUCountLabel] == "8", nil
			})
		}
	})

	t.Run("KubeflowPipelinesRun", func(t *testing.T) { kfpRun(t, c, ns) })
	t.Run("RayCluster", func(t *testing.T) { rayCluster(t, c, ns) })
}

// helmInstall runs the pinned helm's `install --wait` of charts/fairway into chart.Namespace.
func helmInstall(t *testing.T, c *cluster.Cluster, set ...string) {
	t.Helper()
	helm, err := chart.Helm()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := chart.Dir()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"install", "fairway", dir, "--namespace", chart.Namespace, "--create-namespace",
		"--kubeconfig", c.Kubeconfig(), "--wait", "--timeout", "4m"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		pods, _ := c.Clientset().CoreV1().Pods(chart.Namespace).List(context.Background(), metav1.ListOptions{})
		var b strings.Builder
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "\n  %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, s := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, " [%s ready=%v restarts=%d %s]", s.Name, s.Ready, s.RestartCount, containerState(s.State))
				if !s.Ready {
					lines := int64(15)
					logs, _ := c.Clientset().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
						Container: s.Name, Previous: s.RestartCount > 0, TailLines: &lines}).DoRaw(context.Background())
					fmt.Fprintf(&b, "\n    last log lines:\n%s", logs)
				}
			}
		}
		t.Fatalf("helm install: %v\n%s\npods of %s:%s", err, out, chart.Namespace, b.String())
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason + ": " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %s (%d): %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
	case s.Running != nil:
		return "running"
	}
	return "unknown"
}

// kfpRun runs the Kubeflow Pipelines example through the real Argo controller with Argo's real
// executor and the stand-in driver and launcher: drivers (left to kube-scheduler) write the
// executors' pod-spec patches, train's executor gets its whole GPU and evaluate's its half from
// fairway, and the run Succeeds.
func kfpRun(t *testing.T, c *cluster.Cluster, ns *nodes.Nodes) {
	ctx := t.Context()
	const namespace = "kubeflow-user-alice"
	newNamespace(t, c, namespace)
	queue(t, c, "vision", "", namespace)
	// KFP runs its pods as pipeline-runner, which needs what Argo's emissary executor needs: its
	// Role as Argo's manifests give it.
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-runner", Namespace: namespace}})
	argoExecutorRole(t, c, namespace, "pipeline-runner")
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{Args: []string{"--executor-image=" + argoexecImage}}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}

	objs, err := examples.Objects("kubeflow-pipelines", "workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wf := objs[0]
	wf.SetNamespace(namespace)
	onTestNodes(t, wf)
	mustCreate(t, c, wf)
	t.Logf("run %s submitted", wf.GetName())
	sel := map[string]string{argo.WorkflowLabel: wf.GetName()}

	var phase string
	eventually(t, 6*time.Minute, "the run to end", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: wf.GetName()}, wf); err != nil {
			return false, nil
		}
		phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
		return phase == "Succeeded" || phase == "Failed" || phase == "Error", nil
	})
	pods := podsOf(t, c, namespace, sel)
	if phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		t.Fatalf("run ended %s (%s); pods:%s", phase, msg, describe(pods))
	}
	gpus := 0
	for i := range pods {
		p := &pods[i]
		role := kfp.PodRole(p)
		task := p.Annotations[kfp.NodeNameAnnotation]
		switch {
		case role == kfp.RoleDriver:
			if p.Spec.SchedulerName == fairwayv1.SchedulerName {
				t.Errorf("driver %s went to fairway; KFP's drivers are left to kube-scheduler", p.Name)
			}
		case strings.Contains(task, ".root.train.") || strings.Contains(task, ".root.evaluate."):
			if p.Spec.SchedulerName != fairwayv1.SchedulerName {
				t.Errorf("executor %s (%s) was not fairway's: schedulerName %q", p.Name, task, p.Spec.SchedulerName)
				continue
			}
			logs, err := containerLogs(ctx, c, p, "main")
			if err != nil {
				t.Errorf("logs of %s: %v", p.Name, err)
				continue
			}
			// evaluate's half GPU is fairway's share (on the device the kubelet gave its
			// reservation), train's whole GPU the device plugin's.
			share := p.Annotations[fairwayv1.GPUFractionAnnotation]
			half := strings.Contains(task, ".root.evaluate.")
			if half != (share == "0.5") || half == (gpusOf(p) == 1) {
				t.Errorf("executor %s (%s): share %q, %d whole GPUs", p.Name, task, share, gpusOf(p))
			}
			visible, devNodes := logValues(logs, "NVIDIA_VISIBLE_DEVICES="), logValues(logs, "GPU_DEVICE_NODES=")
			node := ns.Node(p.Spec.NodeName)
			if node == nil {
				t.Errorf("executor %s (%s) ran on %q, not a test node", p.Name, task, p.Spec.NodeName)
				continue
			}
			var gpu string
			if half {
				// A share's GPU comes from fairway's device plugin, as the device node of the GPU
				// the scheduler chose, and no variable names it.
				uuid := p.Annotations[fairwayv1.GPUUUIDAnnotation]
				minor := slices.Index(node.Plugin.DeviceIDs(), uuid)
				if minor < 0 || len(visible) > 0 || !slices.Equal(devNodes, []string{nodes.GPUDeviceNode(minor)}) {
					t.Errorf("executor %s (%s) on %q, a share of GPU %q: NVIDIA_VISIBLE_DEVICES %q, GPU device nodes %q, want none and that GPU's; log:\n%s",
						p.Name, task, p.Spec.NodeName, uuid, visible, devNodes, logs)
					continue
				}
				gpu = uuid + " as " + devNodes[0]
			} else {
				// A whole GPU is the (stand-in) NVIDIA device plugin's, named in its variable.
				if len(visible) != 1 || !slices.Contains(node.Plugin.DeviceIDs(), visible[0]) {
					t.Errorf("executor %s (%s) on %q sees GPUs %q, want one of that node's devices; log:\n%s", p.Name, task, p.Spec.NodeName, visible, logs)
					continue
				}
				gpu = visible[0] + " in NVIDIA_VISIBLE_DEVICES"
			}
			gpus++
			t.Logf("executor %s (%s) ran on %s with GPU %s (share %q)", p.Name, task, p.Spec.NodeName, gpu, share)
		}
	}
	if gpus != 2 {
		t.Errorf("%d GPU executors ran with their GPU, want 2 (train, evaluate); pods:%s", gpus, describe(pods))
	}
}

// argoExecutorRole binds sa to Argo's own executor Role (the module's
// manifests/quick-start/base/executor/emissary/executor-role.yaml).
func argoExecutorRole(t *testing.T, c *cluster.Cluster, namespace, sa string) {
	t.Helper()
	mod, err := cluster.ModuleDir(t.Context(), "argo", cluster.ArgoModule)
	if err != nil {
		t.Fatal(err)
	}
	objs := adaptertest.LoadObjects(t, filepath.Join(mod, "manifests", "quick-start", "base", "executor", "emissary", "executor-role.yaml"))
	for _, o := range objs {
		o.SetNamespace(namespace)
		mustCreate(t, c, o)
	}
	mustCreate(t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: objs[0].GetName()},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}},
	})
}

// onTestNodes points a KFP workflow's driver and launcher at the stand-in image and scales its
// components' CPU and memory to the test machine, keeping their GPUs (the accelerator fields).
func onTestNodes(t *testing.T, wf *unstructured.Unstructured) {
	t.Helper()
	templates, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	for _, tpl := range templates {
		m := tpl.(map[string]any)
		for _, field := range []string{"container", "initContainers"} {
			var ctrs []any
			switch v := m[field].(type) {
			case map[string]any:
				ctrs = []any{v}
			case []any:
				ctrs = v
			}
			for _, ctr := range ctrs {
				cm := ctr.(map[string]any)
				if img, _ := cm["image"].(string); strings.Contains(img, "kubeflow/kfp-") {
					cm["image"] = kfpImage
				}
			}
		}
	}
	if err := unstructured.SetNestedSlice(wf.Object, templates, "spec", "templates"); err != nil {
		t.Fatal(err)
	}
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	for _, p := range params {
		pm := p.(map[string]any)
		if name, _ := pm["name"].(string); !strings.HasPrefix(name, "implementations-") {
			continue
		}
		var impl map[string]any
		if err := json.Unmarshal([]byte(pm["value"].(string)), &impl); err != nil {
			t.Fatal(err)
		}
		if res, ok := impl["resources"].(map[string]any); ok {
			res["cpuLimit"], res["resourceCpuLimit"] = 0.2, "200m"
			res["memoryLimit"], res["resourceMemoryLimit"] = 0.128, "128M"
		}
		b, err := json.Marshal(impl)
		if err != nil {
			t.Fatal(err)
		}
		pm["value"] = string(b)
	}
	if err := unstructured.SetNestedSlice(wf.Object, params, "spec", "arguments", "parameters"); err != nil {
		t.Fatal(err)
	}
}

// rayCluster applies the Ray example with the real KubeRay operator: its five pods start as one
// gang on the real nodes, pass KubeRay's own probes, and each GPU worker sees the device the
// kubelet gave it.
func rayCluster(t *testing.T, c *cluster.Cluster, ns *nodes.Nodes) {
	ctx := t.Context()
	const namespace = "ml-team"
	newNamespace(t, c, namespace)
	queue(t, c, "ml-team", "", namespace)
	if _, err := c.StartKubeRay(ctx, cluster.KubeRayOptions{}); err != nil {
		t.Fatalf("starting KubeRay: %v", err)
	}
	objs, err := examples.Objects("ray", "raycluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := objs[0]
	rc.SetNamespace(namespace)
	scaleRayCluster(t, rc)
	mustCreate(t, c, rc)

	sel := map[string]string{kuberay.ClusterLabel: rc.GetName()}
	var pods []corev1.Pod
	eventually(t, 4*time.Minute, "the RayCluster's 5 pods Running and Ready", func(ctx context.Context) (bool, error) {
		pods = podsOf(t, c, namespace, sel)
		ready := 0
		for i := range pods {
			for _, cond := range pods[i].Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return len(pods) == 5 && ready == 5, nil
	})
	gpuWorkers := 0
	for i := range pods {
		p := &pods[i]
		if p.Spec.SchedulerName != fairwayv1.SchedulerName || p.Annotations[fairwayv1.PodGroupAnnotation] == "" {
			t.Errorf("pod %s: schedulerName %q, pod group %q: want fairway's gang", p.Name, p.Spec.SchedulerName, p.Annotations[fairwayv1.PodGroupAnnotation])
		}
		if p.Labels[kuberay.GroupLabel] != "gpu" {
			continue
		}
		logs, err := containerLogs(ctx, c, p, p.Spec.Containers[0].Name)
		node := ns.Node(p.Spec.NodeName)
		_, gpu, _ := strings.Cut(logs, "GPUs: ")
		gpu = strings.TrimSpace(strings.SplitN(gpu, "\n", 2)[0])
		if err != nil || node == nil || !slices.Contains(node.Plugin.DeviceIDs(), gpu) {
			t.Errorf("GPU worker %s on %q sees GPU %q, want one of that node's devices (%v); log:\n%s", p.Name, p.Spec.NodeName, gpu, err, logs)
			continue
		}
		gpuWorkers++
	}
	if gpuWorkers != 2 {
		t.Errorf("%d GPU workers saw their GPU, want 2", gpuWorkers)
	}
	var pg fairwayv1.PodGroup
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: pods[0].Annotations[fairwayv1.PodGroupAnnotation]}, &pg); err != nil {
		t.Fatalf("the gang's PodGroup: %v", err)
	}
	if pg.Spec.MinMember != 5 {
		t.Errorf("PodGroup %s: minMember %d, want 5 (head + 2 CPU + 2 GPU workers)", pg.Name, pg.Spec.MinMember)
	}
}

// scaleRayCluster runs the example's containers on the Ray stand-in with CPU and memory the test
// machine has, keeping their GPUs.
func scaleRayCluster(t *testing.T, rc *unstructured.Unstructured) {
	t.Helper()
	head, ok, _ := unstructured.NestedMap(rc.Object, "spec", "headGroupSpec", "template")
	if !ok {
		t.Fatal("RayCluster has no spec.headGroupSpec.template")
	}
	scaleTemplate(head)
	_ = unstructured.SetNestedMap(rc.Object, head, "spec", "headGroupSpec", "template")
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	for _, g := range groups {
		if tpl, ok := g.(map[string]any)["template"].(map[string]any); ok {
			scaleTemplate(tpl)
		}
	}
	_ = unstructured.SetNestedSlice(rc.Object, groups, "spec", "workerGroupSpecs")
}

// scaleTemplate sets a pod template's images to the Ray stand-in and its CPU and memory requests
// and limits to a fifth of a core and 256 MiB.
func scaleTemplate(tpl map[string]any) {
	ctrs, _, _ := unstructured.NestedSlice(tpl, "spec", "containers")
	for _, ctr := range ctrs {
		cm := ctr.(map[string]any)
		cm["image"] = rayImage
		for _, kind := range []string{"requests", "limits"} {
			if list, ok, _ := unstructured.NestedMap(cm, "resources", kind); ok {
				list["cpu"], list["memory"] = "200m", "256Mi"
				_ = unstructured.SetNestedMap(cm, list, "resources", kind)
			}
		}
	}
	_ = unstructured.SetNestedSlice(tpl, ctrs, "spec", "containers")
}

func podsOf(t *testing.T, c *cluster.Cluster, namespace string, sel map[string]string) []corev1.Pod {
	t.Helper()
	list, err := c.Clientset().CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func describe(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "\n  %s (%s) scheduler %q on %q: %s", p.Name, p.Annotations[kfp.NodeNameAnnotation], p.Spec.SchedulerName, p.Spec.NodeName, p.Status.Phase)
		for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, " [%s %s]", s.Name, containerState(s.State))
		}
	}
	return b.String()
}

func containerLogs(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, container string) (string, error) {
	b, err := c.Clientset().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return string(b), err
}

// gpusOf is the whole GPUs a pod's containers ask for.
func gpusOf(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Limits[fairwayv1.ResourceGPU]
		n += q.Value()
	}
	return n
}

// logValues returns the comma-separated values of the first log line starting with prefix
// (the KFP stand-in's NVIDIA_VISIBLE_DEVICES= and GPU_DEVICE_NODES=), nil if none.
func logValues(logs, prefix string) []string {
	for _, line := range strings.Split(logs, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok && v != "" {
			return strings.Split(v, ",")
		}
	}
	return nil
}
