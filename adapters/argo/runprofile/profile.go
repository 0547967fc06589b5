// Package runprofile computes what an Argo Workflow run asks of the cluster over its life, from
// its spec alone, before any of its pods exists: the peak of what its pods hold at once, per
// resource, and the demand of each stage. Every Kubeflow Pipelines v2 run is an Argo Workflow,
// so KFP runs are profiled too; their steps' resources are in the component JSON that KFP's
// driver turns into the executor's pod-spec patch at run time (kfp.ExecutorPatch), and the
// profile plays the driver to find them.
//
// The peak is an upper bound over every order and timing in which the run's steps may run:
// steps that neither depends on may overlap, whatever their durations, so a DAG's peak is its
// heaviest antichain (maxAntichain), a steps group's is its sum, and sequential parts take the
// larger. It is exact for DAGs and steps without parallelism limits; a template's or the
// workflow's parallelism caps it at the sum of its largest children. Conditional steps (when)
// count as possible, so the two branches of an if/else both count. Loops count their iterations
// when the count is known before the run: withItems, withParam or withSequence whose value
// resolves from the workflow's parameters, and KFP's ParallelFor over a literal list or a
// pipeline parameter (the run's value, else the pipeline's default). A loop over an upstream
// step's output has no known count: the template's parallelism bounds it when set, otherwise
// Options.UnknownLoopCount iterations are counted and the profile is marked Unbounded, so that
// pipeline admission does not hold a run against a number it made up.
//
// What the profile cannot see is not counted: Argo's own init and wait containers (their
// resources are the workflow-controller's executor settings), templates in WorkflowTemplates
// (templateRef; marked Unbounded), and templateDefaults.
package runprofile

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/api/pipelinerun"
)

// The model of a profile lives in api/pipelinerun, which the webhook and the scheduler share;
// this package computes it from an Argo Workflow. The names below keep its callers' spelling.
type (
	Demand   = pipelinerun.Demand
	Step     = pipelinerun.Step
	Stage    = pipelinerun.Stage
	PodCount = pipelinerun.PodCount
	Profile  = pipelinerun.Profile
)

// numDims are the resources of a Demand, as an array the peak computation folds over.
const numDims = 4

func dims(d Demand) [numDims]int64 {
	return [numDims]int64{d.GPUMilli, d.GPUMemoryMiB, d.CPUMilli, d.MemoryBytes}
}

func demandOf(v [numDims]int64) Demand {
	return Demand{GPUMilli: v[0], GPUMemoryMiB: v[1], CPUMilli: v[2], MemoryBytes: v[3]}
}

// Options tune Compute.
type Options struct {
	// UnknownLoopCount is the number of iterations counted for a loop whose count is not known
	// before the run and that no parallelism bounds. 1 when 0.
	UnknownLoopCount int64
	// MaxExpandedItems is the most loop items evaluated one by one (their values may change
	// what a step asks for); longer loops are evaluated once and multiplied. 32 when 0.
	MaxExpandedItems int
}

// maxDepth bounds template nesting; deeper calls are recursion, which Argo allows under a when.
const maxDepth = 32

// ErrNotWorkflow is returned for an object that is not an Argo Workflow.
var ErrNotWorkflow = errors.New("not an Argo Workflow (argoproj.io/v1alpha1, kind Workflow)")

// Compute profiles a Workflow. It fails only on a spec Argo itself would refuse (no entrypoint,
// a missing template, a DAG cycle) or one whose templates live elsewhere (workflowTemplateRef);
// what it cannot know before the run it assumes, and says so in Bounds.
func Compute(wf *unstructured.Unstructured, opts Options) (*Profile, error) {
	if wf.GetAPIVersion() != "argoproj.io/v1alpha1" || wf.GetKind() != "Workflow" {
		return nil, fmt.Errorf("%w: %s %s", ErrNotWorkflow, wf.GetAPIVersion(), wf.GetKind())
	}
	rawSpec, ok := wf.Object["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec: missing")
	}
	if opts.UnknownLoopCount <= 0 {
		opts.UnknownLoopCount = 1
	}
	if opts.MaxExpandedItems <= 0 {
		opts.MaxExpandedItems = 32
	}
	e := &evaluator{opts: opts, prof: &Profile{}, templates: map[string]map[string]any{}, wfParams: map[string]string{}, workflow: wf.GetName()}
	if e.workflow == "" {
		e.workflow = wf.GetGenerateName()
	}
	if err := decode(rawSpec, &e.spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if e.spec.WorkflowTemplateRef != nil {
		return nil, fmt.Errorf("spec.workflowTemplateRef: the run's templates are in WorkflowTemplate %q, which the profile does not read", e.spec.WorkflowTemplateRef.Name)
	}
	if e.spec.Entrypoint == "" {
		return nil, errors.New("spec.entrypoint: missing")
	}
	list, _ := rawSpec["templates"].([]any)
	for i, raw := range list {
		m, ok := raw.(map[string]any)
		name, _ := m["name"].(string)
		if !ok || name == "" {
			return nil, fmt.Errorf("spec.templates[%d]: a template needs a name", i)
		}
		e.templates[name] = m
	}
	for _, p := range e.spec.Arguments.Parameters {
		if p.Value != nil {
			e.wfParams[p.Name] = string(*p.Value)
		}
	}
	e.kfpParams = e.kfpRunParameters()

	res := e.invoke(e.spec.Entrypoint, e.spec.Entrypoint, nil, 0)
	if e.err != nil {
		return nil, e.err
	}
	if e.spec.OnExit != "" {
		exit := e.invoke(e.spec.OnExit, e.spec.OnExit, nil, 0)
		if e.err != nil {
			return nil, e.err
		}
		res = e.sequence(res, exit)
	}
	p := e.prof
	p.Peak = demandOf(res.peak)
	p.PeakGPUPods = res.witness
	if n := e.spec.Parallelism; n != nil && *n > 0 {
		e.capByWorkflowParallelism(*n)
	}
	e.stages()
	slices.Sort(p.Bounds)
	p.Bounds = slices.Compact(p.Bounds)
	return p, nil
}

// capByWorkflowParallelism caps the peak at the n largest pods of the run: spec.parallelism
// limits the pods of the whole workflow running at once.
func (e *evaluator) capByWorkflowParallelism(n int64) {
	p := e.prof
	var copies []copyOf
	for i, s := range p.Steps {
		if !s.System {
			copies = append(copies, copyOf{weights: dims(s.Demand), count: s.Count, witness: []PodCount{{Step: i, Count: 1}}})
		}
	}
	peak := dims(p.Peak)
	for d := range numDims {
		top, wit := topN(copies, n, d)
		if top < peak[d] {
			peak[d] = top
			if d == 0 {
				p.PeakGPUPods = wit
			}
		}
	}
	p.Peak = demandOf(peak)
}

// stages groups the steps fairway schedules by Step.Stage.
func (e *evaluator) stages() {
	p := e.prof
	byStage := map[int]*Stage{}
	for i, s := range p.Steps {
		if s.System {
			continue
		}
		st := byStage[s.Stage]
		if st == nil {
			st = &Stage{Index: s.Stage}
			byStage[s.Stage] = st
		}
		st.Steps = append(st.Steps, i)
		st.Demand = st.Demand.Add(s.Demand.Times(s.Count))
	}
	for _, st := range byStage {
		p.Stages = append(p.Stages, *st)
	}
	sort.Slice(p.Stages, func(i, j int) bool { return p.Stages[i].Index < p.Stages[j].Index })
}
