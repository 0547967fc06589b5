package mutatingwebhook_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestFrameworkPods runs realistic pods of every framework through the handler, applies the
// patch as the API server would, and compares the pod with a golden file. The golden files are
// the reference of what the webhook writes; regenerate them with -update and review the diff.
func TestFrameworkPods(t *testing.T) {
	rayObjects := adaptertest.LoadObjects(t, "../adapters/kuberay/testdata/raycluster.yaml")
	rayObjects = append(rayObjects, adaptertest.LoadObjects(t, "../adapters/mpijob/testdata/mpijob.yaml")...)
	rayObjects = append(rayObjects, adaptertest.LoadObjects(t, "../adapters/usergang/testdata/indexed-job.yaml")...)
	cases := map[string]struct {
		fixture string
		// namespace is the request's; the pod body keeps its own unless it has none.
		namespace string
	}{
		"argo-step":         {fixture: "../adapters/argo/testdata/step-gpu.yaml"},
		"argo-agent":        {fixture: "../adapters/argo/testdata/agent.yaml"},
		"kfp-executor-2.17": {fixture: "../adapters/kfp/testdata/executor-2.17.yaml"},
		"kfp-executor-2.14": {fixture: "../adapters/kfp/testdata/executor-2.14.yaml"},
		"kfp-driver-2.17":   {fixture: "../adapters/kfp/testdata/driver-2.17.yaml"},
		"ray-worker":        {fixture: "../adapters/kuberay/testdata/worker-gpu.yaml"},
		"ray-head":          {fixture: "../adapters/kuberay/testdata/head.yaml"},
		"jupyterhub-z2jh":   {fixture: "../adapters/jupyterhub/testdata/z2jh-notebook.yaml"},
		"jupyterhub-whole":  {fixture: "../adapters/jupyterhub/testdata/kubespawner-default.yaml"},
		"pytorchjob-worker": {fixture: "../adapters/pytorchjob/testdata/worker.yaml"},
		"jobset-node":       {fixture: "../adapters/jobset/testdata/trainjob-node.yaml"},
		"mpijob-launcher":   {fixture: "../adapters/mpijob/testdata/launcher.yaml"},
		"gang-indexed-job":  {fixture: "../adapters/usergang/testdata/indexed-job-pod.yaml"},
		"gang-kueue":        {fixture: "../adapters/usergang/testdata/kueue-pod.yaml"},
		"lws-leader":        {fixture: "../adapters/lws/testdata/vllm-leader.yaml", namespace: "team-a"},
		"lws-worker":        {fixture: "../adapters/lws/testdata/vllm-worker.yaml", namespace: "team-a"},
		"kserve-raw":        {fixture: "../adapters/kserve/testdata/raw-predictor.yaml", namespace: "team-a"},
		"kserve-serverless": {fixture: "../adapters/kserve/testdata/serverless-predictor.yaml", namespace: "team-a"},
		"kserve-multinode":  {fixture: "../adapters/kserve/testdata/multinode-worker.yaml", namespace: "team-a"},
		"knative-service":   {fixture: "../adapters/knative/testdata/service-gpu.yaml", namespace: "team-a"},
		"triton-replica":    {fixture: "../adapters/modelserver/testdata/triton-chart.yaml", namespace: "team-a"},
		"vllm-replica":      {fixture: "../adapters/modelserver/testdata/vllm-guide.yaml", namespace: "team-a"},
		"rayservice-worker": {fixture: "../adapters/kuberay/testdata/rayservice-worker.yaml", namespace: "team-a"},
		"kubeflow-notebook": {fixture: "../adapters/kubeflownotebook/testdata/notebook-gpu.yaml", namespace: "kubeflow-user-alice"},
		"airflow-kpo":       {fixture: "../adapters/airflow/testdata/kpo-gpu.yaml", namespace: "team-a"},
		"airflow-executor":  {fixture: "../adapters/airflow/testdata/executor-worker.yaml", namespace: "team-a"},
		"mlflow-project":    {fixture: "../adapters/mlflow/testdata/project-pod.yaml", namespace: "team-a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, tc.fixture)
			ns := pod.Namespace
			if tc.namespace != "" {
				ns = tc.namespace
			}
			pod.Namespace = "" // as kubectl and controllers send it: namespace in the request only
			h := newHandler(defaultState(), adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{})
			req := createRequest(t, pod, ns)
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			got := applyPatch(t, req, resp)
			for _, op := range resp.Patches {
				if op.Path == "/metadata/namespace" {
					t.Errorf("the patch sets the namespace: %v", op)
				}
			}
			out, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading %s (run with -update to create it): %v", golden, err)
			}
			if diff := cmp.Diff(string(want), string(out)); diff != "" {
				t.Errorf("pod differs from %s (-want +got):\n%s", golden, diff)
			}
			// The webhook must be idempotent: the API server may call it again on its own output.
			again := h.Handle(context.Background(), createRequest(t, got, ns))
			if !again.Allowed || len(again.Patches) > 0 {
				t.Errorf("second pass over the rewritten pod changed it again: %v %v", again.Result, again.Patches)
			}
		})
	}
}

