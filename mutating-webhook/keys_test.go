package mutatingwebhook_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestUnknownKeys: a fairway.dev/ key fairway does not know, a near-miss of a Run:ai/KAI key and
// a key in the wrong map get a warning naming the key meant; on a pod that asks for a GPU share
// (or meant to) they are refused with the same words.
func TestUnknownKeys(t *testing.T) {
	cases := []struct {
		name       string
		pod        *corev1.Pod
		wantWarn   []string
		wantDenied string
	}{
		{
			name: "every key fairway knows: nothing said",
			pod: makePod("known").label(fairwayv1.QueueLabel, "team-a").label(fairwayv1.PreemptibilityLabel, "preemptible").
				annotate(fairwayv1.GPUFractionAnnotation, "0.5").annotate(fairwayv1.GPUContainerAnnotation, "c").
				annotate(fairwayv1.ExpectedDurationAnnotation, "5m").annotate(fairwayv1.PodGroupAnnotation, "copied").obj(),
		},
		{
			name:     "other tools' keys: nothing said",
			pod:      makePod("others").label("app", "x").annotate("cpu-memory", "1Gi").annotate("example.com/gpu-fraction", "x").obj(),
			wantWarn: nil,
		},
		{
			name:     "typo of a label key",
			pod:      makePod("typo").label("fairway.dev/preemptibilty", "preemptible").obj(),
			wantWarn: []string{"fairway: unknown label key fairway.dev/preemptibilty; did you mean fairway.dev/preemptibility?"},
		},
		{
			name:     "unknown key, nothing near",
			pod:      makePod("far").annotate("fairway.dev/colour", "blue").obj(),
			wantWarn: []string{"fairway: unknown annotation key fairway.dev/colour: fairway neither reads nor writes it"},
		},
		{
			name:     "Run:ai alias near-miss on a pod without a share",
			pod:      makePod("runai").label("runai/queu", "team-a").obj(),
			wantWarn: []string{"fairway: unknown label key runai/queu; did you mean runai/queue?"},
		},
		{
			name:     "label where an annotation belongs",
			pod:      makePod("map").label(fairwayv1.GangAnnotation, "true").obj(),
			wantWarn: []string{"fairway: fairway.dev/gang is an annotation, not a label: fairway does not read it here; move it to metadata.annotations"},
		},
		{
			name:     "a node label on a pod",
			pod:      makePod("node").label(fairwayv1.GPUTypeLabel, "H100").obj(),
			wantWarn: []string{"fairway: label fairway.dev/gpu-type is a node label the gpu-agent writes; on a pod it does nothing"},
		},
		{
			name:       "typo of the fraction key: meant a share, refused",
			pod:        makePod("fracton").annotate("fairway.dev/gpu-fracton", "0.25").obj(),
			wantDenied: "unknown annotation key fairway.dev/gpu-fracton; did you mean fairway.dev/gpu-fraction? (refused: the pod asks fairway for a GPU share, which a misspelt key would lose or misplace)",
		},
		{
			name:       "typo beside a share: refused",
			pod:        makePod("containr").annotate(fairwayv1.GPUFractionAnnotation, "0.5").annotate("fairway.dev/gpu-containr", "c").obj(),
			wantDenied: "unknown annotation key fairway.dev/gpu-containr; did you mean fairway.dev/gpu-container?",
		},
		{
			name:       "alias near-miss beside a Run:ai share: refused",
			pod:        makePod("kai").annotate("gpu-fraction", "0.5").label("kai.scheduler/queeu", "team-a").obj(),
			wantDenied: "unknown label key kai.scheduler/queeu; did you mean kai.scheduler/queue?",
		},
		{
			name:       "transposed letters",
			pod:        makePod("swap").annotate("fairway.dev/gpu-mmeory", "20Gi").obj(),
			wantDenied: "did you mean fairway.dev/gpu-memory?",
		},
	}
	h := newHandler(defaultState(), nil, mutatingwebhook.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := createRequest(t, tc.pod, "team-a")
			resp := h.Handle(context.Background(), req)
			if tc.wantDenied != "" {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantDenied) {
					t.Fatalf("response %+v, want a denial containing %q", resp.Result, tc.wantDenied)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("refused: %s", resp.Result.Message)
			}
			if !slices.Equal(resp.Warnings, tc.wantWarn) {
				t.Errorf("warnings\n %q\nwant\n %q", resp.Warnings, tc.wantWarn)
			}
			if got := applyPatch(t, req, resp); got.Spec.SchedulerName != fairwayv1.SchedulerName {
				t.Errorf("scheduler %q: the pod should still be fairway's", got.Spec.SchedulerName)
			}
		})
	}
}
