package runprofile

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// pod evaluates a template that runs a pod: it builds the pod as Argo would (the workflow's pod
// settings, the template's, then the pod-spec patches) and records it as a step.
func (e *evaluator) pod(t *template, path string) *result {
	pod := &corev1.Pod{}
	pod.Labels = merged(e.spec.PodMetadata.Labels, t.Metadata.Labels)
	pod.Labels[argo.WorkflowLabel] = e.workflow
	pod.Annotations = merged(e.spec.PodMetadata.Annotations, t.Metadata.Annotations)
	spec := &pod.Spec
	spec.NodeSelector = firstMap(t.NodeSelector, e.spec.NodeSelector)
	spec.Tolerations = first(t.Tolerations, e.spec.Tolerations)
	spec.Affinity = e.spec.Affinity
	if t.Affinity != nil {
		spec.Affinity = t.Affinity
	}
	spec.PriorityClassName = firstString(t.Priority, e.spec.PodPriorityClassName)
	spec.SchedulerName = firstString(t.Scheduler, e.spec.SchedulerName)
	spec.InitContainers = slices.Clone(t.InitCtrs)
	switch {
	case t.Container != nil:
		c := *t.Container
		c.Name = argo.MainContainer
		spec.Containers = append(spec.Containers, c)
	case t.Script != nil:
		c := *t.Script
		c.Name = argo.MainContainer
		spec.Containers = append(spec.Containers, c)
	case t.ContainerSet != nil:
		spec.Containers = append(spec.Containers, t.ContainerSet.Containers...)
	default: // resource and data templates run Argo's executor as main
		spec.Containers = append(spec.Containers, corev1.Container{Name: argo.MainContainer})
	}
	spec.Containers = append(spec.Containers, t.Sidecars...)
	for _, patch := range []string{e.spec.PodSpecPatch, t.PodSpecPatch} {
		if patch == "" {
			continue
		}
		if !known(patch) {
			e.assume(true, "%s: the pod-spec patch is not known before the run; the template's own resources are counted", path)
			continue
		}
		if err := applyPatch(spec, patch); err != nil {
			e.assume(true, "%s: the pod-spec patch does not apply (%v); the template's own resources are counted", path, err)
		}
	}
	defaultRequests(spec)

	res := &result{levels: 1}
	step := Step{Path: path, Template: t.Name, Count: 1, Pod: pod}
	step.Demand = e.podDemand(pod, path)
	if kfp.New().Recognize(pod) && kfp.PodRole(pod) != kfp.RoleExecutor {
		step.System = true
	}
	if main := mainOf(spec); main != nil && len(main.Command) > 0 && main.Command[0] == "driver" {
		res.outputs = e.kfpDriverOutputs(main.Args, path)
	}
	res.steps = []int{len(e.prof.Steps)}
	if !step.System {
		res.peak = dims(step.Demand)
		if step.Demand.GPUMilli > 0 {
			res.witness = []PodCount{{Step: len(e.prof.Steps), Count: 1}}
		}
	}
	e.prof.Steps = append(e.prof.Steps, step)
	return res
}

func (e *evaluator) podDemand(pod *corev1.Pod, path string) Demand {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	d := Demand{
		CPUMilli:    req.Cpu().MilliValue(),
		MemoryBytes: req.Memory().Value(),
	}
	if q, ok := req[corev1.ResourceName(v1alpha1.ResourceGPU)]; ok {
		d.GPUMilli = q.Value() * 1000
	}
	share, err := gpurequest.Parse(pod.Annotations)
	if err != nil {
		e.assume(false, "%s: %v; the share is not counted (the webhook refuses the pod)", path, err)
	}
	d.GPUMilli += share.Milli
	d.GPUMemoryMiB = share.MemoryMiB
	return d
}

