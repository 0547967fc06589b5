package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// WhyWorkflowView is the output of `fairway why workflow/NAME -o json|yaml`: the run's pipeline
// admission, as the webhook and the scheduler wrote it on the Workflow (v1alpha1.Run*).
type WhyWorkflowView struct {
	Kind   string    `json:"kind"` // WhyWorkflow
	Object ObjectRef `json:"object"`
	// State is Held, Admitted, PerPod or Staged; empty when pipeline admission did not act on the run
	// (its queue admits pod by pod, or it asks for no GPU).
	State   string `json:"state,omitempty"`
	Queue   string `json:"queue,omitempty"`
	Peak    string `json:"peak,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Hint    string `json:"hint,omitempty"`
	// Since is when the state last changed.
	Since     string `json:"since,omitempty"`
	Suspended bool   `json:"suspended"`
}

// runWhyWorkflow explains the admission of an Argo Workflow (a Kubeflow Pipelines run).
func runWhyWorkflow(ctx context.Context, o *Options, name string) error {
	ns := o.namespace
	wf := &unstructured.Unstructured{}
	wf.SetAPIVersion("argoproj.io/v1alpha1")
	wf.SetKind("Workflow")
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wf); err != nil {
		return getError(err, "Workflow", ns, name)
	}
	view := BuildWhyWorkflow(wf)
	if ok, err := o.printStructured(view); ok {
		return err
	}
	return PrintWhyWorkflow(o.Out, view, o.Now())
}

// BuildWhyWorkflow reads a Workflow's run-admission annotations.
func BuildWhyWorkflow(wf *unstructured.Unstructured) WhyWorkflowView {
	a := wf.GetAnnotations()
	v := WhyWorkflowView{Kind: "WhyWorkflow", Object: ObjectRef{Kind: "Workflow", Namespace: wf.GetNamespace(), Name: wf.GetName()},
		State: a[fairwayv1.RunAdmissionAnnotation], Queue: a[fairwayv1.RunQueueAnnotation], Peak: a[fairwayv1.RunPeakAnnotation],
		Reason: a[fairwayv1.RunReasonAnnotation], Message: a[fairwayv1.RunMessageAnnotation], Since: a[fairwayv1.RunTransitionAnnotation]}
	v.Suspended, _, _ = unstructured.NestedBool(wf.Object, "spec", "suspend")
	switch fairwayv1.RunAdmissionReason(v.Reason) {
	case fairwayv1.RunPeakAboveGuarantee:
		v.Hint = "the scheduler has not judged the run yet, or is not running: it writes its own reason within a cycle"
	case fairwayv1.RunNeverFits:
		v.Hint = "the run's steps are scheduled one by one; raise the queue's GPU limit, or lower the steps' GPUs, for it to be admitted whole"
	case fairwayv1.RunProfileUnknown:
		v.Hint = "give loops over upstream outputs a parallelism, or run pod by pod (spec.pipelineAdmission: PerPod)"
	case fairwayv1.RunStagesAhead:
		v.Hint = "the next GPU stage's capacity is held the scheduler's --pipeline-stage-lead before the steps before it are expected to end " +
			"(their " + fairwayv1.ExpectedDurationAnnotation + ", else what they took in earlier runs), else when they end"
	case fairwayv1.RunStageHeld:
		v.Hint = "the stage's pods take the held capacity as they come; later work waits for it"
	case fairwayv1.RunStageLapsed:
		v.Hint = "declare the steps' durations (" + fairwayv1.ExpectedDurationAnnotation + ") closer to what they take; the stage's pods are scheduled as they come"
	case "":
	default:
		v.Hint = hintFor(v.Reason)
	}
	return v
}

// PrintWhyWorkflow writes the view for people.
func PrintWhyWorkflow(w io.Writer, v WhyWorkflowView, now time.Time) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s%s\n", label+":", fmt.Sprintf(format, args...))
	}
	line("Workflow", "%s/%s", v.Object.Namespace, v.Object.Name)
	if v.State == "" {
		line("Admission", "pod by pod: pipeline admission did not act on this run (its queue admits pod by pod, or it asks for no GPU)")
		_, err := io.WriteString(w, b.String())
		return err
	}
	if v.Queue != "" {
		line("Queue", "%s", v.Queue)
	}
	if v.Peak != "" {
		line("Peak", "%s", v.Peak)
	}
	state := v.State
	if t, err := time.Parse(time.RFC3339, v.Since); err == nil {
		state += " for " + age(now.Sub(t))
	}
	if v.Suspended {
		state += " (spec.suspend: true: no pod of it is created)"
	}
	if v.State == string(fairwayv1.RunStaged) {
		state += " (it runs; each GPU stage's capacity is held shortly before it)"
	}
	line("State", "%s", state)
	if v.Reason != "" {
		line("Reason", "%s", v.Reason)
	}
	if v.Message != "" {
		line("Message", "%s", v.Message)
	}
	if v.Hint != "" {
		line("Hint", "%s", v.Hint)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
