package mutatingwebhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/jupyterhub"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
	"github.com/fairway-sched/fairway/test/examples"
)

const realworld = "testdata/realworld"

// admit runs pod through a handler the way the API server does and returns the stored pod and
// the response; the pod's namespace is the request's.
func admit(t *testing.T, state *staticState, objects adapters.ObjectReader, pod *corev1.Pod, ns string) (*corev1.Pod, []string) {
	t.Helper()
	pod.Namespace = ""
	req := createRequest(t, pod, ns)
	resp := newHandler(state, objects, mutatingwebhook.Options{}).Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("pod %s%s denied: %v", pod.Name, pod.GenerateName, resp.Result)
	}
	return applyPatch(t, req, resp), resp.Warnings
}

// TestRealKubeRaySamples: every sample of KubeRay's own repository, RayClusters and the
// clusters KubeRay makes for RayJobs and RayServices, autoscaling ones included, is admitted as
// one gang: the head and one pod of every worker group share the gang, whose size is the head
// plus each group's (minimum, with the autoscaler) replicas times its hosts, and each pod's
// sub-group is its group.
func TestRealKubeRaySamples(t *testing.T) {
	// minMember per sample, read off the manifests.
	want := map[string]int{
		"ray-cluster.autoscaler.yaml":              1, // autoscaler on, small-group minReplicas 0
		"ray-cluster.complete.yaml":                2,
		"ray-cluster.kai-gpu-sharing.yaml":         3,
		"ray-cluster.kai-scheduler.yaml":           3,
		"ray-cluster.sample.yaml":                  2,
		"ray-cluster.scheduler-plugins.yaml":       3,
		"ray-cluster.volcano-scheduler-queue.yaml": 3,
		"ray-cluster.volcano-scheduler.yaml":       1, // head only
		"ray-cluster.yunikorn-scheduler.yaml":      3,
		"ray-job.batch-inference.yaml":             1, // the GPU is on the head
		"ray-job.kueue-toy-sample.yaml":            2,
		"ray-job.pytorch-image-classifier.yaml":    5, // 4 GPU workers
		"ray-job.resources.yaml":                   2,
		"ray-job.sample.yaml":                      2,
		"ray-job.volcano-scheduler-queue.yaml":     3,
		"ray-job.yunikorn-scheduler.yaml":          2,
		"ray-service.deepseek.yaml":                3,
		"ray-service.high-throughput-llm.yaml":     5, // replicas 4, no minReplicas
		"ray-service.sample.yaml":                  2,
		"ray-service.stable-diffusion.yaml":        2,
	}
	files, err := filepath.Glob(filepath.Join(realworld, "kuberay", "*.yaml"))
	if err != nil || len(files) != len(want) {
		t.Fatalf("want the %d KubeRay samples, found %d (%v)", len(want), len(files), err)
	}
	const ns = "ray-samples"
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			rc := rayClusterOf(t, adaptertest.LoadObjects(t, file), ns)
			pods := rayPods(t, rc)
			state := defaultState()
			// The KAI samples name queue team-a; the others take the namespace's only queue.
			state.queues[ns] = []string{"team-a"}
			reader := adaptertest.NewReader(rc)
			group := adapters.GroupName("ray", rc.GetName())
			// A RayService's cluster runs Ray Serve: inference, non-preemptible by its kind.
			kind, preemptibility := string(adapters.KindRay), ""
			if strings.HasPrefix(filepath.Base(file), "ray-service.") {
				kind, preemptibility = string(adapters.KindInference), string(fairwayv1.NonPreemptible)
			}
			for _, pod := range pods {
				sub := pod.Labels[kuberay.GroupLabel]
				got, warnings := admit(t, state, reader, pod, ns)
				if len(warnings) > 0 {
					t.Errorf("%s: warnings %q", sub, warnings)
				}
				checks := map[string][2]string{
					"schedulerName":                          {got.Spec.SchedulerName, fairwayv1.SchedulerName},
					"label " + fairwayv1.QueueLabel:          {got.Labels[fairwayv1.QueueLabel], "team-a"},
					"label " + fairwayv1.FrameworkLabel:      {got.Labels[fairwayv1.FrameworkLabel], kuberay.Name},
					fairwayv1.PodGroupAnnotation:             {got.Annotations[fairwayv1.PodGroupAnnotation], group},
					fairwayv1.MinMemberAnnotation:            {got.Annotations[fairwayv1.MinMemberAnnotation], strconv.Itoa(want[filepath.Base(file)])},
					fairwayv1.SubGroupAnnotation:             {got.Annotations[fairwayv1.SubGroupAnnotation], sub},
					fairwayv1.WorkloadKindAnnotation:         {got.Annotations[fairwayv1.WorkloadKindAnnotation], kind},
					"label " + fairwayv1.PreemptibilityLabel: {got.Labels[fairwayv1.PreemptibilityLabel], preemptibility},
				}
				for what, c := range checks {
					if c[0] != c[1] {
						t.Errorf("%s: %s = %q, want %q", sub, what, c[0], c[1])
					}
				}
				// GPUs the sample asks for stay on the Ray container, untouched.
				if n, m := gpuLimit(pod), gpuLimit(got); n != m {
					t.Errorf("%s: %d GPUs asked, %d after admission", sub, n, m)
				}
			}
		})
	}
}