// TestControllerSelectorLabelsAreNeverPatched: Argo's and KubeRay's controllers find their pods
// by these labels; a patch that touched one would orphan the pod.
func TestControllerSelectorLabelsAreNeverPatched(t *testing.T) {
	protected := append(argo.SelectorLabels(), kuberay.ClusterLabel, kuberay.NodeTypeLabel, kuberay.GroupLabel,
		"app.kubernetes.io/created-by", "pipeline/runid")
	rayObjects := adaptertest.LoadObjects(t, "../adapters/kuberay/testdata/raycluster.yaml")
	rayObjects = append(rayObjects, adaptertest.LoadObjects(t, "../adapters/mpijob/testdata/mpijob.yaml")...)
	rayObjects = append(rayObjects, adaptertest.LoadObjects(t, "../adapters/usergang/testdata/indexed-job.yaml")...)
	for _, fixture := range []string{
		"../adapters/argo/testdata/step-gpu.yaml",
		"../adapters/kfp/testdata/executor-2.17.yaml",
		"../adapters/kuberay/testdata/worker-gpu.yaml",
		"../adapters/kuberay/testdata/head.yaml",
	} {
		t.Run(filepath.Base(fixture), func(t *testing.T) {
			pod := adaptertest.LoadPod(t, fixture)
			h := newHandler(defaultState(), adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{})
			req := createRequest(t, pod, pod.Namespace)
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed || len(resp.Patches) == 0 {
				t.Fatalf("want an allowed, patched pod; got %v", resp.Result)
			}
			for _, op := range resp.Patches {
				if op.Path == "/metadata/labels" || op.Path == "/metadata" {
					t.Errorf("the patch replaces all labels: %s", op.Json())
				}
				for _, key := range protected {
					if op.Path == "/metadata/labels/"+strings.ReplaceAll(key, "/", "~1") {
						t.Errorf("the patch touches %s: %s", key, op.Json())
					}
				}
			}
			got := applyPatch(t, req, resp)
			for _, key := range protected {
				if got.Labels[key] != pod.Labels[key] {
					t.Errorf("label %s = %q after the patch, was %q", key, got.Labels[key], pod.Labels[key])
				}
			}
		})
	}
}

