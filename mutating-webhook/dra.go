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

// unservedClaims names, claim by claim, what the pod's ResourceClaims and ResourceClaimTemplates
// ask for that fairway's DRA allocator does not serve (fairwayv1.UnservedClaimRequests), and
// what they ask for together that fairway cannot count (fairwayv1.UnservedClaimMix). A
// claim or template that is not there yet is not judged (the scheduler reports it, if it comes
// and asks for such things), nor are claims where the API server does not serve DRA.
func (d *PodDefaulter) unservedClaims(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	if d.objects == nil {
		return nil, nil
	}
	var what []string
	var whole, shares int64
	for _, pc := range pod.Spec.ResourceClaims {
		gvk, name := resourceClaimGVK, pc.ResourceClaimName
		if pc.ResourceClaimTemplateName != nil {
			gvk, name = resourceClaimTemplateGVK, pc.ResourceClaimTemplateName
		}
		if name == nil {
			continue
		}
		u, err := d.objects.Get(ctx, gvk, pod.Namespace, *name)
		if errors.Is(err, adapters.ErrKindNotInstalled) || apierrors.IsNotFound(err) {
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
				continue // allocated already: nothing left for fairway's allocator to serve
			}
			spec = &c.Spec
		}
		if w := fairwayv1.UnservedClaimRequests(spec); len(w) > 0 {
			what = append(what, fmt.Sprintf("%s %s (%s)", gvk.Kind, *name, strings.Join(w, "; ")))
		}
		w, sh := fairwayv1.ClaimGPUAsks(spec, fairwayv1.NVIDIAClasses)
		whole, shares = whole+w, shares+int64(len(sh))
	}
	if mix := fairwayv1.UnservedClaimMix(whole, shares); mix != "" {
		what = append(what, mix)
	}
	return what, nil
}

// unservedClaimsWarning is what the creator of a pod whose claims fairway does not serve reads
// when the pod is left to its own scheduler.
func unservedClaimsWarning(pod *corev1.Pod, what []string) string {
	return fmt.Sprintf("fairway: pod's %s asks for what fairway does not serve, so it is left to scheduler %s: it gets no fairway queue, quota, gang or GPU share; "+
		"to have fairway schedule it, ask for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\")", strings.Join(what, ", "), ownScheduler(pod))
}

// unservedClaimsDenial refuses a pod that names fairway's scheduler but whose claims fairway's
// allocator does not serve: taken, it would never be placed (the scheduler reports it unsupported).
func unservedClaimsDenial(what []string) error {
	return deny("spec.schedulerName is %q, but the pod's %s asks for what fairway does not serve, so fairway could never place it: "+
		"remove spec.schedulerName to leave the pod to kube-scheduler, or ask for whole devices or for the memory of one device (docs/dra.md, \"Shares through DRA\")", schedulerName, strings.Join(what, ", "))
}
