package mutatingwebhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// queueMap is a QueueReader over queue objects by name.
type queueMap map[string]*fairwayv1.Queue

func (m queueMap) Queue(_ context.Context, name string) (*fairwayv1.Queue, error) {
	return m[name], nil
}

func gpuQueue(name, parent string, mode fairwayv1.PipelineAdmission, quota, limit, requested string) *fairwayv1.Queue {
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}}
	q.Spec.Parent, q.Spec.PipelineAdmission = parent, mode
	if quota != "" || limit != "" {
		q.Spec.Resources.GPU = &fairwayv1.ResourceQuota{}
		if quota != "" {
			q.Spec.Resources.GPU.Quota = ptrQuantity(quota)
		}
		if limit != "" {
			q.Spec.Resources.GPU.Limit = ptrQuantity(limit)
		}
	}
	if requested != "" {
		q.Status.Requested = corev1.ResourceList{"gpu": resource.MustParse(requested)}
	}
	return q
}

func ptrQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// trainRun preprocesses on CPU, then trains on two pods of 4 GPUs at once, then evaluates on
// half a GPU: its peak is 8 GPUs.
const trainRun = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: prep, template: cpu}
      - {name: train-a, template: gpu4, depends: prep}
      - {name: train-b, template: gpu4, depends: prep}
      - {name: eval, template: half, depends: train-a && train-b}
  - name: cpu
    container: {image: x, resources: {requests: {cpu: "4"}}}
  - name: gpu4
    container: {image: x, resources: {limits: {nvidia.com/gpu: "4"}}}
  - name: half
    metadata: {annotations: {fairway.dev/gpu-fraction: "0.5"}}
    container: {image: x}
