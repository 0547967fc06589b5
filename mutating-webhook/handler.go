package mutatingwebhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
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
// client, and it builds the patch from the fields the defaulter changes rather than by diffing
// JSON documents (see patchFor).
type Handler struct {
	defaulter *PodDefaulter
}

var _ admission.Handler = (*Handler)(nil)

// NewHandler returns the handler for defaulter.
func NewHandler(defaulter *PodDefaulter) *Handler {
	return &Handler{defaulter: defaulter}
}

// HTTPHandler serves h over HTTP for a webhook server, with panic recovery on (serve).
func (h *Handler) HTTPHandler(log logr.Logger) http.Handler {
	return serve(h, log)
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, skip := createdPod(req)
	if pod == nil {
		return skip
	}
	original := pod.DeepCopy()

	warnings, err := h.defaulter.Default(ctx, req, pod)
	if err != nil {
		return refusal(ctx, err).WithWarnings(warnings...)
	}
	ops, err := patchFor(req.Object.Raw, original, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(ops) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	return admission.Patched("", ops...).WithWarnings(warnings...)
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
	state ClusterState
	opts  Options
}

var _ admission.Handler = (*GuardHandler)(nil)

// NewGuardHandler returns the guard.
func NewGuardHandler(state ClusterState, opts Options) *GuardHandler {
	return &GuardHandler{state: state, opts: opts}
}

// HTTPHandler serves g over HTTP for a webhook server, with panic recovery on.
func (g *GuardHandler) HTTPHandler(log logr.Logger) http.Handler {
	return serve(g, log)
}

// Handle implements admission.Handler.
func (g *GuardHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, skip := createdPod(req)
	if pod == nil {
		return skip
	}
	ns := pod.Namespace
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

// createdPod returns the pod a request creates, with its namespace, or (nil and) the answer when
// there is none to act on: both handlers let anything but a pod's creation through and refuse
// (400) a pod that does not decode, so that the defaulter and the guard judge the same requests.
func createdPod(req admission.Request) (*corev1.Pod, admission.Response) {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return nil, admission.Allowed("")
	}
	pod, err := decodePod(req)
	if err != nil {
		return nil, admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		// The API server sends pods as the client wrote them; the namespace is in the request.
		pod.Namespace = req.Namespace
	}
	return pod, admission.Response{}
}

// decodePod decodes the pod of a request the way the API machinery's JSON serializer does
// (case-sensitive, integers kept), without its first pass over the body to find the kind, which
// the request already names. The API server sends webhooks JSON.
func decodePod(req admission.Request) (*corev1.Pod, error) {
	if len(req.Object.Raw) == 0 {
		return nil, errors.New("the request has no object")
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	return pod, nil
}

func ptrTrue() *bool { t := true; return &t }
