package mutatingwebhook_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestBypassRefusesGPUsOutsideFairway: in a served namespace (the webhook configuration sends
// only those), a pod that asks for GPUs (whole ones, or through claims of NVIDIA's classes) under
// another scheduler is refused, each way of getting there named with its way out; pods fairway
// places and pods without GPUs pass.
func TestBypassRefusesGPUsOutsideFairway(t *testing.T) {
	eight := corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}
	zero := corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("0")}
	claimTemplate := func(name, class string) *resourceapi.ResourceClaimTemplate {
		t := &resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		}
		t.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "d", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: 1}}}
		return t
	}
	objects := adaptertest.NewReader(toUnstructured(claimTemplate("one-gpu", fairwayv1.NVIDIAGPUDeviceClass)),
		toUnstructured(claimTemplate("one-mig", fairwayv1.NVIDIAMIGDeviceClass)), toUnstructured(claimTemplate("one-nic", "rdma.example.com")))
	withClaim := func(name, template string) *corev1.Pod {
		p := makePod(name).label(fairwayv1.IgnoreLabel, "true").obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "d", ResourceClaimTemplateName: &template}}
		return p
	}
	withInitGPU := makePod("init-gpu").obj()
	withInitGPU.Spec.InitContainers = []corev1.Container{{Name: "warm", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: oneGPU, Limits: oneGPU}}}
	cases := map[string]struct {
		pod  *corev1.Pod
		want []string // parts of the refusal; none: allowed
	}{
		"opted out": {makePod("opted-out").label(fairwayv1.IgnoreLabel, "true").limits(eight).obj(),
			[]string{"pod opted-out asks for 8 nvidia.com/gpu (container c) in namespace team-a, which a fairway queue serves, but is opted out of fairway (label fairway.dev/ignore=true)", "remove the label"}},
		"created on a node": {makePod("on-node").node("h100-0").limits(oneGPU).obj(),
			[]string{"is created on node h100-0 (spec.nodeName)", "leave spec.nodeName empty"}},
		"a DaemonSet's": {makePod("ds").owner("apps/v1", "DaemonSet", "grab").limits(oneGPU).obj(),
			[]string{"belongs to a DaemonSet, whose pods fairway does not schedule"}},
		"another scheduler": {makePod("volcano").scheduler("volcano").limits(oneGPU).obj(),
			[]string{`names scheduler "volcano", which fairway does not take pods from`, "set it to fairway"}},
		"an init container's GPU": {withInitGPU, []string{"asks for 1 nvidia.com/gpu (container warm)"}},
		"left by the webhook":     {makePod("left").scheduler(corev1.DefaultSchedulerName).limits(oneGPU).obj(), []string{`was left to scheduler "default-scheduler" by fairway's webhook`}},
		"a GPU through a claim":   {withClaim("dra-gpu", "one-gpu"), []string{"asks for GPUs through ResourceClaimTemplate one-gpu in namespace team-a", "is opted out of fairway"}},
		"a MIG device":            {withClaim("dra-mig", "one-mig"), []string{"asks for GPUs through ResourceClaimTemplate one-mig"}},
		"another device":          {withClaim("dra-nic", "one-nic"), nil},
		"a claim not there yet":   {withClaim("dra-later", "later"), []string{"asks for devices through ResourceClaimTemplate later, not there yet (create the claims first"}},
		"fairway's":               {makePod("fairways").scheduler(fairwayv1.SchedulerName).node("h100-0").limits(eight).obj(), nil},
		"no GPU, opted out":       {makePod("cpu").label(fairwayv1.IgnoreLabel, "true").obj(), nil},
		"zero GPUs":               {makePod("zero").scheduler("volcano").limits(zero).obj(), nil},
	}
	h := mutatingwebhook.NewBypassHandler(mutatingwebhook.Options{TakeOverSchedulers: mutatingwebhook.DefaultTakeOverSchedulers}, objects)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), createRequest(t, tc.pod, "team-a"))
			if len(tc.want) == 0 {
				if !resp.Allowed {
					t.Errorf("refused: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed {
				t.Fatalf("allowed, want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("refusal %q does not say %q", resp.Result.Message, w)
				}
			}
			if resp.Result.Code != 403 {
				t.Errorf("code %d, want 403", resp.Result.Code)
			}
		})
	}
}