`

func workflowRequest(t *testing.T, doc string, mutate func(*unstructured.Unstructured)) admission.Request {
	t.Helper()
	wf := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &wf.Object); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(wf)
	}
	raw, err := json.Marshal(wf.Object)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind:      metav1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"},
		Resource:  metav1.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"},
		Namespace: "team-a", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}}
}

func TestWorkflowAdmission(t *testing.T) {
	peak := fairwayv1.PipelineAdmissionPeak
	cases := []struct {
		name    string
		queues  queueMap
		doc     string
		mutate  func(*unstructured.Unstructured)
		state   fairwayv1.RunAdmissionState // "" for no change
		reason  string
		suspend bool
	}{
		{name: "per pod by default", queues: queueMap{"team-a": gpuQueue("team-a", "", "", "4", "", "")}, doc: trainRun},
		{name: "held above the guarantee", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "4", "", "")}, doc: trainRun,
			state: fairwayv1.RunHeld, reason: string(fairwayv1.RunPeakAboveGuarantee), suspend: true},
		{name: "started within the guarantee", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "8.5", "", "")}, doc: trainRun,
			state: fairwayv1.RunAdmitted, reason: string(fairwayv1.RunPeakFits)},
		{name: "held when the queue already asks for its guarantee", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "8.5", "", "1")}, doc: trainRun,
			state: fairwayv1.RunHeld, reason: string(fairwayv1.RunPeakAboveGuarantee), suspend: true},
		{name: "inherited from the parent", queues: queueMap{"team-a": gpuQueue("team-a", "dept", "", "4", "", ""), "dept": gpuQueue("dept", "", peak, "", "", "")}, doc: trainRun,
			state: fairwayv1.RunHeld, reason: string(fairwayv1.RunPeakAboveGuarantee), suspend: true},
		{name: "a child's PerPod wins", queues: queueMap{"team-a": gpuQueue("team-a", "dept", fairwayv1.PipelineAdmissionPerPod, "4", "", ""), "dept": gpuQueue("dept", "", peak, "", "", "")}, doc: trainRun},
		{name: "never fits a parent's limit: pod by pod", queues: queueMap{"team-a": gpuQueue("team-a", "dept", peak, "4", "", ""), "dept": gpuQueue("dept", "", "", "", "6", "")}, doc: trainRun,
			state: fairwayv1.RunPerPod, reason: string(fairwayv1.RunNeverFits)},
		{name: "a loop of unknown count: pod by pod", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "4", "", "")}, doc: trainRun,
			mutate: func(wf *unstructured.Unstructured) {
				tasks, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
				dag := tasks[0].(map[string]any)["dag"].(map[string]any)["tasks"].([]any)
				dag[1].(map[string]any)["withParam"] = "{{tasks.prep.outputs.result}}"
				_ = unstructured.SetNestedSlice(wf.Object, tasks, "spec", "templates")
			},
			state: fairwayv1.RunPerPod, reason: string(fairwayv1.RunProfileUnknown)},
		{name: "suspended by its user: left alone", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "4", "", "")}, doc: trainRun,
			mutate: func(wf *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(wf.Object, true, "spec", "suspend")
			}},
		{name: "opted out", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "4", "", "")}, doc: trainRun,
			mutate: func(wf *unstructured.Unstructured) { wf.SetLabels(map[string]string{fairwayv1.IgnoreLabel: "true"}) }},
		{name: "stages: started at once, marked for the scheduler", queues: queueMap{"team-a": gpuQueue("team-a", "", fairwayv1.PipelineAdmissionStages, "4", "", "")}, doc: trainRun,
			state: fairwayv1.RunStaged, reason: string(fairwayv1.RunStagesAhead)},
		{name: "stages inherited from the parent", queues: queueMap{"team-a": gpuQueue("team-a", "dept", "", "4", "", "8"), "dept": gpuQueue("dept", "", fairwayv1.PipelineAdmissionStages, "", "", "")}, doc: trainRun,
			state: fairwayv1.RunStaged, reason: string(fairwayv1.RunStagesAhead)},
		{name: "stages: no GPU, left alone", queues: queueMap{"team-a": gpuQueue("team-a", "", fairwayv1.PipelineAdmissionStages, "4", "", "")},
			doc: `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: cpu}, spec: {entrypoint: m, templates: [{name: m, container: {image: x}}]}}`},
		{name: "no GPU: nothing to hold", queues: queueMap{"team-a": gpuQueue("team-a", "", peak, "4", "", "")},
			doc: `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: cpu}, spec: {entrypoint: m, templates: [{name: m, container: {image: x}}]}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := mutatingwebhook.NewWorkflowHandler(defaultState(), c.queues, fairwayNS)
			req := workflowRequest(t, c.doc, c.mutate)
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			if c.state == "" {
				if len(resp.Patches) > 0 {
					t.Fatalf("patched %v, want the run left alone", resp.Patches)
				}
				return
			}
			ops, _ := json.Marshal(resp.Patches)
			patch, err := jsonpatch.DecodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := patch.Apply(req.Object.Raw)
			if err != nil {
				t.Fatalf("applying %s: %v", ops, err)
			}
			wf := &unstructured.Unstructured{}
			if err := json.Unmarshal(raw, &wf.Object); err != nil {
				t.Fatal(err)
			}
			ann := wf.GetAnnotations()
			suspend, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend")
			if ann[fairwayv1.RunAdmissionAnnotation] != string(c.state) || ann[fairwayv1.RunReasonAnnotation] != c.reason || suspend != c.suspend {
				t.Errorf("state %q reason %q suspend %v (%s), want %q %q %v", ann[fairwayv1.RunAdmissionAnnotation], ann[fairwayv1.RunReasonAnnotation], suspend,
					ann[fairwayv1.RunMessageAnnotation], c.state, c.reason, c.suspend)
			}
			if ann[fairwayv1.RunQueueAnnotation] != "team-a" || !strings.HasPrefix(ann[fairwayv1.RunPeakAnnotation], "gpu=8,") {
				t.Errorf("queue %q peak %q, want team-a and gpu=8", ann[fairwayv1.RunQueueAnnotation], ann[fairwayv1.RunPeakAnnotation])
			}
			if c.state != fairwayv1.RunAdmitted && c.state != fairwayv1.RunStaged && len(resp.Warnings) == 0 {
				t.Error("no warning for the client")
			}
		})
	}
}

const fairwayNS = "fairway-system"

