package mutatingwebhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestReviewHandlerErrors: malformed requests get a well-formed AdmissionReview that refuses them
// with the HTTP status in its result, as controller-runtime's handler answers.
func TestReviewHandlerErrors(t *testing.T) {
	h := newHandler(defaultState(), nil, mutatingwebhook.Options{}).HTTPHandler(logr.Discard())
	cases := map[string]struct {
		body        []byte
		contentType string
		wantCode    int32
		wantMsg     string
	}{
		"empty body":        {body: nil, contentType: "application/json", wantCode: 400, wantMsg: "request body is empty"},
		"wrong type":        {body: []byte(`{}`), contentType: "text/plain", wantCode: 400, wantMsg: "expected application/json"},
		"not JSON":          {body: []byte(`not json`), contentType: "application/json", wantCode: 400, wantMsg: "decoding the AdmissionReview"},
		"no request":        {body: []byte(`{"kind":"AdmissionReview"}`), contentType: "application/json", wantCode: 400, wantMsg: "has no request"},
		"request too large": {body: bytes.Repeat([]byte(" "), 7<<20+1), contentType: "application/json", wantCode: 413, wantMsg: "too large"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, mutatingwebhook.MutatePath, bytes.NewReader(tc.body))
			if tc.body == nil {
				r.Body = http.NoBody
			}
			r.Header.Set("Content-Type", tc.contentType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
				t.Fatalf("answer is not an AdmissionReview with a response: %v %s", err, rec.Body)
			}
			res := review.Response.Result
			if review.Response.Allowed || res == nil || res.Code != tc.wantCode || !strings.Contains(res.Message, tc.wantMsg) {
				t.Errorf("response = %+v, want refused with code %d and %q", review.Response, tc.wantCode, tc.wantMsg)
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
				t.Errorf("answer typed %s %s", review.APIVersion, review.Kind)
			}
		})
	}
}
