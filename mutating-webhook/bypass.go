package mutatingwebhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// BypassPath refuses, in the namespaces queues serve, pods that ask for whole GPUs but would be
// placed by something other than fairway's scheduler; it never changes a pod.
const BypassPath = "/bypass-pod"

// BypassHandler serves BypassPath. A queue's guarantee and limit hold only if every GPU its
// namespaces use is counted: a GPU pod kube-scheduler places in a served namespace (opted out
// with fairway.dev/ignore, created with spec.nodeName, naming another scheduler, a DaemonSet's)
// is charged to no queue and takes GPUs other teams are guaranteed, as many as its author asks
// for. The webhook configuration sends it, last and failing closed, the creation of every pod of
// a served namespace whose containers ask for nvidia.com/gpu and whose scheduler is not fairway's
// by then (the pods webhook has already handed fairway the pods it takes); the API server checks
// both in a match condition, so no other pod waits for it.
//
// Kueue answers the same question for pods it does not schedule with a scheduling gate it lifts
// once the pod's quota is reserved; fairway places these pods itself or refuses them, with the
// way to have them placed.
type BypassHandler struct {
	opts Options
}

var _ admission.Handler = (*BypassHandler)(nil)

// NewBypassHandler returns the handler; opts says which schedulers' pods the webhook takes.
func NewBypassHandler(opts Options) *BypassHandler {
	return &BypassHandler{opts: opts}
}

// HTTPHandler serves h over HTTP for a webhook server, with panic recovery on.
func (h *BypassHandler) HTTPHandler(log logr.Logger) http.Handler {
	return reviewHandler{webhook: &admission.Webhook{Handler: h, RecoverPanic: ptrTrue()}, log: log}
}

// Handle implements admission.Handler.
func (h *BypassHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	pod, skip := createdPod(req)
	if pod == nil {
		return skip
	}
	if why := bypass(pod, h.opts); why != "" {
		return admission.Denied(why)
	}
	return admission.Allowed("")
}

// bypass says why pod, in a served namespace, would hold GPUs outside fairway, or "" when it
// would not: it asks for no whole GPU, or fairway's scheduler places it.
func bypass(pod *corev1.Pod, opts Options) string {
	container, gpus := wholeGPUs(pod)
	if container == "" || pod.Spec.SchedulerName == fairwayv1.SchedulerName {
		return ""
	}
	var how, fix string
	switch {
	case pod.Labels[fairwayv1.IgnoreLabel] == "true":
		how, fix = fmt.Sprintf("is opted out of fairway (label %s=true)", fairwayv1.IgnoreLabel), "remove the label"
	case pod.Spec.NodeName != "":
		how, fix = fmt.Sprintf("is created on node %s (spec.nodeName)", pod.Spec.NodeName), "leave spec.nodeName empty (pin a node with a node selector or node affinity)"
	case adapters.ControllerOfKind(pod, "apps", "DaemonSet") != nil:
		how, fix = "belongs to a DaemonSet, whose pods fairway does not schedule", "run GPU work as a Job, a Deployment or a framework's workload"
	case !opts.takesOver(pod.Spec.SchedulerName):
		how = fmt.Sprintf("names scheduler %q, which fairway does not take pods from", pod.Spec.SchedulerName)
		fix = "remove spec.schedulerName, or set it to " + fairwayv1.SchedulerName
	default:
		if what := fairwayv1.UnevaluatedConstraints(pod); len(what) > 0 {
			how = fmt.Sprintf("uses %s, which fairway does not evaluate", strings.Join(what, ", "))
			fix = "use a node selector, node affinity or a fairway topology annotation instead"
		} else {
			how = fmt.Sprintf("was left to scheduler %q by fairway's webhook", ownScheduler(pod))
			fix = "have fairway take it (see the webhook's warning)"
		}
	}
	return fmt.Sprintf("pod %s asks for %s nvidia.com/gpu (container %s) in namespace %s, which a fairway queue serves, but %s: "+
		"GPUs here are placed by fairway and counted against the queue's quota, or the queue's guarantees and limits would not hold; "+
		"%s, or run the pod in a namespace no queue serves",
		podName(pod), gpus, container, pod.Namespace, how, fix)
}

// podName is the pod's name, or its generateName with a star before the API server named it.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "*"
}
