package mutatingwebhook_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// Service pods as the charts of z2jh and Kubeflow Pipelines make them: Deployment pods with no GPU
// and nothing of fairway's.
func hubPod() *corev1.Pod {
	return makePod("hub-7c9d8b6f5-x2k4p").label("app", "jupyterhub").label("component", "hub").label("release", "jhub").
		owner("apps/v1", "ReplicaSet", "hub-7c9d8b6f5").obj()
}

func proxyPod() *corev1.Pod {
	return makePod("proxy-5d8f9c7b4-q9w8e").label("app", "jupyterhub").label("component", "proxy").label("release", "jhub").
		label("hub.jupyter.org/network-access-hub", "true").owner("apps/v1", "ReplicaSet", "proxy-5d8f9c7b4").obj()
}

func mlPipelinePod() *corev1.Pod {
	return makePod("ml-pipeline-6b7f9d8c4-zt5kq").label("app", "ml-pipeline").label("application-crd-id", "kubeflow-pipelines").
		owner("apps/v1", "ReplicaSet", "ml-pipeline-6b7f9d8c4").obj()
}

func mysqlPod() *corev1.Pod {
	return makePod("mysql-5b9c8d7f6-r4t7y").label("app", "mysql").owner("apps/v1", "ReplicaSet", "mysql-5b9c8d7f6").obj()
}

var oneGPU = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}

// TestAdmitPolicy: what each spec.admit value hands to fairway, and what it leaves to the pod's
// own scheduler, untouched.
func TestAdmitPolicy(t *testing.T) {
	rayObjects := adaptertest.LoadObjects(t, "../adapters/kuberay/testdata/raycluster.yaml")
	for _, o := range rayObjects {
		o.SetLabels(nil) // no queue named on the RayCluster: the head is taken for its gang
	}
	rayHead := func() *corev1.Pod { return adaptertest.LoadPod(t, "../adapters/kuberay/testdata/head.yaml") }
	cpuArgoStep := func() *corev1.Pod {
		p := adaptertest.LoadPod(t, "../adapters/argo/testdata/step-gpu.yaml")
		for i := range p.Spec.Containers {
			delete(p.Spec.Containers[i].Resources.Limits, fairwayv1.ResourceGPU)
			delete(p.Spec.Containers[i].Resources.Requests, fairwayv1.ResourceGPU)
		}
		delete(p.Annotations, fairwayv1.GPUFractionAnnotation)
		return p
	}
	pods := map[string]func() *corev1.Pod{
		"z2jh hub":           hubPod,
		"z2jh proxy":         proxyPod,
		"KFP ml-pipeline":    mlPipelinePod,
		"MySQL":              mysqlPod,
		"whole GPU":          func() *corev1.Pod { return makePod("gpu").limits(oneGPU).obj() },
		"GPU share (Run:ai)": func() *corev1.Pod { return makePod("share").annotate("gpu-fraction", "0.5").obj() },
		"fairway label": func() *corev1.Pod {
			return makePod("labelled").label(fairwayv1.PreemptibilityLabel, "preemptible").obj()
		},
		"Run:ai queue label": func() *corev1.Pod { return makePod("runai").label(fairwayv1.RunAIQueueLabel, "apps").obj() },
		"notebook": func() *corev1.Pod {
			return adaptertest.LoadPod(t, "../adapters/jupyterhub/testdata/z2jh-notebook.yaml")
		},
		"Ray head (gang)": rayHead,
		"Argo CPU step":   cpuArgoStep,
		"DaemonSet pod":   func() *corev1.Pod { return makePod("ds").owner("apps/v1", "DaemonSet", "agent").obj() },
	}
	// taken[policy] lists the pods the policy hands to fairway; every other pod is left alone.
	taken := map[fairwayv1.AdmitPolicy][]string{
		"":                 {"whole GPU", "GPU share (Run:ai)", "fairway label", "Run:ai queue label", "notebook", "Ray head (gang)", "Argo CPU step"},
		fairwayv1.AdmitGPU: {"whole GPU", "GPU share (Run:ai)", "fairway label", "Run:ai queue label", "notebook", "Ray head (gang)"},
		fairwayv1.AdmitAll: {"z2jh hub", "z2jh proxy", "KFP ml-pipeline", "MySQL", "whole GPU", "GPU share (Run:ai)", "fairway label",
			"Run:ai queue label", "notebook", "Ray head (gang)", "Argo CPU step"},
	}
	taken[fairwayv1.AdmitFrameworks] = taken[""]
	for policy, want := range taken {
		for name, mk := range pods {
			label := string(policy)
			if label == "" {
				label = "unset"
			}
			t.Run(label+"/"+name, func(t *testing.T) {
				state := defaultState()
				// The fixture's namespace keeps its queue, which gets this policy.
				pod := mk()
				ns := pod.Namespace
				if ns == "" {
					ns = "apps"
					state.queues[ns] = []string{"apps"}
				}
				queue := state.queues[ns][0]
				state.admit = map[string]fairwayv1.AdmitPolicy{queue: policy}
				pod.Namespace = ""
				req := createRequest(t, pod, ns)
				resp := newHandler(state, adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{}).Handle(context.Background(), req)
				if !resp.Allowed {
					t.Fatalf("denied: %v", resp.Result)
				}
				got := applyPatch(t, req, resp)
				wantTaken := slices.Contains(want, name)
				if isTaken := got.Spec.SchedulerName == fairwayv1.SchedulerName; isTaken != wantTaken {
					t.Errorf("handed to fairway = %v, want %v (schedulerName %q, labels %v)", isTaken, wantTaken, got.Spec.SchedulerName, got.Labels)
				}
				if !wantTaken && len(resp.Patches) > 0 {
					t.Errorf("a pod left alone was patched: %v", resp.Patches)
				}
				if wantTaken && got.Labels[fairwayv1.QueueLabel] != queue {
					t.Errorf("queue label %q, want %s", got.Labels[fairwayv1.QueueLabel], queue)
				}
			})
		}
	}
}

