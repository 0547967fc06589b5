package mutatingwebhook_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/registry"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// staticState is a ClusterState for tests: queues by namespace, priority classes, GPU memory.
type staticState struct {
	queues          map[string][]string // namespace -> serving queues
	extraQueues     []string            // queues that exist but serve no namespace of interest
	priorityClasses []string
	globalDefault   string
	gpuMemoryMiB    int64
	admit           map[string]fairwayv1.AdmitPolicy  // queue -> spec.admit; unset: the default
	policies        map[string]*fairwayv1.QueuePolicy // queue -> spec.policy
	parents         map[string]string                 // queue -> spec.parent
}

func (s *staticState) QueuesServing(_ context.Context, ns string) ([]string, error) {
	return s.queues[ns], nil
}

func (s *staticState) QueueExists(_ context.Context, name string) (bool, error) {
	for _, qs := range s.queues {
		if slices.Contains(qs, name) {
			return true, nil
		}
	}
	return slices.Contains(s.extraQueues, name), nil
}

func (s *staticState) QueueAdmit(_ context.Context, name string) (fairwayv1.AdmitPolicy, error) {
	return s.admit[name].Effective(), nil
}

func (s *staticState) QueuePolicies(_ context.Context, name string) ([]fairwayv1.PolicyLevel, error) {
	return fairwayv1.PolicyChain(name, func(name string) (*fairwayv1.QueueSpec, error) {
		return &fairwayv1.QueueSpec{Parent: s.parents[name], Policy: s.policies[name]}, nil
	})
}

func (s *staticState) LargestGPUMemoryMiB() int64 { return s.gpuMemoryMiB }

func (s *staticState) PriorityClassExists(_ context.Context, name string) (bool, error) {
	return slices.Contains(s.priorityClasses, name), nil
}

func (s *staticState) GlobalDefaultPriorityClass(context.Context) (string, error) {
	return s.globalDefault, nil
}

// defaultState: every fixture namespace is served by one queue (shared by two); fairway's
// priority classes exist; the largest GPU has 80 GiB.
func defaultState() *staticState {
	return &staticState{
		queues: map[string][]string{
			"team-a":              {"team-a"},
			"team-ray":            {"ray-team"},
			"team-train":          {"train-team"},
			"jhub":                {"notebooks"},
			"kubeflow-user-alice": {"alice"},
			"kubeflow-user-bob":   {"bob"},
			"shared":              {"research", "vision"},
		},
		extraQueues:     []string{"team-b"},
		priorityClasses: []string{"fairway-training", "fairway-interactive", "fairway-inference"},
		gpuMemoryMiB:    81920,
		// team-a and shared take every pod, so that the tests of the other rules can use plain
		// CPU pods; the other namespaces keep the default (Frameworks).
		admit: map[string]fairwayv1.AdmitPolicy{"team-a": fairwayv1.AdmitAll, "research": fairwayv1.AdmitAll},
	}
}

func newHandler(state mutatingwebhook.ClusterState, objects adapters.ObjectReader, opts mutatingwebhook.Options) *mutatingwebhook.Handler {
	if opts.ProtectedNamespaces == nil {
		opts.ProtectedNamespaces = []string{"kube-system", "fairway-system"}
	}
	if opts.TakeOverSchedulers == nil {
		opts.TakeOverSchedulers = mutatingwebhook.DefaultTakeOverSchedulers
	}
	if objects == nil {
		objects = adaptertest.NewReader()
	}
	return mutatingwebhook.NewHandler(mutatingwebhook.NewPodDefaulter(registry.All(), state, objects, opts))
}

// createRequest is the AdmissionRequest the API server sends for creating pod. The pod body is
// sent as the client wrote it: with generateName and no namespace, when the client left them so.
func createRequest(t testing.TB, pod *corev1.Pod, namespace string) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("7f3c9a2e-0b1d-4e5f-8a6b-1c2d3e4f5a6b"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: namespace,
		Name:      pod.Name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

// applyPatch applies the response's JSON patch to the raw object of req, as the API server does,
// and decodes the result.
func applyPatch(t testing.TB, req admission.Request, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw := req.Object.Raw
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("decoding the patch %s: %v", ops, err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatalf("applying the patch %s: %v", ops, err)
		}
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatalf("decoding the patched pod: %v", err)
	}
	return pod
}

var metaAdmissionReview = metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