// TestDenials: bad input is refused with a message naming the key, the value and what is allowed.
func TestDenials(t *testing.T) {
	gpuLimit := corev1.ResourceList{corev1.ResourceName("nvidia.com/gpu"): resource.MustParse("1")}
	cases := map[string]struct {
		pod     *corev1.Pod
		ns      string
		state   func(*staticState)
		wantMsg string
	}{
		"fraction 1.5": {
			pod:     makePod("p").annotate("fairway.dev/gpu-fraction", "1.5").obj(),
			wantMsg: `fairway.dev/gpu-fraction "1.5": must be a decimal greater than 0 and less than 1 (e.g. 0.5)`,
		},
		"fraction 0": {
			pod:     makePod("p").annotate("gpu-fraction", "0").obj(),
			wantMsg: `gpu-fraction "0": must be a decimal greater than 0 and less than 1`,
		},
		"fraction not a number": {
			pod:     makePod("p").annotate("fairway.dev/gpu-fraction", "half").obj(),
			wantMsg: `fairway.dev/gpu-fraction "half": must be a decimal`,
		},
		"fraction and memory": {
			pod:     makePod("p").annotate("fairway.dev/gpu-fraction", "0.5").annotate("gpu-memory", "4000").obj(),
			wantMsg: `fairway.dev/gpu-fraction "0.5": cannot be combined with gpu-memory "4000"`,
		},
		"fraction with an nvidia.com/gpu limit": {
			pod:     makePod("p").annotate("fairway.dev/gpu-fraction", "0.5").limits(gpuLimit).obj(),
			wantMsg: `fairway.dev/gpu-fraction "0.5": cannot be combined with container "c" asking for 1 whole GPU (nvidia.com/gpu)`,
		},
		"memory above the largest GPU": {
			pod:     makePod("p").annotate("fairway.dev/gpu-memory", "100000").obj(),
			wantMsg: `fairway.dev/gpu-memory "100000": must be at most 81920 MiB, the memory of the largest GPU in the cluster`,
		},
		"unknown queue": {
			pod:     makePod("p").label("fairway.dev/queue", "nope").obj(),
			wantMsg: `fairway.dev/queue "nope": no such queue; pods in namespace "team-a" may use queue "team-a"`,
		},
		"another team's queue (quota theft by label)": {
			pod:     makePod("p").label("runai/queue", "team-b").obj(),
			wantMsg: `runai/queue "team-b": queue "team-b" does not serve namespace "team-a"; pods in namespace "team-a" may use queue "team-a"`,
		},
		"another team's queue through a KAI label": {
			pod:     makePod("p").label("kai.scheduler/queue", "ray-team").obj(),
			wantMsg: `kai.scheduler/queue "ray-team": queue "ray-team" does not serve namespace "team-a"`,
		},
		"an empty queue label counts as not set": {
			pod:     makePod("p").label("fairway.dev/queue", "").label("runai/queue", "team-b").obj(),
			wantMsg: `runai/queue "team-b": queue "team-b" does not serve namespace "team-a"`,
		},
		"queue labels disagree": {
			pod:     makePod("p").label("fairway.dev/queue", "team-a").label("runai/queue", "team-b").obj(),
			wantMsg: `fairway.dev/queue "team-a" and runai/queue "team-b": the labels name different queues`,
		},
		"namespace served by two queues and no choice": {
			pod: makePod("p").obj(), ns: "shared",
			wantMsg: `namespace "shared" is served by several queues (research, vision): choose one with the fairway.dev/queue label`,
		},
		"gpu-container names no container": {
			pod:     makePod("p").annotate("fairway.dev/gpu-fraction", "0.5").annotate("fairway.dev/gpu-container", "sidecar").obj(),
			wantMsg: `fairway.dev/gpu-container "sidecar": must name one of the pod's containers (c)`,
		},
		"bad preemptibility": {
			pod:     makePod("p").label("fairway.dev/preemptibility", "never").obj(),
			wantMsg: `label fairway.dev/preemptibility "never" must be "preemptible" or "non-preemptible"`,
		},
		"opted out but asks for fairway": {
			pod:     makePod("p").label("fairway.dev/ignore", "true").scheduler("fairway").obj(),
			wantMsg: `label fairway.dev/ignore=true opts the pod out of fairway`,
		},
		"asks for fairway in a namespace no queue serves": {
			pod: makePod("p").scheduler("fairway").obj(), ns: "elsewhere",
			wantMsg: `namespace "elsewhere" is not served by any fairway queue`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			state := defaultState()
			if tc.state != nil {
				tc.state(state)
			}
			ns := tc.ns
			if ns == "" {
				ns = "team-a"
			}
			resp := newHandler(state, nil, mutatingwebhook.Options{}).Handle(context.Background(), createRequest(t, tc.pod, ns))
			if resp.Allowed {
				t.Fatalf("allowed, want denied with %q", tc.wantMsg)
			}
			if resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantMsg) {
				t.Errorf("result = %+v, want 403 with a message containing %q", resp.Result, tc.wantMsg)
			}
			if len(resp.Patches) > 0 {
				t.Errorf("a denial carries a patch: %v", resp.Patches)
			}
		})
	}
}