// applyPatches applies a response's patches to the request's object.
func applyPatches(t *testing.T, req admission.Request, resp admission.Response) *unstructured.Unstructured {
	t.Helper()
	raw := req.Object.Raw
	if len(resp.Patches) > 0 {
		ops, _ := json.Marshal(resp.Patches)
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatalf("applying %s: %v", ops, err)
		}
	}
	wf := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &wf.Object); err != nil {
		t.Fatal(err)
	}
	return wf
}

// forge marks a run held for queue team-a, as only fairway may.
func forge(wf *unstructured.Unstructured) {
	ann := wf.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[fairwayv1.RunAdmissionAnnotation] = string(fairwayv1.RunHeld)
	ann[fairwayv1.RunQueueAnnotation] = "team-a"
	ann["team.example/owner"] = "alice"
	wf.SetAnnotations(ann)
	_ = unstructured.SetNestedField(wf.Object, true, "spec", "suspend")
}

// TestWorkflowForgedKeysDroppedAtCreation: run admission keys a user writes on a new Workflow
// (by hand, or copied by argo resubmit) are dropped with a warning naming them, in a queue that
// does not admit pipelines, in a suspended run the webhook leaves alone, and where the webhook
// decides (its own decision replaces them); the user's other annotations stay.
func TestWorkflowForgedKeysDroppedAtCreation(t *testing.T) {
	for name, tc := range map[string]struct {
		mode  fairwayv1.PipelineAdmission
		state fairwayv1.RunAdmissionState
		also  func(*unstructured.Unstructured)
	}{
		"per pod queue":       {mode: fairwayv1.PipelineAdmissionPerPod},
		"suspended by a user": {mode: fairwayv1.PipelineAdmissionPeak},
		"peak, decided anew": {mode: fairwayv1.PipelineAdmissionPeak, state: fairwayv1.RunHeld,
			also: func(wf *unstructured.Unstructured) { unstructured.RemoveNestedField(wf.Object, "spec", "suspend") }},
		"stages, decided anew": {mode: fairwayv1.PipelineAdmissionStages, state: fairwayv1.RunStaged,
			also: func(wf *unstructured.Unstructured) { unstructured.RemoveNestedField(wf.Object, "spec", "suspend") }},
	} {
		t.Run(name, func(t *testing.T) {
			h := mutatingwebhook.NewWorkflowHandler(defaultState(), queueMap{"team-a": gpuQueue("team-a", "", tc.mode, "4", "", "")}, fairwayNS)
			req := workflowRequest(t, trainRun, func(wf *unstructured.Unstructured) {
				forge(wf)
				if tc.also != nil {
					tc.also(wf)
				}
			})
			req.UserInfo.Username = "alice"
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			if !slicesContainsAll(resp.Warnings, fairwayv1.RunAdmissionAnnotation, fairwayv1.RunQueueAnnotation) {
				t.Errorf("warnings %q: want the dropped keys named", resp.Warnings)
			}
			ann := applyPatches(t, req, resp).GetAnnotations()
			if got := fairwayv1.RunAdmissionOf(ann).State; got != tc.state {
				t.Errorf("state %q after admission, want %q (annotations %v)", got, tc.state, ann)
			}
			if tc.state == "" {
				for _, k := range fairwayv1.RunAdmissionKeys {
					if _, ok := ann[k]; ok {
						t.Errorf("forged key %s kept", k)
					}
				}
			}
			if ann["team.example/owner"] != "alice" {
				t.Errorf("the user's own annotation was lost: %v", ann)
			}
		})
	}
}

// TestWorkflowKeysAtCreationByFairway: fairway's own identity keeps what it writes.
func TestWorkflowKeysAtCreationByFairway(t *testing.T) {
	h := mutatingwebhook.NewWorkflowHandler(defaultState(), queueMap{"team-a": gpuQueue("team-a", "", fairwayv1.PipelineAdmissionPeak, "4", "", "")}, fairwayNS)
	req := workflowRequest(t, trainRun, forge)
	req.UserInfo.Username = "system:serviceaccount:fairway-system:fairway-scheduler"
	resp := h.Handle(context.Background(), req)
	if ann := applyPatches(t, req, resp).GetAnnotations(); !resp.Allowed || ann[fairwayv1.RunAdmissionAnnotation] != string(fairwayv1.RunHeld) {
		t.Errorf("fairway's keys not kept: %v %v", resp.Result, ann)
	}
}

