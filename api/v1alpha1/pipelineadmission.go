package v1alpha1

import (
	"slices"
	"strconv"
	"time"
)

// PipelineAdmission says how a queue admits the runs of Argo Workflows, and so of Kubeflow
// Pipelines v2, whose runs are Argo Workflows (QueueSpec.PipelineAdmission).
// +kubebuilder:validation:Enum=PerPod;Peak;Stages
type PipelineAdmission string

// Pipeline admission modes.
const (
	// PipelineAdmissionPerPod admits every step pod on its own, as it comes: a run starts at once
	// and its GPU steps wait for GPUs when they get there. What every scheduler does.
	PipelineAdmissionPerPod PipelineAdmission = "PerPod"
	// PipelineAdmissionPeak admits a run as a whole: a run whose GPU steps may need more GPUs at
	// once than the queue can give now is held before its first pod (Argo's spec.suspend, set
	// by the webhook at creation), and the scheduler starts it when its peak fits, in queue
	// order and fair share, like a pending gang (docs/pipeline-admission.md).
	PipelineAdmissionPeak PipelineAdmission = "Peak"
	// PipelineAdmissionStages starts a run at once and holds capacity for each of its GPU stages ahead:
	// when the steps before a GPU stage are about to finish (their expected duration, declared
	// with ExpectedDurationAnnotation or learnt from earlier runs, nearly elapsed) or have
	// finished, the scheduler queues the stage's GPU pods as a pending gang in the run's place
	// (its creation time), holds the capacity the engine gives it, and hands it to the stage's
	// own pods when they come, so that the GPU step does not wait behind work that arrived later
	// (docs/pipeline-admission.md).
	PipelineAdmissionStages PipelineAdmission = "Stages"
)

// ExpectedDurationAnnotation declares how long a step's pod is expected to run (a Go duration,
// "45m"), on the pod (an Argo template's metadata, or kfp.kubernetes.add_pod_annotation). With
// pipelineAdmission Stages, the next GPU stage is held when the steps before it are within
// the scheduler's stage lead of their expected end; without it, the durations of the same step
// in earlier runs of the same pipeline are used, else the stage is held when they finish.
const ExpectedDurationAnnotation = "fairway.dev/expected-duration"

// ResolvePipelineAdmission returns the mode of the first of modes (a queue's, then its
// ancestors') that is set; PipelineAdmissionPerPod when none is.
func ResolvePipelineAdmission(modes ...PipelineAdmission) PipelineAdmission {
	if i := slices.IndexFunc(modes, func(m PipelineAdmission) bool { return m != "" }); i >= 0 {
		return modes[i]
	}
	return PipelineAdmissionPerPod
}

// Keys fairway writes on a Workflow whose queue admits pipelines whole: a condition in
// annotations (Argo's Workflow has no conditions of fairway's kind). The webhook writes them at
// creation; the scheduler updates them while it holds the run and when it starts it.
const (
	// RunAdmissionAnnotation is the run's state: RunHeld, RunAdmitted or RunPerPod.
	RunAdmissionAnnotation = "fairway.dev/run-admission"
	// RunReasonAnnotation is the machine-readable reason of the state: a RunAdmissionReason, or,
	// while the scheduler holds the run, the UnschedulableReason of its peak.
	RunReasonAnnotation = "fairway.dev/run-admission-reason"
	// RunMessageAnnotation says the same for people.
	RunMessageAnnotation = "fairway.dev/run-admission-message"
	// RunQueueAnnotation is the queue the run was admitted against.
	RunQueueAnnotation = "fairway.dev/run-queue"
	// RunPeakAnnotation is the run's peak demand as the webhook computed it ("gpu=8,cpu=16").
	RunPeakAnnotation = "fairway.dev/run-peak"
	// RunTransitionAnnotation is when the state last changed (RFC 3339).
	RunTransitionAnnotation = "fairway.dev/run-admission-time"
)

