package mutatingwebhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// The DRA kinds the defaulter reads a pod's claims from. The webhook warms their informers at
// start (server.go) like the framework kinds, so the first DRA pod does not wait for a list.
var (
	resourceClaimGVK         = resourceapi.SchemeGroupVersion.WithKind("ResourceClaim")
	resourceClaimTemplateGVK = resourceapi.SchemeGroupVersion.WithKind("ResourceClaimTemplate")
	draKinds                 = []schema.GroupVersionKind{resourceClaimTemplateGVK, resourceClaimGVK}
)

// podClaim is one of a pod's ResourceClaims or ResourceClaimTemplates, as the webhook judges it.
type podClaim struct {
	kind, name string
	// spec is nil for a claim or template that is not there yet.
	spec *resourceapi.ResourceClaimSpec
}

// podClaims reads the specs of the pod's claims and claim templates; one that is not there yet
// comes without a spec. Claims allocated already are left out (nothing is left for an allocator
// to serve), as are all claims where the API server does not serve DRA.
func podClaims(ctx context.Context, objects adapters.ObjectReader, pod *corev1.Pod) ([]podClaim, error) {
	if objects == nil {
		return nil, nil
	}
	var out []podClaim
	for _, pc := range pod.Spec.ResourceClaims {
		gvk, name := resourceClaimGVK, pc.ResourceClaimName
		if pc.ResourceClaimTemplateName != nil {
			gvk, name = resourceClaimTemplateGVK, pc.ResourceClaimTemplateName
		}
		if name == nil {
			continue
		}
		u, err := objects.Get(ctx, gvk, pod.Namespace, *name)
		if errors.Is(err, adapters.ErrKindNotInstalled) {
			continue
		}
		if apierrors.IsNotFound(err) {
			out = append(out, podClaim{kind: gvk.Kind, name: *name})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the claims of pod claim %q: %w", pc.Name, err)
		}
		var spec *resourceapi.ResourceClaimSpec
		if gvk == resourceClaimTemplateGVK {
			var t resourceapi.ResourceClaimTemplate
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
				return nil, fmt.Errorf("decoding ResourceClaimTemplate %s/%s: %w", pod.Namespace, *name, err)
			}
			spec = &t.Spec.Spec
		} else {
			var c resourceapi.ResourceClaim
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
				return nil, fmt.Errorf("decoding ResourceClaim %s/%s: %w", pod.Namespace, *name, err)
			}
			if c.Status.Allocation != nil {
				continue
			}
			spec = &c.Spec
		}
		out = append(out, podClaim{kind: gvk.Kind, name: *name, spec: spec})
	}
	return out, nil
}

// unservedClaims names, claim by claim, what the pod's claims ask for that fairway's DRA
// allocator does not serve (fairwayv1.UnservedClaimRequests), and what they ask for together
// that fairway cannot count (fairwayv1.UnservedClaimMix). gpus says whether a claim so named
// asks for GPUs (NVIDIA's classes), or the mix was of GPUs.
func unservedClaims(claims []podClaim) (what []string, gpus bool) {
	var whole, shares int64
	for _, c := range claims {
		if c.spec == nil {
			continue // not judged: the scheduler reports it, if it comes and asks for such things
		}
		if w := fairwayv1.UnservedClaimRequests(c.spec); len(w) > 0 {
			what = append(what, fmt.Sprintf("%s %s (%s)", c.kind, c.name, strings.Join(w, "; ")))
			gpus = gpus || asksForGPUDevices(c.spec)
		}
		w, sh := fairwayv1.ClaimGPUAsks(c.spec, fairwayv1.NVIDIAClasses)
		whole, shares = whole+w, shares+int64(len(sh))
	}
	if mix := fairwayv1.UnservedClaimMix(whole, shares); mix != "" {
		what, gpus = append(what, mix), true
	}
	return what, gpus
}

// asksForGPUDevices: a request of the claim, or one of its alternatives, names a DeviceClass of
// NVIDIA's GPUs or of their partitions (admin access included: it still reaches the device).
func asksForGPUDevices(spec *resourceapi.ResourceClaimSpec) bool {
	gpu := func(class string) bool {
		return fairwayv1.NVIDIAClasses.IsGPUClass(class) || fairwayv1.NVIDIAClasses.IsPartitionClass(class)
	}
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && gpu(r.Exactly.DeviceClassName) {
			return true
		}
		for _, s := range r.FirstAvailable {
			if gpu(s.DeviceClassName) {
				return true
			}
		}
	}
	return false
}

// unservedClaimsWarning is what the creator of a pod whose claims fairway does not serve reads
// when the pod is left to its own scheduler.
func unservedClaimsWarning(pod *corev1.Pod, what []string) string {
	return fmt.Sprintf("fairway: pod's %s asks for what fairway does not serve, so it is left to scheduler %s: it gets no fairway queue, quota, gang or GPU share; "+
		"to have fairway schedule it, ask for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\")", strings.Join(what, ", "), ownScheduler(pod))
}

// unservedGPUClaimsDenial refuses a pod of a served namespace whose claims ask for GPUs in a way
// fairway's allocator does not serve: left to kube-scheduler, it would hold them outside every
// queue (BypassHandler).
func unservedGPUClaimsDenial(pod *corev1.Pod, what []string) error {
	return deny("pod %s asks for GPUs in a way fairway does not serve, in namespace %s, which a fairway queue serves: %s; "+
		"kube-scheduler would allocate them charged to no queue, so the queue's guarantees and limits would not hold; "+
		"ask for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\"), or run the pod in a namespace no queue serves",
		podName(pod), pod.Namespace, strings.Join(what, ", "))
}

// unservedClaimsDenial refuses a pod that names fairway's scheduler but whose claims fairway's
// allocator does not serve: taken, it would never be placed (the scheduler reports it unsupported).
// Left to kube-scheduler, GPUs would be refused too (unservedGPUClaimsDenial): then the only
// way out is a claim fairway serves.
func unservedClaimsDenial(what []string, gpus bool) error {
	out := "remove spec.schedulerName to leave the pod to kube-scheduler, or ask"
	if gpus {
		out = "ask"
	}
	return deny("spec.schedulerName is %q, but the pod's %s asks for what fairway does not serve, so fairway could never place it: "+
		"%s for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\")", schedulerName, strings.Join(what, ", "), out)
}