// TestLeftAlone: pods that are not fairway's go through untouched.
func TestLeftAlone(t *testing.T) {
	cases := map[string]struct {
		pod *corev1.Pod
		ns  string
	}{
		"kube-system":                     {pod: makePod("p").obj(), ns: "kube-system"},
		"fairway's own namespace":         {pod: makePod("p").scheduler("fairway").obj(), ns: "fairway-system"},
		"opted out":                       {pod: makePod("p").label("fairway.dev/ignore", "true").obj()},
		"another scheduler chosen":        {pod: makePod("p").scheduler("volcano").obj()},
		"already bound":                   {pod: makePod("p").node("n1").obj()},
		"namespace not served (stale)":    {pod: makePod("p").obj(), ns: "elsewhere"},
		"DaemonSet pod":                   {pod: makePod("p").owner("apps/v1", "DaemonSet", "agent").obj()},
		"Argo artifact-GC pod":            {pod: adaptertest.LoadPod(t, "../adapters/argo/testdata/artifact-gc.yaml")},
		"not a create (update of status)": {pod: makePod("p").obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "team-a"
			}
			req := createRequest(t, tc.pod, ns)
			if strings.HasPrefix(name, "not a create") {
				req.Operation = admissionv1.Update
			}
			resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
			if !resp.Allowed || len(resp.Patches) > 0 {
				t.Errorf("want allowed with no patch; got allowed=%v result=%v patches=%v", resp.Allowed, resp.Result, resp.Patches)
			}
		})
	}
}

func TestSchedulerNames(t *testing.T) {
	cases := map[string]bool{
		"":                    true,
		"default-scheduler":   true,
		"jhub-user-scheduler": true,
		"fairway":             true,
		"volcano":             false,
		"kai-scheduler":       false,
		"my-scheduler":        false,
	}
	for name, taken := range cases {
		resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(),
			createRequest(t, makePod("p").scheduler(name).obj(), "team-a"))
		got := applyPatch(t, createRequest(t, makePod("p").scheduler(name).obj(), "team-a"), resp)
		if (got.Spec.SchedulerName == "fairway") != taken {
			t.Errorf("schedulerName %q became %q; taken over = %v, want %v", name, got.Spec.SchedulerName, !taken, taken)
		}
	}
	// Administrators migrating from KAI can add its name.
	h := newHandler(defaultState(), nil, mutatingwebhook.Options{TakeOverSchedulers: []string{"kai-scheduler"}})
	req := createRequest(t, makePod("p").scheduler("kai-scheduler").obj(), "team-a")
	if got := applyPatch(t, req, h.Handle(context.Background(), req)); got.Spec.SchedulerName != "fairway" {
		t.Errorf("kai-scheduler not taken over with TakeOverSchedulers=[kai-scheduler]: %q", got.Spec.SchedulerName)
	}
}