// RunAdmissionKeys are the Workflow annotations only fairway writes (the Run* keys above). A
// run's state holds capacity for it (Held, Staged), so a key written by its user would be a
// hold the admin did not grant: the webhook drops them from a Workflow at creation before
// it decides (a resubmitted run carries its original's keys, which it must not inherit) and
// refuses a change of them by any identity but fairway's (IsFairwayIdentity), and the scheduler
// acts on a state only where the queue it names serves the run's namespace and admits pipelines
// in the state's mode (RunAdmissionState.Mode).
var RunAdmissionKeys = []string{RunAdmissionAnnotation, RunReasonAnnotation, RunMessageAnnotation,
	RunQueueAnnotation, RunPeakAnnotation, RunTransitionAnnotation}

// RunAdmission is what fairway records of a run on its Workflow: the one reader
// (RunAdmissionOf) and writer (Annotations) of RunAdmissionKeys, for the webhook, the scheduler
// and the CLI.
//
// +kubebuilder:object:generate=false
type RunAdmission struct {
	State   RunAdmissionState
	Reason  string
	Message string
	Queue   string
	Peak    string
	// Time is when State last changed (zero when unset or unreadable).
	Time time.Time
}

// RunAdmissionOf reads a Workflow's annotations.
func RunAdmissionOf(annotations map[string]string) RunAdmission {
	a := RunAdmission{
		State: RunAdmissionState(annotations[RunAdmissionAnnotation]), Reason: annotations[RunReasonAnnotation],
		Message: annotations[RunMessageAnnotation], Queue: annotations[RunQueueAnnotation], Peak: annotations[RunPeakAnnotation],
	}
	if t, err := time.Parse(time.RFC3339, annotations[RunTransitionAnnotation]); err == nil {
		a.Time = t
	}
	return a
}

// Annotations writes a as annotations: the keys of the fields that are set, so that a merge
// patch of them leaves the others (the webhook's queue and peak) as they are.
func (a RunAdmission) Annotations() map[string]string {
	out := make(map[string]string, len(RunAdmissionKeys))
	for k, v := range map[string]string{RunAdmissionAnnotation: string(a.State), RunReasonAnnotation: a.Reason,
		RunMessageAnnotation: a.Message, RunQueueAnnotation: a.Queue, RunPeakAnnotation: a.Peak} {
		if v != "" {
			out[k] = v
		}
	}
	if !a.Time.IsZero() {
		out[RunTransitionAnnotation] = a.Time.UTC().Format(time.RFC3339)
	}
	return out
}

// RunAdmissionState is the value of RunAdmissionAnnotation.
type RunAdmissionState string

// Mode is the pipeline admission a queue must have for the scheduler to act on a run in state s:
// Peak for RunHeld, Stages for RunStaged, "" for the states that hold nothing (RunAdmitted,
// RunPerPod) or are unknown.
func (s RunAdmissionState) Mode() PipelineAdmission {
	switch s {
	case RunHeld:
		return PipelineAdmissionPeak
	case RunStaged:
		return PipelineAdmissionStages
	}
	return ""
}

// Run admission states.
const (
	// RunHeld: the run is suspended until its peak fits.
	RunHeld RunAdmissionState = "Held"
	// RunAdmitted: the run was started as a whole (at creation, or by the scheduler).
	RunAdmitted RunAdmissionState = "Admitted"
	// RunPerPod: the run could not be admitted whole and runs pod by pod, as without pipeline
	// admission; the reason says why.
	RunPerPod RunAdmissionState = "PerPod"
	// RunStaged: the run runs (PipelineAdmissionStages); the scheduler holds each GPU stage's
	// capacity shortly before the stage, and the reason says where that stands.
	RunStaged RunAdmissionState = "Staged"
)

// RunAdmissionReason is the reason of a run's state, other than a held run's UnschedulableReason.
type RunAdmissionReason string

