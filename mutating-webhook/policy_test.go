package mutatingwebhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// policyState: the notebooks queue (namespace jhub) is a child of department research, whose
// policy puts notebooks on T4 and L4 with a quarter GPU by default and at most half a GPU, and
// everything else on H100 and A100; team-a (namespace team-a, plain pods) sits under it too.
func policyState() *staticState {
	s := defaultState()
	s.parents = map[string]string{"notebooks": "research-dept", "team-a": "research-dept"}
	s.policies = map[string]*fairwayv1.QueuePolicy{
		"research-dept": {
			PolicyRules: fairwayv1.PolicyRules{GPUTypes: []string{"H100", "A100"}},
			Workloads: []fairwayv1.WorkloadPolicy{{
				Kind: fairwayv1.KindNotebook,
				PolicyRules: fairwayv1.PolicyRules{
					GPUTypes:      []string{"T4", "L4"},
					DefaultGPU:    &fairwayv1.DefaultGPU{Fraction: ptr.To("0.25")},
					MaxGPUsPerPod: ptr.To(resource.MustParse("0.5")),
				},
			}},
		},
	}
	return s
}

// notebook is z2jh's notebook pod as KubeSpawner makes it, asking for no GPU.
func notebook(t *testing.T) *corev1.Pod {
	pod := adaptertest.LoadPod(t, "../adapters/jupyterhub/testdata/z2jh-notebook.yaml")
	for _, k := range []string{fairwayv1.GPUFractionAnnotation, fairwayv1.GPUFractionAliasAnnotation, fairwayv1.GPUMemoryAnnotation, fairwayv1.GPUMemoryAliasAnnotation} {
		delete(pod.Annotations, k)
	}
	for i := range pod.Spec.Containers {
		delete(pod.Spec.Containers[i].Resources.Limits, fairwayv1.ResourceGPU)
		delete(pod.Spec.Containers[i].Resources.Requests, fairwayv1.ResourceGPU)
	}
	pod.Namespace = ""
	return pod
}

