package mutatingwebhook_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestWorkloadKinds: the kind decides the priority class and preemptibility of pods that choose
// neither, a queue's policy for the kind overrides the kind's defaults, and a user's
// fairway.dev/workload-kind label names the kind of pods no framework claims.
func TestWorkloadKinds(t *testing.T) {
	// A replica of a Deployment that names no priority class, as the API server's Priority
	// plugin leaves it (no global default: priority 0).
	replica := func(labels ...string) *corev1.Pod {
		b := makePod("").owner("apps/v1", "ReplicaSet", "serve-5d8f7c6b9")
		for i := 0; i+1 < len(labels); i += 2 {
			b = b.label(labels[i], labels[i+1])
		}
		p := b.obj()
		p.GenerateName = "serve-5d8f7c6b9-"
		p.Spec.Containers[0].Image = "registry.local/llm-server:3"
		return withPriority(p, "", 0)
	}
	vllm := func() *corev1.Pod {
		p := replica()
		p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
		return p
	}
	inferencePolicy := func(rules fairwayv1.PolicyRules) func(*staticState) {
		return func(s *staticState) {
			s.policies = map[string]*fairwayv1.QueuePolicy{"team-a": {Workloads: []fairwayv1.WorkloadPolicy{{Kind: fairwayv1.KindInference, PolicyRules: rules}}}}
		}
	}
	cases := map[string]struct {
		pod         *corev1.Pod
		state       func(*staticState)
		wantKind    fairwayv1.WorkloadKind
		wantClass   string
		wantPreempt string
		wantDenied  string
	}{
		"vLLM replica without a class: inference, fairway-inference, non-preemptible": {
			pod: vllm(), wantKind: fairwayv1.KindInference, wantClass: "fairway-inference", wantPreempt: "non-preemptible",
		},
		"a Deployment labelled inference: the same": {
			pod: replica(fairwayv1.WorkloadKindLabel, "inference"), wantKind: fairwayv1.KindInference, wantClass: "fairway-inference", wantPreempt: "non-preemptible",
		},
		"the same Deployment unlabelled: a plain pod at the cluster default": {
			pod: replica(), wantKind: fairwayv1.KindPod,
		},
		"a user's class is theirs: kept, and preemptibility follows it": {
			pod: withPriority(vllm(), "serving-critical", 1000), wantKind: fairwayv1.KindInference, wantClass: "serving-critical",
		},
		"a user's preemptibility label is kept": {
			pod: func() *corev1.Pod {
				p := replica(fairwayv1.PreemptibilityLabel, "preemptible")
				p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
				return p
			}(),
			wantKind: fairwayv1.KindInference, wantClass: "fairway-inference", wantPreempt: "preemptible",
		},
		"the queue makes its inference preemptible (it may then borrow)": {
			pod: vllm(), state: inferencePolicy(fairwayv1.PolicyRules{Preemptibility: ptr.To(fairwayv1.Preemptible)}),
			wantKind: fairwayv1.KindInference, wantClass: "fairway-inference", wantPreempt: "preemptible",
		},
		"the queue names another class for its inference": {
			pod: vllm(), state: inferencePolicy(fairwayv1.PolicyRules{PriorityClassName: ptr.To("fairway-interactive")}),
			wantKind: fairwayv1.KindInference, wantClass: "fairway-interactive", wantPreempt: "non-preemptible",
		},
		"a kind label that is no kind is refused": {
			pod:        replica(fairwayv1.WorkloadKindLabel, "serving"),
			wantDenied: `label fairway.dev/workload-kind "serving": must be one of notebook, training, pipeline-step, workflow-step, ray, pod, inference`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			state := defaultState()
			if tc.state != nil {
				tc.state(state)
			}
			req := createRequest(t, tc.pod, "team-a")
			resp := newHandler(state, adaptertest.NewReader(), mutatingwebhook.Options{}).Handle(context.Background(), req)
			if tc.wantDenied != "" {
				if resp.Allowed || !strings.Contains(resp.Result.Message, tc.wantDenied) {
					t.Fatalf("response %v, want a denial containing %q", resp.Result, tc.wantDenied)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			got := applyPatch(t, req, resp)
			if k := fairwayv1.WorkloadKind(got.Annotations[fairwayv1.WorkloadKindAnnotation]); k != tc.wantKind {
				t.Errorf("kind = %q, want %q", k, tc.wantKind)
			}
			if got.Spec.PriorityClassName != tc.wantClass {
				t.Errorf("priorityClassName = %q, want %q", got.Spec.PriorityClassName, tc.wantClass)
			}
			if p := got.Labels[fairwayv1.PreemptibilityLabel]; p != tc.wantPreempt {
				t.Errorf("preemptibility label = %q, want %q", p, tc.wantPreempt)
			}
		})
	}
}