// TestWorkflowKeysRefusedOnUpdate: a change of a run admission key by anyone but fairway is
// refused with a message naming the key, old and new value; fairway's own writes, and updates
// that leave the keys alone (Argo's status, a user's label), pass.
func TestWorkflowKeysRefusedOnUpdate(t *testing.T) {
	h := mutatingwebhook.NewWorkflowHandler(defaultState(), queueMap{}, fairwayNS)
	held := func(wf *unstructured.Unstructured) {
		wf.SetName("run1")
		wf.SetAnnotations(fairwayv1.RunAdmission{State: fairwayv1.RunPerPod, Reason: "NeverFits", Queue: "team-a"}.Annotations())
	}
	update := func(user string, change func(*unstructured.Unstructured)) admission.Response {
		old := workflowRequest(t, trainRun, held)
		req := workflowRequest(t, trainRun, func(wf *unstructured.Unstructured) { held(wf); change(wf) })
		req.Operation, req.OldObject, req.UserInfo.Username = admissionv1.Update, old.Object, user
		return h.Handle(context.Background(), req)
	}
	setState := func(wf *unstructured.Unstructured) {
		ann := wf.GetAnnotations()
		ann[fairwayv1.RunAdmissionAnnotation] = string(fairwayv1.RunHeld)
		wf.SetAnnotations(ann)
		_ = unstructured.SetNestedField(wf.Object, true, "spec", "suspend")
	}
	resp := update("alice", setState)
	if resp.Allowed || !strings.Contains(resp.Result.Message, `annotation "fairway.dev/run-admission" may not change`) ||
		!strings.Contains(resp.Result.Message, `was "PerPod", now "Held"`) {
		t.Errorf("a user's change of the run's state: allowed %v, %q", resp.Allowed, resp.Result.Message)
	}
	removed := update("system:serviceaccount:team-a:argo", func(wf *unstructured.Unstructured) {
		ann := wf.GetAnnotations()
		delete(ann, fairwayv1.RunQueueAnnotation)
		wf.SetAnnotations(ann)
	})
	if removed.Allowed || !strings.Contains(removed.Result.Message, fairwayv1.RunQueueAnnotation) {
		t.Errorf("removing a key by a tenant's ServiceAccount: allowed %v, %q", removed.Allowed, removed.Result.Message)
	}
	if resp := update("system:serviceaccount:fairway-system:fairway-scheduler", setState); !resp.Allowed {
		t.Errorf("fairway's own write refused: %v", resp.Result)
	}
	admin := func(user string, change func(*unstructured.Unstructured)) admission.Response {
		old := workflowRequest(t, trainRun, held)
		req := workflowRequest(t, trainRun, func(wf *unstructured.Unstructured) { held(wf); change(wf) })
		req.Operation, req.OldObject, req.UserInfo.Username = admissionv1.Update, old.Object, user
		req.UserInfo.Groups = []string{"system:authenticated", fairwayv1.MastersGroup}
		return h.Handle(context.Background(), req)
	}
	if resp := admin("cluster-admin", setState); !resp.Allowed {
		t.Errorf("a cluster admin's write refused: %v", resp.Result)
	}
	if resp := update("alice", func(wf *unstructured.Unstructured) {
		wf.SetLabels(map[string]string{"x": "y"})
		_ = unstructured.SetNestedField(wf.Object, "Running", "status", "phase")
	}); !resp.Allowed {
		t.Errorf("an update that leaves the keys alone refused: %v", resp.Result)
	}
}

func slicesContainsAll(warnings []string, keys ...string) bool {
	all := strings.Join(warnings, "\n")
	for _, k := range keys {
		if !strings.Contains(all, k) {
			return false
		}
	}
	return true
}