func TestPriority(t *testing.T) {
	notebook := func() *corev1.Pod {
		return adaptertest.LoadPod(t, "../adapters/jupyterhub/testdata/z2jh-notebook.yaml")
	}
	cases := map[string]struct {
		pod       *corev1.Pod
		state     func(*staticState)
		wantClass string
		wantPrio  *int32
		wantWarn  string
	}{
		"notebook gets the interactive class; priority is left to the API server": {
			pod: withPriority(notebook(), "", 0), wantClass: "fairway-interactive",
		},
		"user's class is kept": {
			pod: withPriority(notebook(), "build", 100), wantClass: "build", wantPrio: ptr.To[int32](100),
		},
		"the cluster's global default counts as no choice": {
			pod:       withPriority(notebook(), "cluster-default", 10),
			state:     func(s *staticState) { s.globalDefault = "cluster-default" },
			wantClass: "fairway-interactive",
		},
		"class not installed: warn and keep the default": {
			pod:       withPriority(notebook(), "", 0),
			state:     func(s *staticState) { s.priorityClasses = nil },
			wantPrio:  ptr.To[int32](0),
			wantWarn:  `priority class "fairway-interactive" does not exist`,
			wantClass: "",
		},
		"plain pods keep the cluster default": {
			pod: withPriority(makePod("p").obj(), "", 0), wantPrio: ptr.To[int32](0),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			state := defaultState()
			if tc.state != nil {
				tc.state(state)
			}
			ns := tc.pod.Namespace
			if ns == "" {
				ns = "team-a"
			}
			req := createRequest(t, tc.pod, ns)
			resp := newHandler(state, nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			got := applyPatch(t, req, resp)
			if got.Spec.PriorityClassName != tc.wantClass {
				t.Errorf("priorityClassName = %q, want %q", got.Spec.PriorityClassName, tc.wantClass)
			}
			if diff := cmp.Diff(tc.wantPrio, got.Spec.Priority); diff != "" {
				t.Errorf("priority (-want +got):\n%s", diff)
			}
			if tc.wantPrio == nil && got.Spec.PreemptionPolicy != nil {
				t.Errorf("preemptionPolicy kept (%v) while the class changed", *got.Spec.PreemptionPolicy)
			}
			if warned := strings.Join(resp.Warnings, "\n"); !strings.Contains(warned, tc.wantWarn) || (tc.wantWarn == "" && warned != "") {
				t.Errorf("warnings = %q, want %q", resp.Warnings, tc.wantWarn)
			}
		})
	}
}

// withPriority sets what the API server's Priority plugin leaves on a pod before webhooks run.
func withPriority(pod *corev1.Pod, class string, value int32) *corev1.Pod {
	pod.Spec.PriorityClassName = class
	pod.Spec.Priority = ptr.To(value)
	pod.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	return pod
}