// applyPatch applies an Argo podSpecPatch (JSON or YAML) as Argo does: a strategic merge patch of
// the pod spec, containers merged by name.
func applyPatch(spec *corev1.PodSpec, patch string) error {
	pj, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		return err
	}
	cur, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	out, err := strategicpatch.StrategicMergePatch(cur, pj, corev1.PodSpec{})
	if err != nil {
		return err
	}
	var patched corev1.PodSpec
	if err := json.Unmarshal(out, &patched); err != nil {
		return err
	}
	*spec = patched
	return nil
}

// defaultRequests does what the API server's defaulting does to a new pod's containers: a
// resource with a limit and no request requests its limit.
func defaultRequests(spec *corev1.PodSpec) {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q
				}
			}
		}
	}
}

func mainOf(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == argo.MainContainer {
			return &spec.Containers[i]
		}
	}
	return nil
}

// sanitizeQuantities replaces the container resource quantities of a template tree that are
// not quantities (expressions not known before the run) with 0, reporting each.
func sanitizeQuantities(v any, report func(field, value string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "resources" {
				if res, ok := x.(map[string]any); ok {
					for _, kind := range []string{"requests", "limits"} {
						list, _ := res[kind].(map[string]any)
						for name, q := range list {
							s, isString := q.(string)
							if !isString {
								continue
							}
							if _, err := resource.ParseQuantity(s); err != nil {
								report("resources."+kind+"["+name+"]", s)
								list[name] = "0"
							}
						}
					}
				}
				continue
			}
			sanitizeQuantities(x, report)
		}
	case []any:
		for _, x := range v {
			sanitizeQuantities(x, report)
		}
	}
}

// ---- Kubeflow Pipelines ------------------------------------------------------------------------

// kfpDriverOutputs returns the output parameters KFP's driver writes, as far as they are known
// before the run: a container driver's pod-spec patch (from the component's container spec and
// kfp-kubernetes configuration, kfp.ExecutorPatch) and cache decision (a miss: the executor
// runs), a DAG driver's iteration count (from the task's parameter iterator). Conditions are
// "true": every branch counts as possible.
func (e *evaluator) kfpDriverOutputs(args []string, path string) map[string]string {
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if name, ok := strings.CutPrefix(args[i], "--"); ok && !strings.Contains(name, "=") {
			flags[name] = args[i+1]
			i++
		}
	}
	out := map[string]string{"condition": "true"}
	switch flags["type"] {
	case "CONTAINER":
		out["cached-decision"] = "false"
		container, config := flags["container"], flags["kubernetes_config"]
		if !known(container) {
			out["pod-spec-patch"] = unknownValue("pod-spec-patch")
			return out
		}
		if !known(config) {
			e.assume(false, "%s: the kfp-kubernetes configuration is not known before the run; the executor's node selector and tolerations are left out", path)
			config = ""
		}
		patch, _, err := kfp.ExecutorPatch(container, config)
		if err != nil {
			e.assume(true, "%s: the component's container spec: %v", path, err)
			out["pod-spec-patch"] = unknownValue("pod-spec-patch")
			return out
		}
		b, _ := json.Marshal(patch)
		out["pod-spec-patch"] = string(b)
	case "DAG", "ROOT_DAG":
		if n, ok := e.kfpIterations(flags["task"]); ok {
			out["iteration-count"] = strconv.Itoa(n)
		} else {
			out["iteration-count"] = unknownValue("iteration-count")
		}
	}
	return out
}

// kfpTask is the part of a KFP task spec (PipelineTaskSpec) that says how it iterates.
type kfpTask struct {
	Inputs struct {
		Parameters map[string]struct {
			ComponentInputParameter string `json:"componentInputParameter"`
			RuntimeValue            *struct {
				Constant any `json:"constant"`
			} `json:"runtimeValue"`
		} `json:"parameters"`
	} `json:"inputs"`
	ParameterIterator *struct {
		Items struct {
			Raw            *string `json:"raw"`
			InputParameter string  `json:"inputParameter"`
		} `json:"items"`
	} `json:"parameterIterator"`
	ArtifactIterator json.RawMessage `json:"artifactIterator"`
}

