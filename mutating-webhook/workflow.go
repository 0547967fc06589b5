package mutatingwebhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/fairway-sched/fairway/adapters/argo/runprofile"
	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// WorkflowPath admits the runs of Argo Workflows (and so of Kubeflow Pipelines) in the
// namespaces of queues whose pipelineAdmission is Peak or Stages.
const WorkflowPath = "/mutate-workflow"

// QueueReader reads Queue objects, spec and status; nil without error when there is none.
type QueueReader interface {
	Queue(ctx context.Context, name string) (*fairwayv1.Queue, error)
}

// WorkflowHandler serves WorkflowPath. On the creation of a Workflow in a namespace whose queue
// admits pipelines whole (QueueSpec.PipelineAdmission Peak), it profiles the run
// (runprofile.Compute) and, when the run's GPU steps may need more GPUs at once than the queue
// surely has, holds it: it sets Argo's spec.suspend, so that no pod of the run is created, and
// the scheduler resumes it when its peak fits (scheduler/runtime/pipelines). It writes the run's
// state to the v1alpha1.Run* annotations either way.
//
// The check here is quick and conservative: a run is started at once only when its peak fits
// within the queue's guaranteed GPUs beside everything the queue already asks for (its status's
// requested GPUs); whether it fits by borrowing is the scheduler's to decide, within a cycle. A
// run that could never be held usefully is left to run pod by pod, as without pipeline
// admission, with the reason on the Workflow and in a warning: one whose peak is above the
// queue's GPU limit, or whose peak is not known before it starts. A Workflow the user created
// suspended is left alone.
//
// In a queue whose pipelineAdmission is Stages, a run that asks for GPUs is never held: it is
// marked v1alpha1.RunStaged, which tells the scheduler to hold capacity for its GPU stages
// ahead.
//
// Only fairway writes a run's admission (v1alpha1.RunAdmissionKeys): a Held or Staged state is
// capacity held for the run. At creation the handler drops the keys whoever wrote them, with a
// warning naming them, and writes its own decision: a refusal would break `argo resubmit` and
// every copy of a run, which carry the original's annotations, while dropping gives a forger
// nothing. On update it refuses a change of the keys by any identity but fairway's
// (v1alpha1.IsFairwayIdentity), naming each key: the user did write that change, and a silent
// drop would hide it. The scheduler checks the queue again itself (scheduler/runtime/pipelines).
type WorkflowHandler struct {
	state  ClusterState
	queues QueueReader
	now    func() time.Time
	// fairwayNamespace is fairway's namespace: its ServiceAccounts may write the run keys.
	fairwayNamespace string
}

var _ admission.Handler = (*WorkflowHandler)(nil)

// NewWorkflowHandler returns the handler; fairwayNamespace is fairway's own namespace, whose
// ServiceAccounts (the scheduler's) may change a run's admission keys.
func NewWorkflowHandler(state ClusterState, queues QueueReader, fairwayNamespace string) *WorkflowHandler {
	return &WorkflowHandler{state: state, queues: queues, now: time.Now, fairwayNamespace: fairwayNamespace}
}

// HTTPHandler serves h over HTTP for a webhook server, with panic recovery on.
func (h *WorkflowHandler) HTTPHandler(log logr.Logger) http.Handler {
	return serve(h, log)
}

// RunDecision is what the webhook decided for a run.
type RunDecision struct {
	State   fairwayv1.RunAdmissionState
	Reason  string
	Message string
	Queue   string
	Peak    runprofile.Demand
}

// Handle implements admission.Handler.
func (h *WorkflowHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != "argoproj.io" || req.Kind.Kind != "Workflow" || req.SubResource != "" {
		return admission.Allowed("")
	}
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		return h.guardUpdate(req)
	default:
		return admission.Allowed("")
	}
	wf := &unstructured.Unstructured{}
	if err := json.Unmarshal(req.Object.Raw, &wf.Object); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the workflow: %w", err))
	}
	ns := wf.GetNamespace()
	if ns == "" {
		ns = req.Namespace
	}
	var ops []jsonpatch.JsonPatchOperation
	var warnings []string
	if !isFairway(req, h.fairwayNamespace) {
		dropped := dropRunKeys(wf)
		for _, k := range dropped {
			ops = append(ops, jsonpatch.NewOperation("remove", "/metadata/annotations/"+escapePointer(k), nil))
		}
		if len(dropped) > 0 {
			warnings = append(warnings, fmt.Sprintf("fairway: annotations %s dropped: only fairway writes a run's admission", strings.Join(dropped, ", ")))
		}
	}
	d, err := h.Decide(ctx, wf, ns)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Pipeline admission failed; the run is left to run pod by pod", "workflow", ns+"/"+wf.GetName())
		warnings = append(warnings, "fairway: pipeline admission could not decide ("+err.Error()+"); the run's pods are scheduled one by one")
		return patched(ops).WithWarnings(warnings...)
	}
	if d == nil {
		return patched(ops).WithWarnings(warnings...)
	}
	ops = append(ops, runPatch(wf, d, h.now())...)
	name := wf.GetName()
	if name == "" {
		name = "<name>"
	}
	switch d.State {
	case fairwayv1.RunHeld:
		warnings = append(warnings, fmt.Sprintf("fairway: the run is held (spec.suspend) until its peak of %s fits queue %s: %s; `kubectl fairway why workflow/%s` says why it waits", d.Peak, d.Queue, d.Message, name))
	case fairwayv1.RunPerPod:
		warnings = append(warnings, fmt.Sprintf("fairway: the run is not admitted as a whole (%s): %s; its pods are scheduled one by one", d.Reason, d.Message))
	}
	return admission.Patched("", ops...).WithWarnings(warnings...)
}