// TestAdmitWidestOfSharedNamespace: a namespace served by several queues takes what the widest
// of their policies takes.
func TestAdmitWidestOfSharedNamespace(t *testing.T) {
	state := defaultState()
	state.admit = map[string]fairwayv1.AdmitPolicy{"research": fairwayv1.AdmitGPU, "vision": fairwayv1.AdmitAll}
	pod := makePod("cpu").label(fairwayv1.QueueLabel, "vision").obj()
	req := createRequest(t, pod, "shared")
	got := applyPatch(t, req, newHandler(state, nil, mutatingwebhook.Options{}).Handle(context.Background(), req))
	if got.Spec.SchedulerName != fairwayv1.SchedulerName {
		t.Errorf("not taken under All: %q", got.Spec.SchedulerName)
	}
	if got, want := fairwayv1.Widest(fairwayv1.AdmitGPU, "", fairwayv1.AdmitGPU), fairwayv1.AdmitFrameworks; got != want {
		t.Errorf("Widest(GPU, unset, GPU) = %q, want %q", got, want)
	}
}

// TestUnevaluatedConstraintsGoToKubeScheduler: a pod fairway would take but whose requirements
// fairway's scheduler does not evaluate is left to its own scheduler, with a warning saying so,
// unless it asks for whole GPUs: kube-scheduler would give it GPUs charged to no queue, so it is
// refused, saying why and what to use instead. One that names fairway's scheduler itself is still
// taken (the scheduler then reports UnsupportedConstraint).
func TestUnevaluatedConstraintsGoToKubeScheduler(t *testing.T) {
	term := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}
	cases := map[string]struct {
		mutate func(*corev1.Pod)
		want   string
	}{
		"required anti-affinity": {func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}, "required inter-pod anti-affinity"},
		"required affinity": {func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}, "required inter-pod affinity"},
		"DoNotSchedule spread": {func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, "topology spread constraints (DoNotSchedule)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// No GPU (fairway takes it under spec.admit All): left to kube-scheduler, warned.
			pod := makePod("constrained").obj()
			tc.mutate(pod)
			req := createRequest(t, pod, "team-a") // team-a's queue takes every pod (defaultState)
			resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
			if !resp.Allowed || len(resp.Patches) > 0 {
				t.Fatalf("want allowed and untouched; got %v, patches %v", resp.Result, resp.Patches)
			}
			want := "fairway: pod uses " + tc.want + ", which fairway does not evaluate, so it is left to scheduler default-scheduler: "
			if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], want) {
				t.Errorf("warnings %q, want one starting %q", resp.Warnings, want)
			}

			// A GPU: refused.
			pod.Spec.Containers[0].Resources.Limits = oneGPU
			resp = newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), createRequest(t, pod, "team-a"))
			want = "pod constrained asks for 1 nvidia.com/gpu (container c) in namespace team-a, which a fairway queue serves, but uses " + tc.want +
				", which fairway does not evaluate: GPUs here are placed by fairway and counted against the queue's quota"
			if resp.Allowed || !strings.HasPrefix(resp.Result.Message, want) || !strings.Contains(resp.Result.Message, "use a node selector, node affinity or a fairway topology annotation instead") {
				t.Errorf("a GPU pod: allowed %v, %q; want refused with %q...", resp.Allowed, resp.Result.Message, want)
			}

			// Named fairway's scheduler itself: taken, no warning from the webhook.
			pod.Spec.SchedulerName = fairwayv1.SchedulerName
			req = createRequest(t, pod, "team-a")
			resp = newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
			if got := applyPatch(t, req, resp); got.Labels[fairwayv1.ManagedLabel] != "true" {
				t.Errorf("a pod naming fairway was not taken: %v", got.Labels)
			}
		})
	}
	// Preferences are soft: taken.
	pod := makePod("prefers").limits(oneGPU).obj()
	pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term}}}}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}
	req := createRequest(t, pod, "team-a")
	resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
	if got := applyPatch(t, req, resp); got.Spec.SchedulerName != fairwayv1.SchedulerName || len(resp.Warnings) > 0 {
		t.Errorf("a pod with preferences only: scheduler %q, warnings %q", got.Spec.SchedulerName, resp.Warnings)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestDRAClaimsAreGPURequests: a pod whose GPUs come from ResourceClaims is fairway's (the
// scheduler allocates its claims, docs/dra.md), even under spec.admit GPU without a framework,
// and its claims are left as they are; unless a claim or its template asks for what fairway's
// allocator does not serve (capacity other than a GPU's memory): then the pod is refused, naming
// the claim, whether it names fairway's scheduler (it would be stranded) or not (kube-scheduler
// would allocate GPUs charged to no queue), unless the claim asks for no GPU (another kind of
// device: left to kube-scheduler with a warning). A share of a GPU by memory is fairway's.
func TestDRAClaimsAreGPURequests(t *testing.T) {
	template := func(name string, capacity resourceapi.QualifiedName) *unstructured.Unstructured {
		t := &resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		}
		t.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1}}}
		if capacity != "" {
			t.Spec.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{capacity: resource.MustParse("10Gi")}}
		}
		return toUnstructured(t)
	}
	mig := func(name string, count int64) *unstructured.Unstructured {
		t := &resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		}
		t.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: fairwayv1.NVIDIAMIGDeviceClass, Count: count}}}
		return toUnstructured(t)
	}
	claim := func(name string, allocated bool) *unstructured.Unstructured {
		c := &resourceapi.ResourceClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		}
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "part", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1,
			Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"multiprocessors": resource.MustParse("10")}}}}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		return toUnstructured(c)
	}
	nic := &resourceapi.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nic-bandwidth"},
	}
	nic.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma.example.com", Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}}}}}
	objects := adaptertest.NewReader(toUnstructured(nic), template("one-gpu", ""), template("part-gpu", "memory"), template("sm-gpu", "multiprocessors"), mig("one-mig", 1), mig("two-mig", 2), claim("shared-part", false), claim("taken-part", true))
	const leftAlone, refused, refusedGPUs = "left alone", "refused", "refused: GPUs outside fairway"
	cases := map[string]struct {
		claims []corev1.PodResourceClaim
		names  bool // spec.schedulerName: fairway
		want   string
		says   string
	}{
		"a template for a whole GPU":              {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one-gpu")}}},
		"a template not there yet":                {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("later")}}},
		"a claim allocated already":               {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptrTo("taken-part")}}},
		"a template for a share by memory":        {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("part-gpu")}}},
		"a template asking for other capacity":    {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("sm-gpu")}}, want: refusedGPUs, says: `ResourceClaimTemplate sm-gpu (request "gpu": capacity "multiprocessors"`},
		"a shared claim asking for capacity":      {claims: []corev1.PodResourceClaim{{Name: "a", ResourceClaimTemplateName: ptrTo("one-gpu")}, {Name: "b", ResourceClaimName: ptrTo("shared-part")}}, want: refusedGPUs, says: `ResourceClaim shared-part (request "part": capacity "multiprocessors" (a share of a GPU is counted by its "memory" only))`},
		"a MIG device":                            {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one-mig")}}},
		"two MIG devices in one request":          {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("two-mig")}}, want: refusedGPUs, says: `ResourceClaimTemplate two-mig (request "mig": more than one MIG device (a share is one MIG device))`},
		"two shares in two claims":                {claims: []corev1.PodResourceClaim{{Name: "a", ResourceClaimTemplateName: ptrTo("one-mig")}, {Name: "b", ResourceClaimTemplateName: ptrTo("part-gpu")}}, want: refusedGPUs, says: "the pod's claims ask for shares of GPUs (2) and whole GPUs (0)"},
		"a share and a whole GPU":                 {claims: []corev1.PodResourceClaim{{Name: "a", ResourceClaimTemplateName: ptrTo("one-gpu")}, {Name: "b", ResourceClaimTemplateName: ptrTo("part-gpu")}}, want: refusedGPUs, says: "the pod's claims ask for shares of GPUs (1) and whole GPUs (1)"},
		"capacity, naming fairway's scheduler":    {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("sm-gpu")}}, names: true, want: refused, says: `ResourceClaimTemplate sm-gpu (request "gpu": capacity "multiprocessors"`},
		"a whole GPU, naming fairway's scheduler": {claims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one-gpu")}}, names: true},
		"another device's capacity":               {claims: []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: ptrTo("nic-bandwidth")}}, want: leftAlone, says: `ResourceClaimTemplate nic-bandwidth (request "nic": capacity "bandwidth"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := makePod("dra").obj()
			pod.Spec.ResourceClaims = tc.claims
			if tc.names {
				pod.Spec.SchedulerName = fairwayv1.SchedulerName
			}
			state := defaultState()
			state.admit = map[string]fairwayv1.AdmitPolicy{"team-a": fairwayv1.AdmitGPU}
			req := createRequest(t, pod, "team-a")
			resp := newHandler(state, objects, mutatingwebhook.Options{}).Handle(context.Background(), req)
			switch tc.want {
			case refused:
				var msg string
				if resp.Result != nil {
					msg = resp.Result.Message
				}
				// Its claim asks for GPUs: kube-scheduler is no way out.
				if resp.Allowed || !strings.Contains(msg, tc.says) || !strings.Contains(msg, "fairway could never place it: ask for whole devices or for the memory of one device") {
					t.Fatalf("want refused naming %q; got allowed %v, %q", tc.says, resp.Allowed, msg)
				}
			case refusedGPUs:
				var msg string
				if resp.Result != nil {
					msg = resp.Result.Message
				}
				if resp.Allowed || !strings.Contains(msg, tc.says) || !strings.Contains(msg, "asks for GPUs in a way fairway does not serve") ||
					!strings.Contains(msg, "kube-scheduler would allocate them charged to no queue") {
					t.Fatalf("want refused naming %q and why; got allowed %v, %q", tc.says, resp.Allowed, msg)
				}
			case leftAlone:
				if !resp.Allowed || len(resp.Patches) > 0 {
					t.Fatalf("want allowed and untouched; got %v, patches %v", resp.Result, resp.Patches)
				}
				if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.says) || !strings.Contains(resp.Warnings[0], "left to scheduler default-scheduler") {
					t.Errorf("warnings %q, want one naming %q and default-scheduler", resp.Warnings, tc.says)
				}
			default:
				got := applyPatch(t, req, resp)
				if got.Spec.SchedulerName != fairwayv1.SchedulerName || len(resp.Warnings) > 0 {
					t.Fatalf("a DRA pod: scheduler %q, warnings %q; want fairway's, none", got.Spec.SchedulerName, resp.Warnings)
				}
				if !reflect.DeepEqual(got.Spec.ResourceClaims, tc.claims) {
					t.Errorf("claims changed: %+v", got.Spec.ResourceClaims)
				}
			}
		})
	}
}

func toUnstructured(obj any) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestNotebooksStayNonPreemptible: z2jh's scheduling.podPriority gives notebooks its own class,
// of value 0 (preemptible by priority); the notebook is marked non-preemptible all the same,
// unless its creator chose otherwise: the preemptibility label, or a class of their own.
func TestNotebooksStayNonPreemptible(t *testing.T) {
	for name, tc := range map[string]struct {
		class, label, want string
	}{
		"no class":                       {want: "non-preemptible"},
		"z2jh podPriority class":         {class: "jhub-default-priority", want: "non-preemptible"},
		"the cluster's global default":   {class: "cluster-default", want: "non-preemptible"},
		"user asks preemptible by label": {class: "jhub-default-priority", label: "preemptible", want: "preemptible"},
		// A profile's priority_class_name is the user's choice: its value decides, as for any pod.
		"user's own class": {class: fairwayv1.PriorityClassTraining, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, "../adapters/jupyterhub/testdata/z2jh-notebook.yaml")
			pod.Spec.PriorityClassName = tc.class
			if tc.class != "" {
				pod.Spec.Priority = ptrTo[int32](0)
			}
			if tc.label != "" {
				pod.Labels[fairwayv1.PreemptibilityLabel] = tc.label
			}
			state := defaultState()
			state.priorityClasses = append(state.priorityClasses, "jhub-default-priority", "cluster-default")
			state.globalDefault = "cluster-default"
			req := createRequest(t, pod, pod.Namespace)
			resp := newHandler(state, nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
			got := applyPatch(t, req, resp)
			if got.Labels[fairwayv1.PreemptibilityLabel] != tc.want {
				t.Errorf("preemptibility %q, want %q", got.Labels[fairwayv1.PreemptibilityLabel], tc.want)
			}
			if wantClass := tc.class; wantClass == "cluster-default" {
				if got.Spec.PriorityClassName != fairwayv1.PriorityClassInteractive {
					t.Errorf("the global default class was kept: %q", got.Spec.PriorityClassName)
				}
			} else if tc.class != "" && got.Spec.PriorityClassName != tc.class {
				t.Errorf("the class chosen for the pod changed: %q", got.Spec.PriorityClassName)
			}
		})
	}
}

// TestHelperNamingFairwayGoesBack: a workflow-wide schedulerName: fairway reaches KFP's drivers;
// fairway never schedules helpers, so the pod goes back to the default scheduler, with a warning,
// instead of waiting forever for a scheduler that ignores it.
func TestHelperNamingFairwayGoesBack(t *testing.T) {
	pod := adaptertest.LoadPod(t, "../adapters/kfp/testdata/driver-2.17.yaml")
	pod.Spec.SchedulerName = fairwayv1.SchedulerName
	req := createRequest(t, pod, pod.Namespace)
	resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
	got := applyPatch(t, req, resp)
	if got.Spec.SchedulerName != corev1.DefaultSchedulerName || got.Labels[fairwayv1.ManagedLabel] != "" {
		t.Errorf("scheduler %q, labels %v: want default-scheduler and no fairway labels", got.Spec.SchedulerName, got.Labels)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "Kubeflow Pipelines driver pod") {
		t.Errorf("warnings %q", resp.Warnings)
	}
}