// TestGPUShareTicket: a fractional pod's GPU container asks the kubelet for one
// fairway.dev/gpu-share (the device plugin answers it with the scheduler's GPU), and any
// NVIDIA_VISIBLE_DEVICES of its own is taken out with a warning: nothing in the pod or its
// namespace names the GPU.
func TestGPUShareTicket(t *testing.T) {
	pod := makePod("p").annotate("gpu-fraction", "0.3333").
		env("NVIDIA_VISIBLE_DEVICES", "all").env("OTHER", "x").obj()
	req := createRequest(t, pod, "team-a")
	resp := newHandler(defaultState(), nil, mutatingwebhook.Options{MPSVolumes: true}).Handle(context.Background(), req)
	got := applyPatch(t, req, resp)

	if _, ok := got.Annotations["fairway.dev/gpu-configmap"]; ok {
		t.Errorf("gpu-configmap written: %v", got.Annotations)
	}
	if got.Annotations["fairway.dev/gpu-fraction"] != "0.333" || got.Annotations["fairway.dev/gpu-container"] != "c" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "OTHER", Value: "x"}}, got.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	one := resource.MustParse("1")
	for what, rl := range map[string]corev1.ResourceList{"limits": got.Spec.Containers[0].Resources.Limits, "requests": got.Spec.Containers[0].Resources.Requests} {
		if q, ok := rl[fairwayv1.ResourceGPUShare]; !ok || q.Cmp(one) != 0 {
			t.Errorf("%s = %v, want %s: 1", what, rl, fairwayv1.ResourceGPUShare)
		}
	}
	if !strings.Contains(strings.Join(resp.Warnings, "\n"), "NVIDIA_VISIBLE_DEVICES removed from container \"c\"") {
		t.Errorf("warnings %q, want one about NVIDIA_VISIBLE_DEVICES", resp.Warnings)
	}
	wantMount := []corev1.VolumeMount{{Name: mutatingwebhook.MPSVolumeName, MountPath: "/tmp/nvidia-mps"}, {Name: mutatingwebhook.MPSSharedMemoryVolumeName, MountPath: "/dev/shm"}}
	if diff := cmp.Diff(wantMount, got.Spec.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if len(got.Spec.Volumes) != 2 || got.Spec.Volumes[0].CSI == nil || got.Spec.Volumes[0].CSI.Driver != "mps.fairway.dev" {
		t.Errorf("volumes = %+v", got.Spec.Volumes)
	}

	// Whole-GPU pods get none of it.
	whole := makePod("w").limits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}).obj()
	req = createRequest(t, whole, "team-a")
	got = applyPatch(t, req, newHandler(defaultState(), nil, mutatingwebhook.Options{MPSVolumes: true}).Handle(context.Background(), req))
	if _, ok := got.Spec.Containers[0].Resources.Limits[fairwayv1.ResourceGPUShare]; ok || len(got.Spec.Volumes) > 0 {
		t.Errorf("a whole-GPU pod got GPU-share wiring: %+v", got)
	}
}

