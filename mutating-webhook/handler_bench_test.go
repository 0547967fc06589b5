package mutatingwebhook_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// BenchmarkServeHTTP is the webhook's cost per admission request, from the request body to the
// response body, for realistic pods of each framework.
func BenchmarkServeHTTP(b *testing.B) {
	rayObjects := adaptertest.LoadObjects(b, "../adapters/kuberay/testdata/raycluster.yaml")
	h := newHandler(defaultState(), adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{}).HTTPHandler(logr.Discard())
	// With MPS on, the fractional notebook (gpu-fraction 0.3333) also gets its two MPS volumes.
	mps := newHandler(defaultState(), adaptertest.NewReader(rayObjects...), mutatingwebhook.Options{MPSVolumes: true}).HTTPHandler(logr.Discard())
	for name, fixture := range map[string]string{
		"argo":         "../adapters/argo/testdata/step-gpu.yaml",
		"ray":          "../adapters/kuberay/testdata/worker-gpu.yaml",
		"notebook":     "../adapters/jupyterhub/testdata/z2jh-notebook.yaml",
		"notebook-mps": "../adapters/jupyterhub/testdata/z2jh-notebook.yaml",
		// Inference and the other kinds of issue 17, admitted in team-a.
		"triton":  "../adapters/modelserver/testdata/triton-chart.yaml",
		"lws":     "../adapters/lws/testdata/vllm-worker.yaml",
		"airflow": "../adapters/airflow/testdata/kpo-gpu.yaml",
	} {
		h := h
		pod := adaptertest.LoadPod(b, fixture)
		if name == "notebook-mps" {
			h = mps
		}
		ns := pod.Namespace
		if _, served := defaultState().queues[ns]; !served {
			ns = "team-a"
		}
		req := createRequest(b, pod, ns)
		body := mustJSON(b, admissionv1.AdmissionReview{TypeMeta: metaAdmissionReview, Request: &req.AdmissionRequest})
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, mutatingwebhook.MutatePath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(rec, r)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Body.String())
				}
			}
		})
	}
}