// rayClusterOf returns the RayCluster of a sample, in ns: the sample's own, or the one KubeRay
// makes for a RayJob (spec.rayClusterSpec) or RayService (spec.rayClusterConfig): named after its
// owner with a random suffix, with the owner's labels and a controller reference to it.
func rayClusterOf(t *testing.T, objs []*unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		var specField string
		switch o.GetKind() {
		case "RayCluster":
			rc := o.DeepCopy()
			rc.SetNamespace(ns)
			return rc
		case "RayJob":
			specField = "rayClusterSpec"
		case "RayService":
			specField = "rayClusterConfig"
		default:
			continue
		}
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec", specField)
		if !ok {
			t.Fatalf("%s %s has no spec.%s", o.GetKind(), o.GetName(), specField)
		}
		owner := o.GetName()
		if owner == "" {
			owner = strings.TrimSuffix(o.GetGenerateName(), "-") + "-x7k2p"
		}
		rc := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		rc.SetGroupVersionKind(kuberay.RayClusterGVK)
		rc.SetNamespace(ns)
		rc.SetName(owner + "-q4w9z")
		rc.SetLabels(o.GetLabels())
		rc.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: o.GetKind(), Name: owner, UID: "owner-uid", Controller: ptr.To(true)}})
		return rc
	}
	t.Fatal("the sample holds no RayCluster, RayJob or RayService")
	return nil
}

// rayPods builds the pods KubeRay makes for a RayCluster: the head and one worker per group (per
// host), from the templates, with KubeRay's labels and the controller reference.
func rayPods(t *testing.T, rc *unstructured.Unstructured) []*corev1.Pod {
	t.Helper()
	build := func(nodeType, group string, tmpl map[string]any) *corev1.Pod {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
			t.Fatalf("decoding the %s template: %v", group, err)
		}
		labels := pod.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range rc.GetLabels() {
			labels[k] = v
		}
		labels[kuberay.ClusterLabel] = rc.GetName()
		labels[kuberay.NodeTypeLabel] = nodeType
		labels[kuberay.GroupLabel] = group
		labels[kuberay.IsRayNodeLabel] = "yes"
		pod.Labels = labels
		pod.GenerateName = fmt.Sprintf("%s-%s-", rc.GetName(), nodeType)
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: rc.GetName(), UID: "rc-uid", Controller: ptr.To(true)}}
		return pod
	}
	head, ok, _ := unstructured.NestedMap(rc.Object, "spec", "headGroupSpec", "template")
	if !ok {
		t.Fatal("no head template")
	}
	pods := []*corev1.Pod{build("head", "headgroup", head)}
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	for _, g := range groups {
		m := g.(map[string]any)
		tmpl, _, _ := unstructured.NestedMap(m, "template")
		name, _, _ := unstructured.NestedString(m, "groupName")
		pods = append(pods, build("worker", name, tmpl))
	}
	return pods
}

func gpuLimit(pod *corev1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Limits[fairwayv1.ResourceGPU]
		n += q.Value()
	}
	return n
}

