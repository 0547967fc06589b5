package mutatingwebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// maxReviewSize bounds a request body, as controller-runtime does (an object may be up to
// 1.5 MiB, and the review carries it twice for updates).
const maxReviewSize = 7 << 20

// serve is the HTTP handler of every admission handler of the webhook server: reviewHandler over
// an admission.Webhook with controller-runtime's panic recovery on, so that a panic becomes a 500
// answer to that one request.
func serve(h admission.Handler, log logr.Logger) http.Handler {
	return reviewHandler{webhook: &admission.Webhook{Handler: h, RecoverPanic: ptrTrue()}, log: log}
}

// reviewHandler serves admission.k8s.io/v1 AdmissionReviews over HTTP for an admission.Webhook,
// whose Handle keeps its panic recovery and logging.
//
// It replaces admission.Webhook's own ServeHTTP, which decodes the review through the API
// machinery's universal deserializer: a first pass over the body to find its kind, then a second
// to decode it, both over the whole pod. fairway's webhook configuration asks for v1 only, so one
// case-sensitive pass (the serializer's own decoding) does; on pods as the API server sends them
// this was a quarter of the webhook's CPU.
type reviewHandler struct {
	webhook *admission.Webhook
	log     logr.Logger
}

var reviewTypeMeta = metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}

func (h reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, status, err := readReview(r)
	if err != nil {
		h.log.Error(err, "Bad admission request", "remote", r.RemoteAddr)
		h.write(w, admission.Errored(status, err))
		return
	}
	h.write(w, h.webhook.Handle(r.Context(), admission.Request{AdmissionRequest: *review.Request}))
}

// readReview reads and decodes the body, returning the HTTP status to report on failure.
func readReview(r *http.Request) (*admissionv1.AdmissionReview, int32, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer func() { _ = r.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewSize+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > maxReviewSize {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	review := &admissionv1.AdmissionReview{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	return review, 0, nil
}

func (h reviewHandler) write(w http.ResponseWriter, resp admission.Response) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta, Response: &resp.AdmissionResponse}); err != nil {
		h.log.Error(err, "Writing the admission response")
	}
}
