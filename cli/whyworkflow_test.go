package cli

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestWhyWorkflow(t *testing.T) {
	wf := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"suspend": true}}}
	wf.SetNamespace("kubeflow-user-alice")
	wf.SetName("vision-training-x7k2p")
	wf.SetAnnotations(map[string]string{
		fairwayv1.RunAdmissionAnnotation:  string(fairwayv1.RunHeld),
		fairwayv1.RunQueueAnnotation:      "vision",
		fairwayv1.RunPeakAnnotation:       "gpu=8,cpu=8",
		fairwayv1.RunReasonAnnotation:     string(fairwayv1.ReasonNoNodeFits),
		fairwayv1.RunMessageAnnotation:    "0/1 nodes fit",
		fairwayv1.RunTransitionAnnotation: "2026-01-01T00:00:00Z",
	})
	v := BuildWhyWorkflow(wf)
	if v.Hint != hintFor(string(fairwayv1.ReasonNoNodeFits)) || v.Hint == "" {
		t.Errorf("hint %q, want the engine's reason's", v.Hint)
	}
	var b strings.Builder
	if err := PrintWhyWorkflow(&b, v, time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Workflow:   kubeflow-user-alice/vision-training-x7k2p", "Queue:      vision", "Peak:       gpu=8,cpu=8",
		"State:      Held for 5m", "no pod of it is created", "Reason:     NoNodeFits", "Message:    0/1 nodes fit"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	staged := &unstructured.Unstructured{Object: map[string]any{}}
	staged.SetName("vision-training-s9q2w")
	staged.SetAnnotations(map[string]string{
		fairwayv1.RunAdmissionAnnotation: string(fairwayv1.RunStaged),
		fairwayv1.RunReasonAnnotation:    string(fairwayv1.RunStageHeld),
		fairwayv1.RunMessageAnnotation:   "stage 4 (root/train/executor, gpu=4) is held on h100-0",
	})
	b.Reset()
	if err := PrintWhyWorkflow(&b, BuildWhyWorkflow(staged), time.Now()); err != nil || !strings.Contains(b.String(), "State:      Staged (it runs") ||
		!strings.Contains(b.String(), "Hint:       the stage's pods take the held capacity") {
		t.Errorf("a Staged run: %q %v", b.String(), err)
	}
	plain := &unstructured.Unstructured{Object: map[string]any{}}
	plain.SetName("cpu-run")
	b.Reset()
	if err := PrintWhyWorkflow(&b, BuildWhyWorkflow(plain), time.Now()); err != nil || !strings.Contains(b.String(), "pod by pod") {
		t.Errorf("a run pipeline admission left alone: %q %v", b.String(), err)
	}
}