// kfpIterations is a ParallelFor's count: the length of its literal list, or of the pipeline
// parameter it iterates over (the run's value, else the pipeline's default). false when the
// list comes from an upstream task or an artifact.
func (e *evaluator) kfpIterations(taskJSON string) (int, bool) {
	if !known(taskJSON) {
		return 0, false
	}
	var tk kfpTask
	if err := json.Unmarshal([]byte(taskJSON), &tk); err != nil || tk.ParameterIterator == nil {
		return 0, false
	}
	items := tk.ParameterIterator.Items
	var list []any
	switch {
	case items.Raw != nil:
		if json.Unmarshal([]byte(*items.Raw), &list) != nil {
			return 0, false
		}
		return len(list), true
	case items.InputParameter != "":
		in, ok := tk.Inputs.Parameters[items.InputParameter]
		if !ok {
			return 0, false
		}
		var v any
		switch {
		case in.RuntimeValue != nil:
			v = in.RuntimeValue.Constant
		case in.ComponentInputParameter != "":
			name := in.ComponentInputParameter
			if v, ok = e.kfpParams[name]; !ok {
				v, ok = e.kfpParams[strings.TrimPrefix(name, "pipelinechannel--")]
			}
			if !ok {
				return 0, false
			}
		}
		if s, isString := v.(string); isString {
			if json.Unmarshal([]byte(s), &list) != nil {
				return 0, false
			}
			return len(list), true
		}
		if l, isList := v.([]any); isList {
			return len(l), true
		}
	}
	return 0, false
}

// kfpRunParameters finds a KFP run's pipeline parameters: the root DAG driver's runtime-config
// (parameterValues, or the older parameters of typed values), over the defaults of the root
// component's input definitions.
func (e *evaluator) kfpRunParameters() map[string]any {
	out := map[string]any{}
	for _, raw := range e.templates {
		var t template
		if decode(raw, &t) != nil || t.DAG == nil {
			continue
		}
		for _, tk := range t.DAG.Tasks {
			args := map[string]string{}
			for _, p := range tk.Arguments.Parameters {
				if p.Value != nil {
					args[p.Name] = substitute(string(*p.Value), e.templateScope(nil))
				}
			}
			if args["driver-type"] != "ROOT_DAG" {
				continue
			}
			var root struct {
				InputDefinitions struct {
					Parameters map[string]struct {
						DefaultValue any `json:"defaultValue"`
					} `json:"parameters"`
				} `json:"inputDefinitions"`
			}
			if json.Unmarshal([]byte(args["component"]), &root) == nil {
				for name, p := range root.InputDefinitions.Parameters {
					if p.DefaultValue != nil {
						out[name] = p.DefaultValue
					}
				}
			}
			var cfg struct {
				ParameterValues map[string]any `json:"parameterValues"`
				Parameters      map[string]struct {
					StringValue *string  `json:"stringValue"`
					IntValue    *string  `json:"intValue"`
					DoubleValue *float64 `json:"doubleValue"`
				} `json:"parameters"`
			}
			if json.Unmarshal([]byte(args["runtime-config"]), &cfg) == nil {
				maps.Copy(out, cfg.ParameterValues)
				for name, p := range cfg.Parameters {
					switch {
					case p.StringValue != nil:
						out[name] = *p.StringValue
					case p.IntValue != nil:
						out[name] = *p.IntValue
					case p.DoubleValue != nil:
						out[name] = *p.DoubleValue
					}
				}
			}
		}
	}
	return out
}

// ---- Helpers -----------------------------------------------------------------------------------

func merged(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b)+1)
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

func first[T any](a, b []T) []T {
	if len(a) > 0 {
		return slices.Clone(a)
	}
	return slices.Clone(b)
}

func firstMap(a, b map[string]string) map[string]string {
	if len(a) > 0 {
		return maps.Clone(a)
	}
	return maps.Clone(b)
}

func firstString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