// patched allows the request with ops, or unchanged when there are none.
func patched(ops []jsonpatch.JsonPatchOperation) admission.Response {
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
}

func isFairway(req admission.Request, fairwayNamespace string) bool {
	return fairwayv1.IsFairwayIdentity(req.UserInfo.Username, req.UserInfo.Groups, fairwayNamespace)
}

// dropRunKeys removes the run keys from wf's annotations and returns them, sorted.
func dropRunKeys(wf *unstructured.Unstructured) []string {
	ann := wf.GetAnnotations()
	var dropped []string
	for _, k := range fairwayv1.RunAdmissionKeys {
		if _, ok := ann[k]; ok {
			dropped = append(dropped, k)
			delete(ann, k)
		}
	}
	if len(dropped) > 0 {
		wf.SetAnnotations(ann)
	}
	slices.Sort(dropped)
	return dropped
}

// guardUpdate refuses an update of a Workflow that adds, removes or changes one of
// v1alpha1.RunAdmissionKeys, unless fairway makes it.
func (h *WorkflowHandler) guardUpdate(req admission.Request) admission.Response {
	if isFairway(req, h.fairwayNamespace) {
		return admission.Allowed("")
	}
	if len(req.Object.Raw) == 0 || len(req.OldObject.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, errors.New("an update request must carry the object and the old object"))
	}
	var old, cur podMeta // the metadata alone, whatever the size of the run's status
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old workflow: %w", err))
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &cur); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the workflow: %w", err))
	}
	changed := changedKeys("annotation", fairwayv1.RunAdmissionKeys, old.Metadata.Annotations, cur.Metadata.Annotations)
	if len(changed) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(strings.Join(changed, "; ") +
		": only fairway writes a run's admission (a held or staged run has capacity kept for it); delete the run and create it again")
}