// TestPolicyDefaultGPU: a notebook that asks for nothing gets its kind's default share, wired as
// a share the user wrote would be, and the creator is told where it came from.
func TestPolicyDefaultGPU(t *testing.T) {
	h := newHandler(policyState(), nil, mutatingwebhook.Options{})
	req := createRequest(t, notebook(t), "jhub")
	resp := h.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	got := applyPatch(t, req, resp)
	if v := got.Annotations[fairwayv1.GPUFractionAnnotation]; v != "0.25" {
		t.Errorf("%s = %q, want the policy's default 0.25", fairwayv1.GPUFractionAnnotation, v)
	}
	if _, ok := got.Spec.Containers[0].Resources.Limits[fairwayv1.ResourceGPUShare]; !ok {
		t.Errorf("the default share was not wired like a user's (no %s)", fairwayv1.ResourceGPUShare)
	}
	want := "queue research-dept's policy for notebook pods gave it fairway.dev/gpu-fraction 0.25"
	if !strings.Contains(strings.Join(resp.Warnings, "\n"), want) {
		t.Errorf("warnings %q, want one containing %q", resp.Warnings, want)
	}

	// Whole GPUs by default go on the adapter's GPU container, requests and limits.
	s := policyState()
	s.policies["research-dept"].Workloads[0].DefaultGPU = &fairwayv1.DefaultGPU{GPUs: ptr.To[int32](1)}
	s.policies["research-dept"].Workloads[0].MaxGPUsPerPod = nil
	req = createRequest(t, notebook(t), "jhub")
	resp = newHandler(s, nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	got = applyPatch(t, req, resp)
	c := got.Spec.Containers[0]
	if c.Name != "notebook" || c.Resources.Limits.Name(fairwayv1.ResourceGPU, resource.DecimalSI).Value() != 1 ||
		c.Resources.Requests.Name(fairwayv1.ResourceGPU, resource.DecimalSI).Value() != 1 {
		t.Errorf("container %s resources %+v, want nvidia.com/gpu 1 in requests and limits of notebook", c.Name, c.Resources)
	}

	// A pod that asks for a GPU keeps its own request.
	pod := notebook(t)
	pod.Annotations[fairwayv1.GPUFractionAnnotation] = "0.5"
	req = createRequest(t, pod, "jhub")
	resp = h.Handle(context.Background(), req)
	if got := applyPatch(t, req, resp); !resp.Allowed || got.Annotations[fairwayv1.GPUFractionAnnotation] != "0.5" {
		t.Errorf("allowed %v, fraction %q: want the pod's own 0.5", resp.Allowed, got.Annotations[fairwayv1.GPUFractionAnnotation])
	}
}

// TestPolicyRefusals: a pod that breaks its queue's policy is refused, and the message names the
// rule, the queue that set it and what it allows.
func TestPolicyRefusals(t *testing.T) {
	cases := map[string]struct {
		pod     func(t *testing.T) *corev1.Pod
		ns      string
		wantMsg string
	}{
		"notebook pinned to H100": {
			pod: func(t *testing.T) *corev1.Pod {
				p := notebook(t)
				p.Spec.NodeSelector = map[string]string{fairwayv1.GPUTypeLabel: "H100"}
				return p
			},
			ns:      "jhub",
			wantMsg: "queue research-dept's policy for notebook pods allows GPU types L4, T4; the pod asks for H100 (nodeSelector fairway.dev/gpu-type)",
		},
		"notebook above the per-pod cap": {
			pod: func(t *testing.T) *corev1.Pod {
				p := notebook(t)
				p.Annotations[fairwayv1.GPUFractionAnnotation] = "0.75"
				return p
			},
			ns:      "jhub",
			wantMsg: "queue research-dept's policy for notebook pods allows at most 0.5 GPU per pod; the pod asks for 0.75 of a GPU (fairway.dev/gpu-fraction)",
		},
		"notebook with whole GPUs above the per-pod cap": {
			pod: func(t *testing.T) *corev1.Pod {
				p := notebook(t)
				p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}}}}
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("2")}
				return p
			},
			ns:      "jhub",
			wantMsg: "queue research-dept's policy for notebook pods allows at most 0.5 GPU per pod; the pod asks for 2 GPUs (nvidia.com/gpu)",
		},
		"notebook with one whole GPU above the per-pod cap": {
			pod: func(t *testing.T) *corev1.Pod {
				p := notebook(t)
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
				return p
			},
			ns:      "jhub",
			wantMsg: "queue research-dept's policy for notebook pods allows at most 0.5 GPU per pod; the pod asks for 1 GPU (nvidia.com/gpu)",
		},
		"plain pod whose affinity allows only T4": {
			pod: func(*testing.T) *corev1.Pod {
				p := makePod("p").obj()
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: fairwayv1.GPUTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"T4", "L4"}}}}}}}}
				return p
			},
			ns:      "team-a",
			wantMsg: "queue research-dept's policy for pod pods allows GPU types A100, H100; the pod asks for L4, T4 (required node affinity on fairway.dev/gpu-type)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := newHandler(policyState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), createRequest(t, tc.pod(t), tc.ns))
			if resp.Allowed {
				t.Fatalf("allowed, want denied with %q", tc.wantMsg)
			}
			if resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantMsg) {
				t.Errorf("result = %+v, want 403 with a message containing %q", resp.Result, tc.wantMsg)
			}
		})
	}

	// One allowed type among the pinned ones is enough: the scheduler keeps the pod to it.
	p := makePod("p").obj()
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: fairwayv1.GPUTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"T4", "H100"}}}}}}}}
	if resp := newHandler(policyState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), createRequest(t, p, "team-a")); !resp.Allowed {
		t.Errorf("denied a pod that may run on H100: %v", resp.Result)
	}
}

// TestNoPolicyChangesNothing: queues without policies admit as before (the golden files of
// TestFrameworkPods pin the rest).
func TestNoPolicyChangesNothing(t *testing.T) {
	req := createRequest(t, notebook(t), "jhub")
	resp := newHandler(defaultState(), nil, mutatingwebhook.Options{}).Handle(context.Background(), req)
	if got := applyPatch(t, req, resp); !resp.Allowed || got.Annotations[fairwayv1.GPUFractionAnnotation] != "" {
		t.Errorf("allowed %v, fraction %q: want a notebook without a GPU", resp.Allowed, got.Annotations[fairwayv1.GPUFractionAnnotation])
	}
}
