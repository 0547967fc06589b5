package mutatingwebhook_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestImmutableKeys sends ImmutableHandler updates of a pod the webhook admitted (the ray-worker
// golden pod) and compares each AdmissionReview, request and response, with a golden file in
// testdata/update (regenerate with -update and review the diff). Every queue label, the gang, the
// preemptibility and the GPU share are refused by name with the old and new value; other changes,
// and any change of a pod fairway did not admit, are allowed.
func TestImmutableKeys(t *testing.T) {
	admitted := readGoldenPod(t, "ray-worker")
	admitted.Namespace, admitted.Name = "team-ray", "rc-gpu-gpu-group-worker-x7k2p"
	unmanaged := admitted.DeepCopy()
	delete(unmanaged.Labels, fairwayv1.ManagedLabel)
	cases := map[string]struct {
		old    *corev1.Pod
		edit   func(*corev1.Pod)
		denied []string // keys the message must name; none: allowed
	}{
		"fairway-queue-relabel": {edit: label(fairwayv1.QueueLabel, "team-b"), denied: []string{`label "fairway.dev/queue" may not change after admission (was "ray-team", now "team-b")`}},
		"runai-queue-added":     {edit: label(fairwayv1.RunAIQueueLabel, "team-b"), denied: []string{`label "runai/queue" may not change after admission (was unset, now "team-b")`}},
		"kai-queue-added":       {edit: label(fairwayv1.KAIQueueLabel, "team-b"), denied: []string{`label "kai.scheduler/queue" may not change after admission (was unset, now "team-b")`}},
		"queue-removed":         {edit: unlabel(fairwayv1.QueueLabel), denied: []string{`label "fairway.dev/queue" may not change after admission (was "ray-team", now unset)`}},
		"gang-renamed":          {edit: annotate(fairwayv1.PodGroupAnnotation, "ray-other"), denied: []string{`annotation "fairway.dev/pod-group"`}},
		"gang-reshaped": {
			edit: func(p *corev1.Pod) {
				annotate(fairwayv1.MinMemberAnnotation, "1")(p)
				annotate(fairwayv1.SubGroupAnnotation, "headgroup")(p)
				annotate(fairwayv1.SubGroupsAnnotation, "gpu-group=1")(p)
			},
			denied: []string{`annotation "fairway.dev/min-member" may not change after admission (was "7", now "1")`,
				`annotation "fairway.dev/sub-group" may not change after admission (was "gpu-group", now "headgroup")`,
				`annotation "fairway.dev/sub-groups" may not change after admission (was "headgroup=1,cpu-group=2,gpu-group=4", now "gpu-group=1")`},
		},
		"made-non-preemptible": {edit: label(fairwayv1.PreemptibilityLabel, "non-preemptible"), denied: []string{`label "fairway.dev/preemptibility" may not change after admission (was unset, now "non-preemptible")`}},
		"gpu-share-changed": {
			edit: func(p *corev1.Pod) {
				annotate(fairwayv1.GPUFractionAnnotation, "0.25")(p)
				annotate(fairwayv1.GPUMemoryAliasAnnotation, "4000")(p)
			},
			denied: []string{`annotation "fairway.dev/gpu-fraction" may not change after admission (was "0.5", now "0.25")`, `annotation "gpu-memory" may not change after admission (was unset, now "4000")`},
		},
		"managed-label-dropped": {
			edit:   func(p *corev1.Pod) { unlabel(fairwayv1.ManagedLabel)(p); label(fairwayv1.QueueLabel, "team-b")(p) },
			denied: []string{`label "fairway.dev/queue"`, `label "fairway.dev/managed" may not change after admission (was "true", now unset)`},
		},
		"other-keys-allowed": {edit: func(p *corev1.Pod) {
			label("app", "demo")(p)
			annotate(fairwayv1.GPUIndexAnnotation, "3")(p)
			p.Finalizers = append(p.Finalizers, "example.com/cleanup")
		}},
		"unmanaged-pod-allowed": {old: unmanaged, edit: label(fairwayv1.RunAIQueueLabel, "team-b")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := admitted
			if tc.old != nil {
				old = tc.old
			}
			cur := old.DeepCopy()
			tc.edit(cur)
			req := updateRequest(t, old, cur)
			resp := mutatingwebhook.ImmutableHandler{}.Handle(context.Background(), req)
			if tc.denied == nil {
				if !resp.Allowed || len(resp.Patches) > 0 {
					t.Fatalf("refused or patched: %+v", resp)
				}
			} else {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != 403 {
					t.Fatalf("want a 403 denial, got %+v", resp)
				}
				for _, want := range tc.denied {
					if !strings.Contains(resp.Result.Message, want) {
						t.Errorf("message %q does not say %q", resp.Result.Message, want)
					}
				}
			}
			review := admissionv1.AdmissionReview{TypeMeta: metaAdmissionReview, Request: &req.AdmissionRequest, Response: &resp.AdmissionResponse}
			out, err := yaml.Marshal(review)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "update", name+".yaml")
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
				t.Errorf("review differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestImmutableHandlerIgnoresOtherRequests: creations, subresources and deletions pass.
func TestImmutableHandlerIgnoresOtherRequests(t *testing.T) {
	pod := readGoldenPod(t, "ray-worker")
	cur := pod.DeepCopy()
	cur.Labels[fairwayv1.QueueLabel] = "team-b"
	status := updateRequest(t, pod, cur)
	status.SubResource = "status"
	create := updateRequest(t, pod, cur)
	create.Operation, create.OldObject = admissionv1.Create, runtime.RawExtension{}
	for name, req := range map[string]admission.Request{"status": status, "create": create} {
		if resp := (mutatingwebhook.ImmutableHandler{}).Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("%s: refused: %v", name, resp.Result)
		}
	}
	noOld := updateRequest(t, pod, cur)
	noOld.OldObject = runtime.RawExtension{}
	if resp := (mutatingwebhook.ImmutableHandler{}).Handle(context.Background(), noOld); resp.Allowed || resp.Result.Code != 400 {
		t.Errorf("an update without the old object: want 400, got %+v", resp)
	}
}

func readGoldenPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(b, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// updateRequest is the AdmissionRequest the API server sends for an update of old to cur.
func updateRequest(t *testing.T, old, cur *corev1.Pod) admission.Request {
	t.Helper()
	rawOld, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cur)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("2b1f0c3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: cur.Namespace,
		Name:      cur.Name,
		Operation: admissionv1.Update,
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: rawOld},
	}}
}

func label(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[k] = v }
}

func unlabel(k string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { delete(p.Labels, k) }
}

func annotate(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations[k] = v }
}
