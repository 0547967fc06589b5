package mutatingwebhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// FuzzAdmissionReview sends arbitrary request bodies to the webhook's HTTP handler, as the API
// server (or anyone who can reach the port) would. The handler must never panic (a recovered
// panic answers 500 and counts as a failure here), and every answer must be a well-formed
// AdmissionReview: HTTP 200, a response echoing the request UID, and, when allowed with a patch,
// a JSON patch that applies to the object that was sent and leaves a GPU share that the shared
// parser (api/gpurequest) reads as the share sent. It is seeded with the shared table of GPU-share
// inputs.
func FuzzAdmissionReview(f *testing.F) {
	rayObjects := adaptertest.LoadObjects(f, "../adapters/kuberay/testdata/raycluster.yaml")
	fixtures, _ := filepath.Glob("../adapters/*/testdata/*.yaml")
	for _, path := range fixtures {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		objs, err := adaptertest.DecodeObjects(data)
		if err != nil || len(objs) == 0 || objs[0].GetKind() != "Pod" {
			continue
		}
		pod := adaptertest.LoadPod(f, path)
		req := createRequest(f, pod, pod.Namespace)
		f.Add(mustJSON(f, admissionv1.AdmissionReview{
			TypeMeta: metaAdmissionReview, Request: &req.AdmissionRequest,
		}))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"kind":"Pod","version":"v1"},"operation":"CREATE","namespace":"team-a","object":{"metadata":{"annotations":{"gpu-fraction":"0.5"}},"spec":{"containers":[]}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"2","kind":{"kind":"Pod","version":"v1"},"operation":"CREATE","namespace":"team-a","object":null}}`))
	f.Add([]byte(`{"kind":"AdmissionReview"}`))
	for _, tc := range gpurequesttest.Cases {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.Annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		req := createRequest(f, pod, "team-a")
		f.Add(mustJSON(f, admissionv1.AdmissionReview{TypeMeta: metaAdmissionReview, Request: &req.AdmissionRequest}))
	}
	f.Add([]byte(`not json`))

	h := newHandler(defaultState(), adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{MPSVolumes: true}).HTTPHandler(logr.Discard())
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, mutatingwebhook.MutatePath, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, r)

		if rec.Code != http.StatusOK {
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
			t.Fatalf("the answer is not an AdmissionReview: %v\n%s", err, rec.Body)
		}
		resp := review.Response
		if resp == nil {
			t.Fatalf("no response in %s", rec.Body)
		}
		var sent admissionv1.AdmissionReview
		if sigsjson.UnmarshalCaseSensitivePreserveInts(body, &sent) == nil && sent.Request != nil && resp.UID != sent.Request.UID {
			t.Fatalf("response UID %q, request UID %q", resp.UID, sent.Request.UID)
		}
		if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
			t.Fatalf("internal error (a panic?): %s", resp.Result.Message)
		}
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
			t.Fatalf("a refusal without a reason: %s", rec.Body)
		}
		if len(resp.Patch) == 0 {
			return
		}
		if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("a patch on a refusal, or without type JSONPatch: %s", rec.Body)
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("the patch is not a JSON patch: %v", err)
		}
		patched, err := patch.Apply(sent.Request.Object.Raw)
		if err != nil {
			t.Fatalf("the patch does not apply to the object sent: %v\npatch: %s", err, resp.Patch)
		}
		checkGPUShare(t, sent.Request.Object.Raw, patched, resp.Warnings)
	})
}

// checkGPUShare holds the webhook to the shared parser, by which the scheduler and the CLI read
// the pod it admits: the webhook patches no pod whose GPU-share annotations gpurequest refuses, and
// the patched pod reads to the same share as the pod sent.
func checkGPUShare(t *testing.T, sent, patched []byte, warnings []string) {
	t.Helper()
	var before, after corev1.Pod
	if sigsjson.UnmarshalCaseSensitivePreserveInts(sent, &before) != nil {
		return
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(patched, &after); err != nil {
		t.Fatalf("the patched pod does not decode: %v", err)
	}
	want, err := gpurequest.Parse(before.Annotations)
	if err != nil {
		t.Fatalf("patched a pod whose GPU share gpurequest refuses (%v)", err)
	}
	got, err := gpurequest.Parse(after.Annotations)
	if err != nil {
		t.Fatalf("the patched pod's GPU share is refused: %v", err)
	}
	// A helper pod that never gets a GPU loses its share, with a warning; that is the one change
	// allowed.
	dropped := got.IsZero() && slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "helper pod") })
	if (got.Milli != want.Milli || got.MemoryMiB != want.MemoryMiB) && !dropped {
		t.Fatalf("sent %+v, the patched pod reads %+v (warnings %q)", want, got, warnings)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