// Reasons of a run's state. Adding one: declare it here and list it in runAdmissionReasons.
const (
	// RunPeakFits: the run's peak fits the queue's room; it starts as a whole.
	RunPeakFits RunAdmissionReason = "PeakFits"
	// RunPeakAboveGuarantee: at creation the run's peak did not fit within the queue's
	// guaranteed quota beside what the queue already asks for; the scheduler decides when it
	// fits, borrowing included.
	RunPeakAboveGuarantee RunAdmissionReason = "PeakAboveGuarantee"
	// RunNeverFits: the run's peak is above the queue's limit, or above what the cluster has (a
	// step larger than any node): holding it would hold it for ever, so it runs pod by pod.
	RunNeverFits RunAdmissionReason = "NeverFits"
	// RunProfileUnknown: the run's peak is not known before it starts (a loop over an upstream
	// output without parallelism, a resource from an output, a WorkflowTemplate's template), so
	// it runs pod by pod; the message says what is unknown.
	RunProfileUnknown RunAdmissionReason = "ProfileUnknown"
	// RunStagesAhead: the run started at once (PipelineAdmissionStages); no GPU stage of it is
	// held now: the steps before the next one are not about to finish, or it has none left.
	RunStagesAhead RunAdmissionReason = "StagesAhead"
	// RunStageHeld: the capacity of the run's next GPU stage is held for it until its pods
	// come (the message names the stage, its nodes and why now).
	RunStageHeld RunAdmissionReason = "StageHeld"
	// RunStageLapsed: the hold of the next GPU stage was given up: the steps before it ran
	// well past their expected end, or the stage's pods did not come in time after them. The
	// stage's pods are scheduled as they come.
	RunStageLapsed RunAdmissionReason = "StageLapsed"
	// RunQueueUnavailable: the queue the run was held or staged for does not exist any more, no
	// longer serves the run's namespace, or no longer admits pipelines in the run's mode (the
	// message says which). Holding the run there would hold it for ever, so the scheduler
	// releases it to run pod by pod; its pods are admitted to the namespace's queue as any other.
	RunQueueUnavailable RunAdmissionReason = "QueueUnavailable"
)

var runAdmissionReasons = []RunAdmissionReason{RunPeakFits, RunPeakAboveGuarantee, RunNeverFits, RunProfileUnknown,
	RunStagesAhead, RunStageHeld, RunStageLapsed, RunQueueUnavailable}

// RunAdmissionReasons returns every RunAdmissionReason.
func RunAdmissionReasons() []RunAdmissionReason { return slices.Clone(runAdmissionReasons) }

// Reasons of the events the scheduler records on a run's Workflow.
const (
	// EventRunHeld: the run waits for its peak to fit (the note says why).
	EventRunHeld = "RunHeld"
	// EventRunStarted: the run's peak fits; the scheduler resumed it.
	EventRunStarted = "RunStarted"
	// EventRunPerPod: the run is resumed to run pod by pod (RunPerPod).
	EventRunPerPod = "RunPerPod"
	// EventRunStageHeld: the capacity of a Staged run's next GPU stage is held for it.
	EventRunStageHeld = "RunStageHeld"
	// EventRunStageLapsed: the hold of a Staged run's GPU stage was given up, or the stage
	// can never fit and its pods run as they come (the note says why).
	EventRunStageLapsed = "RunStageLapsed"
)

// RunPodName is the name of the i-th pod with which the scheduler stands a held run's peak in
// its snapshot: a pod that never exists in the cluster. The dot keeps it apart from the pods
// Argo names <workflow>-<template>-<hash>.
func RunPodName(workflow string, i int) string {
	return workflow + ".peak-" + strconv.Itoa(i)
}

// RunGangName is the gang of a held run's peak pods.
func RunGangName(workflow string) string { return "run." + workflow }

// RunStagePodName is the name of the i-th pod with which the scheduler stands a Staged run's
// hold of GPU stage stage in its snapshot (a pod that never exists).
func RunStagePodName(workflow string, stage, i int) string {
	return workflow + ".stage-" + strconv.Itoa(stage) + "-" + strconv.Itoa(i)
}

// RunStageGangName is the gang of a Staged run's hold of GPU stage stage.
func RunStageGangName(workflow string, stage int) string {
	return "run." + workflow + ".stage-" + strconv.Itoa(stage)
}