// TestRealKubeSpawnerPods: every pod KubeSpawner's own tests expect make_pod() to build is known
// for a notebook, by its shape (the expected objects carry only the labels each test passed in),
// and is admitted as one: an interactive gang of its own, non-preemptible unless it names its
// own priority class, its GPU on the notebook container. The one that names its own scheduler keeps it.
func TestRealKubeSpawnerPods(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(realworld, "kubespawner", "*.json"))
	if err != nil || len(files) != 25 {
		t.Fatalf("want KubeSpawner's 25 expected pods, found %d (%v)", len(files), err)
	}
	a := jupyterhub.New()
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			pod := loadJSONPod(t, file)
			if !a.Recognize(pod) {
				t.Fatalf("not recognised as a notebook")
			}
			w, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil || w.Kind != adapters.KindNotebook || w.GPUContainer != jupyterhub.NotebookContainer {
				t.Fatalf("Describe: %+v, %v", w, err)
			}
			got, _ := admit(t, defaultState(), nil, pod, "jhub")
			if pod.Spec.SchedulerName == "my-custom-scheduler" {
				if got.Spec.SchedulerName != "my-custom-scheduler" || got.Labels[fairwayv1.ManagedLabel] != "" {
					t.Errorf("a notebook that chose its scheduler was taken: %q %v", got.Spec.SchedulerName, got.Labels)
				}
				return
			}
			if got.Spec.SchedulerName != fairwayv1.SchedulerName || got.Labels[fairwayv1.FrameworkLabel] != jupyterhub.Name ||
				got.Annotations[fairwayv1.WorkloadKindAnnotation] != string(adapters.KindNotebook) {
				t.Errorf("not admitted as a notebook: scheduler %q, labels %v, annotations %v", got.Spec.SchedulerName, got.Labels, got.Annotations)
			}
			// A class the spawner was configured with (priority_class_name) is the user's
			// choice, and its value decides; otherwise the notebook is non-preemptible.
			wantPreempt := string(fairwayv1.NonPreemptible)
			if pod.Spec.PriorityClassName != "" {
				wantPreempt = ""
			}
			if got.Labels[fairwayv1.PreemptibilityLabel] != wantPreempt {
				t.Errorf("preemptibility %q, want %q", got.Labels[fairwayv1.PreemptibilityLabel], wantPreempt)
			}
			if got.Annotations[fairwayv1.PodGroupAnnotation] != "nb-"+pod.Name || got.Annotations[fairwayv1.MinMemberAnnotation] != "1" {
				t.Errorf("gang %q of %q", got.Annotations[fairwayv1.PodGroupAnnotation], got.Annotations[fairwayv1.MinMemberAnnotation])
			}
			// A class the test chose is the user's; otherwise the interactive default.
			wantClass := pod.Spec.PriorityClassName
			if wantClass == "" {
				wantClass = fairwayv1.PriorityClassInteractive
			}
			if got.Spec.PriorityClassName != wantClass {
				t.Errorf("priority class %q, want %q", got.Spec.PriorityClassName, wantClass)
			}
		})
	}
}

func loadJSONPod(t *testing.T, file string) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(data, pod); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return pod
}

// TestRealKFPCompiledWorkflows: the pods Argo makes from workflows of the KFP v2 compiler's own
// golden outputs. Drivers (container and DAG) and importers are left to kube-scheduler, untouched.
// Every executor is a pipeline step; the one whose component asks for a GPU gets it on main,
// from the pod-spec patch the driver computes from the component's resources.
func TestRealKFPCompiledWorkflows(t *testing.T) {
	const ns = "kubeflow-user-alice"
	for file, wantGPUs := range map[string]int64{
		"nvidia_gpu_scheduling_check.yaml": 1,
		"pipeline_with_importer.yaml":      0,
	} {
		t.Run(file, func(t *testing.T) {
			objs := adaptertest.LoadObjects(t, filepath.Join(realworld, "kfp", file))
			if len(objs) != 1 || objs[0].GetKind() != "Workflow" {
				t.Fatalf("want one Workflow, got %d objects", len(objs))
			}
			wf := objs[0]
			wf.SetName(strings.TrimSuffix(wf.GetGenerateName(), "-") + "-8xk2p")
			wf.SetNamespace(ns)
			run, err := examples.ParseKFPRun(wf)
			if err != nil {
				t.Fatalf("reading the compiled workflow: %v", err)
			}
			reader := adaptertest.NewReader(wf)
			roles := map[kfp.Role]int{}
			var gpus int64
			for _, pod := range argoPods(t, wf, run) {
				role := kfp.PodRole(pod)
				roles[role]++
				got, warnings := admit(t, defaultState(), reader, pod, ns)
				if role != kfp.RoleExecutor {
					if got.Spec.SchedulerName == fairwayv1.SchedulerName || got.Labels[fairwayv1.ManagedLabel] != "" || len(warnings) > 0 {
						t.Errorf("%s %s was taken: scheduler %q, labels %v, warnings %q", role, pod.Name, got.Spec.SchedulerName, got.Labels, warnings)
					}
					continue
				}
				if got.Spec.SchedulerName != fairwayv1.SchedulerName || got.Labels[fairwayv1.QueueLabel] != "alice" ||
					got.Labels[fairwayv1.FrameworkLabel] != kfp.Name || got.Annotations[fairwayv1.WorkloadKindAnnotation] != string(adapters.KindPipelineStep) {
					t.Errorf("executor %s not admitted as a pipeline step: scheduler %q, labels %v", pod.Name, got.Spec.SchedulerName, got.Labels)
				}
				for _, c := range got.Spec.Containers {
					q := c.Resources.Limits[fairwayv1.ResourceGPU]
					if q.Value() > 0 && c.Name != argo.MainContainer {
						t.Errorf("executor %s: GPU on container %s", pod.Name, c.Name)
					}
				}
				gpus += gpuLimit(got)
			}
			if gpus != wantGPUs {
				t.Errorf("executors hold %d GPUs on main, want %d", gpus, wantGPUs)
			}
			if roles[kfp.RoleDriver] == 0 || roles[kfp.RoleExecutor] == 0 {
				t.Errorf("pods by role: %v; want drivers and executors", roles)
			}
			t.Logf("pods by role: %v", roles)
		})
	}
}

