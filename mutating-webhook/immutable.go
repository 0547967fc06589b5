package mutatingwebhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// ImmutablePath refuses updates that change fairway's keys on the pods it manages; it never
// changes a pod.
const ImmutablePath = "/immutable-pod"

// ImmutableHandler serves ImmutablePath. The webhook configuration sends it only updates of pods
// labelled fairway.dev/managed=true (before or after the update) that change one of
// v1alpha1.ImmutablePodLabels or ImmutablePodAnnotations (a match condition compares them in the
// API server), so the ordinary traffic of managed pods (status, finalizers, the agents'
// annotations) never reaches it. It refuses the change with a message naming every key that
// changed, old and new value: after admission the scheduler trusts these keys, and changing them
// would let a pending pod spend another team's quota, join another gang or escape preemption.
type ImmutableHandler struct{}

var _ admission.Handler = ImmutableHandler{}

// HTTPHandler serves h over HTTP for a webhook server, with panic recovery on.
func (h ImmutableHandler) HTTPHandler(log logr.Logger) http.Handler {
	return serve(h, log)
}

// podMeta is the part of a pod the handler reads: decoding only metadata keeps a request cheap
// whatever the size of the pod spec.
type podMeta struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
}

// Handle implements admission.Handler.
func (ImmutableHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("")
	}
	if len(req.Object.Raw) == 0 || len(req.OldObject.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, errors.New("an update request must carry the object and the old object"))
	}
	var old, cur podMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old pod: %w", err))
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &cur); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if old.Metadata.Labels[fairwayv1.ManagedLabel] != "true" {
		// Not admitted by fairway. A pod that gains the label gains nothing: the scheduler
		// places only pods the webhook sealed, and nobody but the scheduler creates one that
		// names it already bound (policy fairway-binds-its-own-pods).
		return admission.Allowed("")
	}
	changed := changedKeys("label", fairwayv1.ImmutablePodLabels, old.Metadata.Labels, cur.Metadata.Labels)
	changed = append(changed, changedKeys("annotation", fairwayv1.ImmutablePodAnnotations, old.Metadata.Annotations, cur.Metadata.Annotations)...)
	if len(changed) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(strings.Join(changed, "; ") +
		": fairway reads these keys to account and schedule the pod; delete the pod and create it again with the values you want")
}

// changedKeys describes each of keys whose value differs between old and cur, in the order of
// keys, as `label "runai/queue" may not change after admission (was "team-a", now "team-b")`.
func changedKeys(kind string, keys []string, old, cur map[string]string) []string {
	var out []string
	for _, k := range keys {
		was, hadOld := old[k]
		now, hasNew := cur[k]
		if hadOld == hasNew && was == now {
			continue
		}
		out = append(out, fmt.Sprintf("%s %q may not change after admission (was %s, now %s)", kind, k, describe(was, hadOld), describe(now, hasNew)))
	}
	return out
}

func describe(v string, set bool) string {
	if !set {
		return "unset"
	}
	return strconv.Quote(v)
}