// TestGPUShareTicketRefused: fairway.dev/gpu-share is the webhook's to set. A pod that asks for
// it without asking for a share, or on a container other than the share's, is refused, naming
// the container.
func TestGPUShareTicketRefused(t *testing.T) {
	ticket := corev1.ResourceList{fairwayv1.ResourceGPUShare: resource.MustParse("1")}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"no share": {makePod("p").limits(ticket).obj(),
			`container "c" asks for fairway.dev/gpu-share, which fairway sets itself: ask for a GPU share with fairway.dev/gpu-fraction or fairway.dev/gpu-memory`},
		"another container": {func() *corev1.Pod {
			p := makePod("p").annotate("gpu-fraction", "0.5").obj()
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", Resources: corev1.ResourceRequirements{Limits: ticket}}}
			return p
		}(), `container "init" asks for fairway.dev/gpu-share: only the GPU container ("c") gets the pod's share, and fairway sets it`},
	} {
		t.Run(name, func(t *testing.T) {
			resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), createRequest(t, tc.pod, "team-a"))
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("allowed %v, message %q, want a refusal containing %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
}

// Under MPS the pod's own pipe directory goes where CUDA clients look by default and its MPS
// server's shared memory becomes the container's /dev/shm, both CSI ephemeral volumes of the
// gpu-agent's driver (no hostPath, which Pod Security baseline and restricted refuse), and the
// volumes name only which directory they are: the agent finds the pod from the kubelet. A second
// call of the webhook on the rewritten pod adds nothing.
func TestMPSVolumes(t *testing.T) {
	opts := mutatingwebhook.Options{MPSVolumes: true}
	pod := makePod("p").annotate("fairway.dev/gpu-memory", "20000").obj()
	req := createRequest(t, pod, "team-a")
	got := applyPatch(t, req, newHandler(defaultState(), nil, opts).Handle(context.Background(), req))
	again := createRequest(t, got, "team-a")
	got = applyPatch(t, again, newHandler(defaultState(), nil, opts).Handle(context.Background(), again))

	want := []corev1.Volume{
		{Name: mutatingwebhook.MPSVolumeName, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "mps.fairway.dev", VolumeAttributes: map[string]string{"fairway.dev/mps-volume": "pipe"}}}},
		{Name: mutatingwebhook.MPSSharedMemoryVolumeName, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "mps.fairway.dev", VolumeAttributes: map[string]string{"fairway.dev/mps-volume": "shm"}}}},
	}
	if diff := cmp.Diff(want, got.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	mounts := map[string]string{}
	for _, m := range got.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	wantMount := map[string]string{mutatingwebhook.MPSVolumeName: mutatingwebhook.DefaultMPSPipeDirectory, mutatingwebhook.MPSSharedMemoryVolumeName: "/dev/shm"}
	if diff := cmp.Diff(wantMount, mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}

	// A container that mounts an emptyDir at /dev/shm gets the MPS one there instead, of the
	// emptyDir's size; anything else there is refused, naming the container and the volume.
	big := makePod("big").annotate("fairway.dev/gpu-fraction", "0.5").obj()
	big.Spec.Volumes = []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Gi"))}}}}
	big.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm/"}}
	req = createRequest(t, big, "team-a")
	got = applyPatch(t, req, newHandler(defaultState(), nil, opts).Handle(context.Background(), req))
	var shmAttrs map[string]string
	for _, v := range got.Spec.Volumes {
		if v.Name == mutatingwebhook.MPSSharedMemoryVolumeName {
			shmAttrs = v.CSI.VolumeAttributes
		}
	}
	shmMounts := 0
	for _, m := range got.Spec.Containers[0].VolumeMounts {
		if m.MountPath == "/dev/shm" || m.MountPath == "/dev/shm/" {
			shmMounts++
			if m.Name != mutatingwebhook.MPSSharedMemoryVolumeName {
				t.Errorf("/dev/shm still mounts %q", m.Name)
			}
		}
	}
	if shmMounts != 1 || shmAttrs["fairway.dev/mps-shm-size"] != "8Gi" || len(got.Spec.Volumes) != 3 {
		t.Errorf("emptyDir at /dev/shm: %d mounts there, shm attributes %v, volumes %+v", shmMounts, shmAttrs, got.Spec.Volumes)
	}
	big.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev/shm"}}
	req = createRequest(t, big, "team-a")
	resp := newHandler(defaultState(), nil, opts).Handle(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, `container "c" mounts volume "dshm" at /dev/shm`) {
		t.Errorf("a hostPath at /dev/shm: allowed %v, %v", resp.Allowed, resp.Result)
	}

	// Without MPS a fractional pod gets no volume: its /dev/shm is its own, as any pod's.
	req = createRequest(t, pod, "team-a")
	got = applyPatch(t, req, newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req))
	if len(got.Spec.Volumes) != 0 || len(got.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("soft mode: volumes %+v, mounts %+v", got.Spec.Volumes, got.Spec.Containers[0].VolumeMounts)
	}
}

func TestUnnamedPodsGetAGangFromTheRequest(t *testing.T) {
	pod := makePod("").obj()
	pod.GenerateName = "web-7d9f-"
	h := newHandler(defaultState(), nil, mutatingwebhook.Options{})
	a := createRequest(t, pod, "team-a")
	b := createRequest(t, pod, "team-a")
	b.UID = "another-request"
	ga := applyPatch(t, a, h.Handle(context.Background(), a)).Annotations["fairway.dev/pod-group"]
	gb := applyPatch(t, b, h.Handle(context.Background(), b)).Annotations["fairway.dev/pod-group"]
	if !strings.HasPrefix(ga, "pod-web-7d9f-") || ga == gb {
		t.Errorf("pod groups %q and %q: want distinct names per creation, prefixed pod-web-7d9f-", ga, gb)
	}
}

