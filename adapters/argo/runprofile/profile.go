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
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Demand is what pods hold: GPUs in thousandths (a whole GPU is 1000, half a GPU by
// fairway.dev/gpu-fraction 500), GPU shares asked by memory in MiB, CPU in millicores and memory
// in bytes.
type Demand struct {
	GPUMilli     int64 `json:"gpuMilli,omitempty"`
	GPUMemoryMiB int64 `json:"gpuMemoryMiB,omitempty"`
	CPUMilli     int64 `json:"cpuMilli,omitempty"`
	MemoryBytes  int64 `json:"memoryBytes,omitempty"`
}

const numDims = 4

func (d Demand) dims() [numDims]int64 {
	return [numDims]int64{d.GPUMilli, d.GPUMemoryMiB, d.CPUMilli, d.MemoryBytes}
}

func demandOf(v [numDims]int64) Demand {
	return Demand{GPUMilli: v[0], GPUMemoryMiB: v[1], CPUMilli: v[2], MemoryBytes: v[3]}
}

// Add returns d plus o.
func (d Demand) Add(o Demand) Demand {
	return Demand{d.GPUMilli + o.GPUMilli, d.GPUMemoryMiB + o.GPUMemoryMiB, d.CPUMilli + o.CPUMilli, d.MemoryBytes + o.MemoryBytes}
}

// Times returns d n times.
func (d Demand) Times(n int64) Demand {
	return Demand{d.GPUMilli * n, d.GPUMemoryMiB * n, d.CPUMilli * n, d.MemoryBytes * n}
}

// HasGPU reports whether d asks for any GPU.
func (d Demand) HasGPU() bool { return d.GPUMilli > 0 || d.GPUMemoryMiB > 0 }

// Step is one step of the run that runs a pod (a container, script, container-set, resource or
// data template), as called from one place.
type Step struct {
	// Path is the names of the tasks and steps that lead to it from the entrypoint, joined by
	// "/" ("root/train/executor" for the executor of KFP task train).
	Path     string `json:"path"`
	Template string `json:"template"`
	// Count is how many pods of it the run may make (loop iterations; 1 outside loops).
	Count int64 `json:"count"`
	// Pod is the pod as Argo would make it, as far as scheduling reads it: labels and
	// annotations, containers' resources (the driver's patch applied for KFP executors), node
	// selector, tolerations, affinity, priority class and scheduler.
	Pod *corev1.Pod `json:"-"`
	// Demand is one pod's requests.
	Demand Demand `json:"demand"`
	// System marks KFP's driver and importer pods, which fairway leaves to kube-scheduler and
	// counts in no queue: they are listed but never counted in Peak or a stage's demand.
	System bool `json:"system,omitempty"`
	// Conditional is true when a when expression decides whether it runs (it is counted).
	Conditional bool `json:"conditional,omitempty"`
	// Stage is the step's place in the run: the longest chain of steps before it.
	Stage int `json:"stage"`
}

// Stage is a set of steps that start after the same number of steps in a chain: what runs
// together when every step takes as long as every other.
type Stage struct {
	Index int `json:"index"`
	// Steps are indexes in Profile.Steps.
	Steps []int `json:"steps"`
	// Demand is the sum of its steps' pods (System ones left out).
	Demand Demand `json:"demand"`
}

// PodCount is one step's pods in a set of pods.
type PodCount struct {
	Step  int   `json:"step"`
	Count int64 `json:"count"`
}

// Profile is what a run asks for over its life.
type Profile struct {
	// Peak is the most the run's pods may hold at once, per resource (System pods left out).
	Peak Demand `json:"peak"`
	// PeakGPUPods are pods that together hold Peak's GPUs at once: what must fit for the run's
	// GPU steps not to wait on each other.
	PeakGPUPods []PodCount `json:"peakGPUPods,omitempty"`
	Steps       []Step     `json:"steps"`
	// Stages with pods fairway schedules, in order.
	Stages []Stage `json:"stages,omitempty"`
	// Bounds lists what the profile assumed: loop counts it did not know, values it could not
	// resolve before the run.
	Bounds []string `json:"bounds,omitempty"`
	// Unbounded is true when an assumption may be below the truth (a loop of unknown count
	// without parallelism, a resource not known before the run, a WorkflowTemplate's template):
	// Peak is then not an upper bound.
	Unbounded bool `json:"unbounded,omitempty"`
}

// GPUStages returns the stages whose pods ask for GPUs.
func (p *Profile) GPUStages() []Stage {
	var out []Stage
	for _, s := range p.Stages {
		if s.Demand.HasGPU() {
			out = append(out, s)
		}
	}
	return out
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
			copies = append(copies, copyOf{weights: s.Demand.dims(), count: s.Count, witness: []PodCount{{Step: i, Count: 1}}})
		}
	}
	peak := p.Peak.dims()
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

// String summarises the profile for people: the peak, then the stages with GPUs.
func (p *Profile) String() string {
	var b strings.Builder
	b.WriteString("peak " + p.Peak.String())
	for _, s := range p.GPUStages() {
		names := make([]string, 0, len(s.Steps))
		for _, i := range s.Steps {
			if p.Steps[i].Demand.HasGPU() {
				names = append(names, p.Steps[i].Path)
			}
		}
		fmt.Fprintf(&b, "; stage %d: %s (%s)", s.Index, s.Demand.String(), strings.Join(names, ", "))
	}
	if p.Unbounded {
		b.WriteString("; not a bound: " + strings.Join(p.Bounds, "; "))
	}
	return b.String()
}

// String writes the demand as "gpu=1.5,cpu=2,memory=4Gi".
func (d Demand) String() string {
	var parts []string
	if d.GPUMilli > 0 {
		parts = append(parts, "gpu="+milli(d.GPUMilli))
	}
	if d.GPUMemoryMiB > 0 {
		parts = append(parts, fmt.Sprintf("gpu-memory=%dMi", d.GPUMemoryMiB))
	}
	if d.CPUMilli > 0 {
		parts = append(parts, "cpu="+milli(d.CPUMilli))
	}
	if d.MemoryBytes > 0 {
		parts = append(parts, "memory="+bytesString(d.MemoryBytes))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ",")
}

func milli(v int64) string {
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%d.%03d", v/1000, v%1000), "0"), ".")
}

func bytesString(v int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"Ki", 1 << 10}, {"k", 1e3}} {
		if v%u.n == 0 {
			return fmt.Sprintf("%d%s", v/u.n, u.s)
		}
	}
	return fmt.Sprint(v)
}
