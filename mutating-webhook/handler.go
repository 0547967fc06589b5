package mutatingwebhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/mutating-webhook/gpurequest"
)

// Paths the webhook server serves.
const (
	// MutatePath is the pod defaulter.
	MutatePath = "/mutate-pod"
	// GuardPath refuses pods that ask for fairway by name where fairway does not serve them; it
	// never changes a pod.
	GuardPath = "/guard-pod"
)

// Handler is the admission handler of MutatePath: it decodes the pod, lets the PodDefaulter
// rewrite it and answers with one JSON patch from the pod as it came to the pod as rewritten.
//
// Unlike controller-runtime's defaulter webhook, it returns the defaulter's warnings to the
// client. Like it, the patch is computed against the object exactly as sent, so it always applies,
// and operations that only reflect decoding the object into Go (fields the Go type does not know,
// quantities written differently) are dropped, so the patch holds the defaulter's changes only.
type Handler struct {
	defaulter *PodDefaulter
	decoder   admission.Decoder
}

var _ admission.Handler = (*Handler)(nil)

// NewHandler returns the handler for defaulter.
func NewHandler(scheme *runtime.Scheme, defaulter *PodDefaulter) *Handler {
	return &Handler{defaulter: defaulter, decoder: admission.NewDecoder(scheme)}
}

// Webhook wraps h for a webhook server, with controller-runtime's panic recovery on: a panic
// becomes a 500 answer to that one request.
func (h *Handler) Webhook() *admission.Webhook {
	return &admission.Webhook{Handler: h, RecoverPanic: ptrTrue()}
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if pod.Namespace == "" {
		// The API server sends pods as the client wrote them; the namespace is in the request.
		pod.Namespace = req.Namespace
	}
	original := pod.DeepCopy()

	warnings, err := h.defaulter.Default(ctx, req, pod)
	if err != nil {
		return refusal(ctx, err).WithWarnings(warnings...)
	}
	if equality.Semantic.DeepEqual(original, pod) {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	ops, err := patchFor(req.Object.Raw, original, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Patched("", ops...).WithWarnings(warnings...)
}

// patchFor returns the JSON patch from raw, the object as the API server sent it, to mutated.
// Operations that also appear in the patch from raw to original (the same object decoded and
// encoded again, unchanged) are artefacts of the Go round trip, not changes, and are left out.
func patchFor(raw []byte, original, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
	before, err := json.Marshal(original)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod: %w", err)
	}
	after, err := json.Marshal(mutated)
	if err != nil {
		return nil, fmt.Errorf("encoding the rewritten pod: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(raw, after)
	if err != nil {
		return nil, fmt.Errorf("computing the patch: %w", err)
	}
	artefacts, err := jsonpatch.CreatePatch(raw, before)
	if err != nil {
		return nil, fmt.Errorf("computing the patch: %w", err)
	}
	if len(artefacts) == 0 {
		return ops, nil
	}
	skip := make(map[string]bool, len(artefacts))
	for _, op := range artefacts {
		skip[op.Json()] = true
	}
	kept := ops[:0]
	for _, op := range ops {
		if !skip[op.Json()] {
			kept = append(kept, op)
		}
	}
	return kept, nil
}

// refusal turns a defaulter error into a response: a user error is denied (403) with its message,
// anything else is an internal error (500), which the API server treats per failurePolicy.
func refusal(ctx context.Context, err error) admission.Response {
	var denial *Denial
	var bad *gpurequest.Error
	if errors.As(err, &denial) || errors.As(err, &bad) {
		return admission.Denied(err.Error())
	}
	logr.FromContextOrDiscard(ctx).Error(err, "Admission failed")
	return admission.Errored(http.StatusInternalServerError, err)
}

// GuardHandler serves GuardPath. The webhook configuration sends it, before anything else, the
// pods that name fairway's scheduler themselves in every namespace but the protected ones. It
// refuses those that opted out of fairway or live in a namespace no queue serves: otherwise such
// a pod would bypass the defaulter and reach fairway's scheduler with whatever queue label it
// carries. It changes nothing.
type GuardHandler struct {
	state   ClusterState
	decoder admission.Decoder
	opts    Options
}

var _ admission.Handler = (*GuardHandler)(nil)

// NewGuardHandler returns the guard.
func NewGuardHandler(scheme *runtime.Scheme, state ClusterState, opts Options) *GuardHandler {
	return &GuardHandler{state: state, decoder: admission.NewDecoder(scheme), opts: opts}
}

// Webhook wraps g for a webhook server, with panic recovery on.
func (g *GuardHandler) Webhook() *admission.Webhook {
	return &admission.Webhook{Handler: g, RecoverPanic: ptrTrue()}
}

// Handle implements admission.Handler.
func (g *GuardHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := g.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	ns := pod.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	if pod.Spec.SchedulerName != schedulerName || g.opts.protected(ns) {
		return admission.Allowed("")
	}
	if pod.Labels[fairwayv1.IgnoreLabel] == "true" {
		return admission.Denied(fmt.Sprintf("label %s=true opts the pod out of fairway, but spec.schedulerName is %q: remove one of the two", fairwayv1.IgnoreLabel, schedulerName))
	}
	serving, err := g.state.QueuesServing(ctx, ns)
	if err != nil {
		return refusal(ctx, fmt.Errorf("looking up the queues serving namespace %s: %w", ns, err))
	}
	if len(serving) == 0 {
		return admission.Denied(notServed(ns).Error())
	}
	return admission.Allowed("")
}

func ptrTrue() *bool { t := true; return &t }