func TestDryRunIsTheSame(t *testing.T) {
	pod := adaptertest.LoadPod(t, "../adapters/argo/testdata/step-gpu.yaml")
	h := newHandler(defaultState(), nil, mutatingwebhook.Options{})
	req := createRequest(t, pod, pod.Namespace)
	dry := createRequest(t, pod, pod.Namespace)
	dry.DryRun = ptr.To(true)
	if diff := cmp.Diff(applyPatch(t, req, h.Handle(context.Background(), req)), applyPatch(t, dry, h.Handle(context.Background(), dry))); diff != "" {
		t.Errorf("dry run differs (-real +dry):\n%s", diff)
	}
}

func TestGuard(t *testing.T) {
	g := mutatingwebhook.NewGuardHandler(defaultState(), mutatingwebhook.Options{ProtectedNamespaces: []string{"kube-system"}})
	cases := map[string]struct {
		pod     *corev1.Pod
		ns      string
		allowed bool
	}{
		"asks for fairway in a served namespace": {pod: makePod("p").scheduler("fairway").obj(), ns: "team-a", allowed: true},
		"asks for fairway elsewhere":             {pod: makePod("p").scheduler("fairway").obj(), ns: "elsewhere"},
		"opted out and asks for fairway":         {pod: makePod("p").scheduler("fairway").label("fairway.dev/ignore", "true").obj(), ns: "team-a"},
		"another scheduler":                      {pod: makePod("p").scheduler("volcano").obj(), ns: "elsewhere", allowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := g.Handle(context.Background(), createRequest(t, tc.pod, tc.ns))
			if resp.Allowed != tc.allowed || len(resp.Patches) > 0 {
				t.Errorf("allowed = %v (%v), want %v and no patch", resp.Allowed, resp.Result, tc.allowed)
			}
		})
	}
}

// podBuilder builds test pods: one container "c" in namespace team-a unless told otherwise.
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{p: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}}
}

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	b.p.Labels[k] = v
	return b
}

func (b *podBuilder) annotate(k, v string) *podBuilder {
	if b.p.Annotations == nil {
		b.p.Annotations = map[string]string{}
	}
	b.p.Annotations[k] = v
	return b
}

func (b *podBuilder) scheduler(name string) *podBuilder { b.p.Spec.SchedulerName = name; return b }
func (b *podBuilder) node(name string) *podBuilder      { b.p.Spec.NodeName = name; return b }

func (b *podBuilder) limits(l corev1.ResourceList) *podBuilder {
	b.p.Spec.Containers[0].Resources.Limits = l
	return b
}

func (b *podBuilder) env(k, v string) *podBuilder {
	b.p.Spec.Containers[0].Env = append(b.p.Spec.Containers[0].Env, corev1.EnvVar{Name: k, Value: v})
	return b
}

func (b *podBuilder) owner(apiVersion, kind, name string) *podBuilder {
	b.p.OwnerReferences = append(b.p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)})
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.p }

// With an admission key, every pod the webhook hands to fairway leaves sealed: the seal verifies
// on the pod as created (in the request's namespace), a seal the author wrote is replaced, and
// without a key an author's seal is removed.
func TestAdmissionSeal(t *testing.T) {
	key := fairwayv1.AdmissionKey(strings.Repeat("s", 32))
	pod := makePod("p").annotate("gpu-fraction", "0.5").annotate(fairwayv1.AdmittedAnnotation, "v1:forged").obj()
	req := createRequest(t, pod, "team-a")
	got := applyPatch(t, req, newHandler(defaultState(), nil, mutatingwebhook.Options{AdmissionKey: key}).Handle(context.Background(), req))
	if got.Namespace == "" {
		got.Namespace = "team-a"
	}
	if err := key.VerifyAdmission(got); err != nil {
		t.Errorf("the admitted pod's seal: %v (annotations %v)", err, got.Annotations)
	}
	got = applyPatch(t, req, newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req))
	if v, ok := got.Annotations[fairwayv1.AdmittedAnnotation]; ok {
		t.Errorf("without a key the author's seal %q was kept", v)
	}
}