// argoPods builds the pods Argo makes for a compiled KFP run: one per container template
// (drivers, importers) and, for every task, the executor the driver's pod-spec patch completes:
// the component's image and resources on main. Argo's keys and the workflow's pod metadata are on
// every pod, the templates' own metadata on theirs.
func argoPods(t *testing.T, wf *unstructured.Unstructured, run *examples.KFPRun) []*corev1.Pod {
	t.Helper()
	templates, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	podLabels, _, _ := unstructured.NestedStringMap(wf.Object, "spec", "podMetadata", "labels")
	podAnnotations, _, _ := unstructured.NestedStringMap(wf.Object, "spec", "podMetadata", "annotations")
	sa, _, _ := unstructured.NestedString(wf.Object, "spec", "serviceAccountName")
	byName := map[string]map[string]any{}
	for _, tmpl := range templates {
		m := tmpl.(map[string]any)
		byName[fmt.Sprint(m["name"])] = m
	}
	build := func(template, node string) *corev1.Pod {
		m := byName[template]
		if m == nil {
			t.Fatalf("no template %s", template)
		}
		var tmpl struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Container      corev1.Container   `json:"container"`
			InitContainers []corev1.Container `json:"initContainers"`
		}
		raw, _ := json.Marshal(m)
		if err := json.Unmarshal(raw, &tmpl); err != nil {
			t.Fatalf("template %s: %v", template, err)
		}
		nodeID := wf.GetName() + "-" + adapters.ShortHash(node)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name:        wf.GetName() + "-" + template + "-" + adapters.ShortHash(nodeID),
			Labels:      map[string]string{argo.WorkflowLabel: wf.GetName(), "workflows.argoproj.io/completed": "false"},
			Annotations: map[string]string{argo.NodeIDAnnotation: nodeID, kfp.NodeNameAnnotation: node},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf.GetName(),
				UID: "wf-uid", Controller: ptr.To(true)}},
		}}
		for _, from := range []map[string]string{podLabels, tmpl.Metadata.Labels} {
			for k, v := range from {
				pod.Labels[k] = v
			}
		}
		for _, from := range []map[string]string{podAnnotations, tmpl.Metadata.Annotations} {
			for k, v := range from {
				pod.Annotations[k] = v
			}
		}
		main := tmpl.Container
		main.Name = argo.MainContainer
		pod.Spec = corev1.PodSpec{
			ServiceAccountName: sa,
			InitContainers:     append([]corev1.Container{{Name: "init", Image: "quay.io/argoproj/argoexec:v3.7.8"}}, tmpl.InitContainers...),
			Containers:         []corev1.Container{{Name: argo.WaitContainer, Image: "quay.io/argoproj/argoexec:v3.7.8"}, main},
			RestartPolicy:      corev1.RestartPolicyNever,
		}
		return pod
	}
	root := wf.GetName() + ".root."
	pods := []*corev1.Pod{build("system-dag-driver", wf.GetName()+".root-driver")}
	if _, ok := byName["system-importer"]; ok {
		pods = append(pods, build("system-importer", root+"importer"))
	}
	for _, name := range run.Order {
		task := run.Tasks[name]
		pods = append(pods, build("system-container-driver", root+name+"-driver"))
		exec := build("system-container-impl", root+name+".executor")
		res, err := task.Container.Resources.Resources()
		if err != nil {
			t.Fatalf("task %s: %v", name, err)
		}
		main := &exec.Spec.Containers[1]
		main.Image, main.Resources = task.Container.Image, res
		pods = append(pods, exec)
	}
	return pods
}
