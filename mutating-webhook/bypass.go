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

// BypassPath refuses, in the namespaces queues serve, pods that ask for GPUs (whole ones, or
// through ResourceClaims) but would be placed by something other than fairway's scheduler; it
// never changes a pod.
const BypassPath = "/bypass-pod"

// BypassHandler serves BypassPath. A queue's guarantee and limit hold only if every GPU its
// namespaces use is counted: a GPU pod kube-scheduler places in a served namespace (opted out
// with fairway.dev/ignore, created with spec.nodeName, naming another scheduler, a DaemonSet's)
// is charged to no queue and takes GPUs other teams are guaranteed, as many as its author asks
// for. The webhook configuration sends it, after the pods webhook and failing closed, the
// creation of every pod of a served namespace whose containers ask for nvidia.com/gpu, or that
// has ResourceClaims, and whose scheduler is not fairway's by then (the pods webhook has already
// handed fairway the pods it takes); the API server checks that in a match condition, so no other
// pod waits for it. Claims are read (as the defaulter reads them) to tell GPUs from other devices.
//
// Kueue answers the same question for pods it does not schedule with a scheduling gate it lifts
// once the pod's quota is reserved; fairway places these pods itself or refuses them, with the
// way to have them placed.
type BypassHandler struct {
	opts    Options
	objects adapters.ObjectReader
}

var _ admission.Handler = (*BypassHandler)(nil)

// NewBypassHandler returns the handler; opts says which schedulers' pods the webhook takes,
// objects reads ResourceClaims and ResourceClaimTemplates (nil: claims are not judged).
func NewBypassHandler(opts Options, objects adapters.ObjectReader) *BypassHandler {
	return &BypassHandler{opts: opts, objects: objects}
}

// HTTPHandler serves h over HTTP for a webhook server, with panic recovery on.
func (h *BypassHandler) HTTPHandler(log logr.Logger) http.Handler {
	return serve(h, log)
}

// Handle implements admission.Handler.
func (h *BypassHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, skip := createdPod(req)
	if pod == nil {
		return skip
	}
	if pod.Spec.SchedulerName == fairwayv1.SchedulerName {
		return admission.Allowed("")
	}
	ask, err := gpuAsk(ctx, h.objects, pod)
	if err != nil {
		return refusal(ctx, err)
	}
	if why := bypass(pod, h.opts, ask); why != "" {
		return admission.Denied(why)
	}
	return admission.Allowed("")
}

// gpuAsk says what GPUs the pod asks for, "" for none: whole GPUs of a container, else the claims
// that name a DeviceClass of NVIDIA's GPUs or partitions, else claims not there yet (which could
// be made to).
func gpuAsk(ctx context.Context, objects adapters.ObjectReader, pod *corev1.Pod) (string, error) {
	if container, gpus := wholeGPUs(pod); container != "" {
		return fmt.Sprintf("%s nvidia.com/gpu (container %s)", gpus, container), nil
	}
	if len(pod.Spec.ResourceClaims) == 0 {
		return "", nil
	}
	claims, err := podClaims(ctx, objects, pod)
	if err != nil {
		return "", err
	}
	var gpus, unknown []string
	for _, c := range claims {
		switch {
		case c.spec == nil:
			unknown = append(unknown, c.kind+" "+c.name)
		case asksForGPUDevices(c.spec):
			gpus = append(gpus, c.kind+" "+c.name)
		}
	}
	switch {
	case len(gpus) > 0:
		return "GPUs through " + strings.Join(gpus, ", "), nil
	case len(unknown) > 0:
		// Made later, it could ask for GPUs that kube-scheduler would allocate.
		return "devices through " + strings.Join(unknown, ", ") + ", not there yet (create the claims first: until then fairway cannot tell whether they ask for GPUs)", nil
	}
	return "", nil
}

// bypass says why pod, in a served namespace and asking for the GPUs ask names, would hold them
// outside fairway, or "" when it would not: it asks for none, or fairway's scheduler places it.
func bypass(pod *corev1.Pod, opts Options, ask string) string {
	if ask == "" || pod.Spec.SchedulerName == fairwayv1.SchedulerName {
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
	return fmt.Sprintf("pod %s asks for %s in namespace %s, which a fairway queue serves, but %s: "+
		"GPUs here are placed by fairway and counted against the queue's quota, or the queue's guarantees and limits would not hold; "+
		"%s, or run the pod in a namespace no queue serves",
		podName(pod), ask, pod.Namespace, how, fix)
}

// podName is the pod's name, or its generateName with a star before the API server named it.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "*"
}