// Decide returns what to do with a new run in namespace ns, nil to leave it alone.
func (h *WorkflowHandler) Decide(ctx context.Context, wf *unstructured.Unstructured, ns string) (*RunDecision, error) {
	if wf.GetLabels()[fairwayv1.IgnoreLabel] == "true" {
		return nil, nil
	}
	if suspended, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend"); suspended {
		return nil, nil // the user holds it; fairway resumes only runs it held
	}
	serving, err := h.state.QueuesServing(ctx, ns)
	if err != nil || len(serving) == 0 {
		return nil, err
	}
	queue := runQueue(wf, serving)
	if queue == "" {
		return nil, nil // the pods' own admission chooses or refuses
	}
	chain, err := h.chain(ctx, queue)
	if err != nil || len(chain) == 0 {
		return nil, err
	}
	modes := make([]fairwayv1.PipelineAdmission, len(chain))
	for i, q := range chain {
		modes[i] = q.Spec.PipelineAdmission
	}
	mode := fairwayv1.ResolvePipelineAdmission(modes...)
	if mode != fairwayv1.PipelineAdmissionPeak && mode != fairwayv1.PipelineAdmissionStages {
		return nil, nil
	}
	d := &RunDecision{Queue: queue}
	prof, err := runprofile.Compute(wf, runprofile.Options{})
	if err != nil {
		d.State, d.Reason, d.Message = fairwayv1.RunPerPod, string(fairwayv1.RunProfileUnknown), "fairway cannot profile the run: "+err.Error()
		return d, nil
	}
	d.Peak = prof.Peak
	if !prof.Peak.HasGPU() {
		return nil, nil // nothing to wait for
	}
	if mode == fairwayv1.PipelineAdmissionStages {
		// The run starts now; the scheduler holds its GPU stages as they come near
		// (scheduler/runtime/pipelines). A profile that is not a bound still names the stages.
		d.State, d.Reason = fairwayv1.RunStaged, string(fairwayv1.RunStagesAhead)
		d.Message = fmt.Sprintf("the run starts at once; each of its %d GPU stages is held in queue %s when the steps before it are about to finish", len(prof.GPUStages()), queue)
		return d, nil
	}
	if prof.Unbounded {
		d.State, d.Reason = fairwayv1.RunPerPod, string(fairwayv1.RunProfileUnknown)
		d.Message = "the run's peak is not known before it starts: " + strings.Join(prof.Bounds, "; ")
		return d, nil
	}
	peak := PeakMilliGPU(prof.Peak, h.state.LargestGPUMemoryMiB())
	for _, q := range chain {
		if g := q.Spec.Resources.GPU; g != nil && g.Limit != nil && peak > g.Limit.MilliValue() {
			d.State, d.Reason = fairwayv1.RunPerPod, string(fairwayv1.RunNeverFits)
			d.Message = fmt.Sprintf("its peak of %s is above queue %s's limit of %s", gpurequest.FormatGPUs(peak), q.Name, gpurequest.FormatGPUs(g.Limit.MilliValue()))
			return d, nil
		}
	}
	leaf := chain[0]
	var guarantee int64
	if g := leaf.Spec.Resources.GPU; g != nil && g.Quota != nil {
		guarantee = g.Quota.MilliValue()
	}
	var requested int64
	if q, ok := leaf.Status.Requested["gpu"]; ok {
		requested = q.MilliValue()
	}
	if requested+peak <= guarantee {
		d.State, d.Reason = fairwayv1.RunAdmitted, string(fairwayv1.RunPeakFits)
		d.Message = fmt.Sprintf("its peak of %s fits queue %s's guarantee of %s beside the %s it already asks for", gpurequest.FormatGPUs(peak), queue, gpurequest.FormatGPUs(guarantee), gpurequest.FormatGPUs(requested))
		return d, nil
	}
	d.State, d.Reason = fairwayv1.RunHeld, string(fairwayv1.RunPeakAboveGuarantee)
	d.Message = fmt.Sprintf("its peak of %s is above what queue %s surely has (a guarantee of %s, %s asked for already); the scheduler starts it when its peak fits, borrowing included", gpurequest.FormatGPUs(peak), queue, gpurequest.FormatGPUs(guarantee), gpurequest.FormatGPUs(requested))
	return d, nil
}

// PeakMilliGPU is a peak in thousandths of a GPU, shares asked by memory counted against the
// largest GPU (the least they can be).
func PeakMilliGPU(d runprofile.Demand, largestGPUMemoryMiB int64) int64 {
	peak := d.GPUMilli
	if d.GPUMemoryMiB > 0 && largestGPUMemoryMiB > 0 {
		peak += (d.GPUMemoryMiB*1000 + largestGPUMemoryMiB - 1) / largestGPUMemoryMiB
	}
	return peak
}

// runQueue is the queue a run's pods will get: the one the Workflow's labels or its pods'
// labels (spec.podMetadata) name, when it serves the namespace, else the one queue serving it.
func runQueue(wf *unstructured.Unstructured, serving []string) string {
	podLabels, _, _ := unstructured.NestedStringMap(wf.Object, "spec", "podMetadata", "labels")
	for _, labels := range []map[string]string{podLabels, wf.GetLabels()} {
		if _, q, err := fairwayv1.QueueOf(labels); err == nil && q != "" {
			if slices.Contains(serving, q) {
				return q
			}
			return ""
		}
	}
	if len(serving) == 1 {
		return serving[0]
	}
	return ""
}

// chain returns the queue and its ancestors, the queue first, stopping at a missing parent or
// a loop.
func (h *WorkflowHandler) chain(ctx context.Context, name string) ([]*fairwayv1.Queue, error) {
	var out []*fairwayv1.Queue
	seen := map[string]bool{}
	for name != "" && !seen[name] {
		seen[name] = true
		q, err := h.queues.Queue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading queue %s: %w", name, err)
		}
		if q == nil {
			break
		}
		out = append(out, q)
		name = q.Spec.Parent
	}
	return out, nil
}

// runPatch writes the decision: the annotations, and spec.suspend for a held run.
func runPatch(wf *unstructured.Unstructured, d *RunDecision, now time.Time) []jsonpatch.JsonPatchOperation {
	ann := fairwayv1.RunAdmission{State: d.State, Reason: d.Reason, Message: d.Message, Queue: d.Queue,
		Peak: d.Peak.String(), Time: now}.Annotations()
	var ops []jsonpatch.JsonPatchOperation
	if wf.GetAnnotations() == nil {
		m := map[string]any{}
		for k, v := range ann {
			m[k] = v
		}
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations", m))
	} else {
		for _, k := range slices.Sorted(maps.Keys(ann)) {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations/"+escapePointer(k), ann[k]))
		}
	}
	if d.State == fairwayv1.RunHeld {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/suspend", true))
	}
	return ops
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
