package examples

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters/kfp"
)

// The Kubeflow Pipelines example is a pipeline in Python (pipeline.py) and the Argo Workflow
// KFP's API server submits for a run of it (workflow.yaml). Python and the kfp SDK are not part
// of fairway's toolchain, so the workflow is committed, and this file reads both sides lightly to
// check that they say the same thing. It also plays KFP's driver, which needs KFP's API server
// and ML Metadata and so cannot run on a local cluster.

// KFPPipeline is what pipeline.py says: its components, and the tasks its pipeline function makes
// of them, in call order.
type KFPPipeline struct {
	Name string
	// Defaults are the pipeline function's parameter defaults, as Python literals.
	Defaults   map[string]string
	Components map[string]KFPComponent
	Tasks      []KFPTask
}

// KFPComponent is one @dsl.component function.
type KFPComponent struct {
	Name      string
	BaseImage string
	// Source is the function's text without its decorator, as the SDK embeds it in the
	// component's command (inspect.getsource, decorators removed).
	Source string
}

// KFPTask is one call of a component in the pipeline function.
type KFPTask struct {
	// Var is the Python variable that holds the task.
	Var       string
	Component string
	// Inputs maps each argument to its expression ("source", "prep.output").
	Inputs map[string]string
	// After lists the components whose outputs the task consumes.
	After []string
	// Calls holds the PipelineTask setters called on it, by method name (set_accelerator_limit,
	// set_cpu_limit, ...), with their argument.
	Calls map[string]string
	// PodAnnotations come from kfp.kubernetes.add_pod_annotation.
	PodAnnotations map[string]string
}

// Task returns the pipeline's task of a component.
func (p *KFPPipeline) Task(component string) (KFPTask, bool) {
	for _, t := range p.Tasks {
		if t.Component == component {
			return t, true
		}
	}
	return KFPTask{}, false
}

var (
	pyComponent = regexp.MustCompile(`(?m)^@dsl\.component\(([^)]*)\)\ndef (\w+)\(`)
	pyPipeline  = regexp.MustCompile(`(?m)^@dsl\.pipeline\(([^)]*)\)\ndef (\w+)\(([^)]*)\):\n`)
	pyKwarg     = regexp.MustCompile(`(\w+)\s*=\s*("[^"]*"|'[^']*'|[^,]+)`)
	pyAssign    = regexp.MustCompile(`^(\w+)\s*=\s*(\w+)\((.*)\)$`)
	pySetter    = regexp.MustCompile(`\.(set_\w+)\(\s*("[^"]*"|'[^']*'|[^)]*)\s*\)`)
	pyAnnotate  = regexp.MustCompile(`^kubernetes\.add_pod_annotation\(\s*(\w+)\s*,\s*(?:annotation_key\s*=\s*)?("[^"]*"|'[^']*')\s*,\s*(?:annotation_value\s*=\s*)?("[^"]*"|'[^']*')\s*\)$`)
	pySignature = regexp.MustCompile(`(\w+)\s*:\s*\w+\s*=\s*("[^"]*"|'[^']*'|[^,]+)`)
)

// ParseKFPPipeline reads pipeline.py. It understands the forms the example uses (one
// statement per line, keyword arguments, setters chained on a task variable), not Python at
// large, and reports what it does not understand in the pipeline function.
func ParseKFPPipeline(src string) (*KFPPipeline, error) {
	p := &KFPPipeline{Defaults: map[string]string{}, Components: map[string]KFPComponent{}}
	lines := strings.Split(src, "\n")
	for _, m := range pyComponent.FindAllStringSubmatch(src, -1) {
		c := KFPComponent{Name: m[2], BaseImage: unquote(kwargs(m[1])["base_image"])}
		var err error
		if c.Source, err = topLevelBlock(lines, "def "+c.Name+"("); err != nil {
			return nil, err
		}
		p.Components[c.Name] = c
	}
	if len(p.Components) == 0 {
		return nil, errors.New("pipeline.py: no @dsl.component functions")
	}
	m := pyPipeline.FindStringSubmatch(src)
	if m == nil {
		return nil, errors.New("pipeline.py: no @dsl.pipeline function")
	}
	p.Name = unquote(kwargs(m[1])["name"])
	for _, s := range pySignature.FindAllStringSubmatch(m[3], -1) {
		p.Defaults[s[1]] = strings.TrimSpace(s[2])
	}
	body, err := topLevelBlock(lines, "def "+m[2]+"(")
	if err != nil {
		return nil, err
	}
	vars := map[string]int{} // task variable -> index in p.Tasks
	for _, line := range strings.Split(body, "\n")[1:] {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if a := pyAssign.FindStringSubmatch(line); a != nil {
			if _, ok := p.Components[a[2]]; ok {
				t := KFPTask{Var: a[1], Component: a[2], Inputs: map[string]string{}, Calls: map[string]string{}, PodAnnotations: map[string]string{}}
				for k, v := range kwargs(a[3]) {
					t.Inputs[k] = v
					if producer, ok := strings.CutSuffix(v, ".output"); ok {
						i, known := vars[producer]
						if !known {
							return nil, fmt.Errorf("pipeline.py: %q uses the output of %s before it is defined", line, producer)
						}
						t.After = append(t.After, p.Tasks[i].Component)
					}
				}
				slices.Sort(t.After)
				vars[t.Var] = len(p.Tasks)
				p.Tasks = append(p.Tasks, t)
				continue
			}
		}
		if a := pyAnnotate.FindStringSubmatch(line); a != nil {
			i, ok := vars[a[1]]
			if !ok {
				return nil, fmt.Errorf("pipeline.py: %q annotates an unknown task", line)
			}
			p.Tasks[i].PodAnnotations[unquote(a[2])] = unquote(a[3])
			continue
		}
		if v, rest, ok := strings.Cut(line, "."); ok {
			if i, known := vars[v]; known {
				setters := pySetter.FindAllStringSubmatch("."+rest, -1)
				if len(setters) == 0 {
					return nil, fmt.Errorf("pipeline.py: cannot read %q", line)
				}
				for _, s := range setters {
					p.Tasks[i].Calls[s[1]] = unquote(strings.TrimSpace(s[2]))
				}
				continue
			}
		}
		return nil, fmt.Errorf("pipeline.py: cannot read %q in the pipeline function", line)
	}
	return p, nil
}

// topLevelBlock returns the top-level block that starts with the line beginning with start, up
// to the next top-level line, without trailing blank lines, ending in a newline.
func topLevelBlock(lines []string, start string) (string, error) {
	for i, l := range lines {
		if !strings.HasPrefix(l, start) {
			continue
		}
		end := i + 1
		for end < len(lines) && (lines[end] == "" || lines[end][0] == ' ' || lines[end][0] == '\t') {
			end++
		}
		for end > i+1 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
		return strings.Join(lines[i:end], "\n") + "\n", nil
	}
	return "", fmt.Errorf("no line starts with %q", start)
}

func kwargs(s string) map[string]string {
	out := map[string]string{}
	for _, m := range pyKwarg.FindAllStringSubmatch(s, -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// KFPContainerSpec is a component's implementation as the compiler stores it in the workflow
// (kfp.ContainerSpec, which the pipeline-admission profile reads too).
type KFPContainerSpec = kfp.ContainerSpec

// KFPResourceSpec holds both the SDK's current resource fields and the older numeric ones.
type KFPResourceSpec = kfp.ResourceSpec

// KFPAccelerator is set_accelerator_type/set_accelerator_limit.
type KFPAccelerator = kfp.Accelerator

// KFPRun is what workflow.yaml says: one run's tasks as the compiler laid them out.
type KFPRun struct {
	PipelineName string
	RunID        string
	// RuntimeConfig is the root DAG driver's runtime-config: the run's parameters.
	RuntimeConfig map[string]any
	// Tasks by KFP task name, and their names in DAG order.
	Tasks map[string]*KFPRunTask
	Order []string
}

// KFPRunTask is one KFP task of the run: a driver DAG task and an executor DAG task.
type KFPRunTask struct {
	Name string
	// DriverDepends is the driver's Argo depends expression ("preprocess.Succeeded").
	DriverDepends string
	// ExecutorTemplate is the executor's template (system-container-executor, or
	// metadata-<annotations>-<labels>-system-container-executor).
	ExecutorTemplate string
	Container        KFPContainerSpec
	// Task is the task spec the driver receives.
	Task map[string]any
	// KubernetesConfig is the kfp-kubernetes configuration the driver receives, if any.
	KubernetesConfig map[string]any
	// PodAnnotations are the annotations the executor template puts on the executor pod.
	PodAnnotations map[string]string
}

// argoSpec is the part of an Argo Workflow spec the readers here need.
type argoSpec struct {
	Arguments struct {
		Parameters []argoParam `json:"parameters"`
	} `json:"arguments"`
	Templates []argoTemplate `json:"templates"`
}

type argoParam struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

type argoTemplate struct {
	Name     string `json:"name"`
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
		Labels      map[string]string `json:"labels"`
	} `json:"metadata"`
	DAG *struct {
		Tasks []argoTask `json:"tasks"`
	} `json:"dag"`
	Inputs struct {
		Parameters []argoParam `json:"parameters"`
	} `json:"inputs"`
	Container *corev1.Container `json:"container"`
}

type argoTask struct {
	Name      string `json:"name"`
	Template  string `json:"template"`
	Depends   string `json:"depends"`
	Arguments struct {
		Parameters []argoParam `json:"parameters"`
	} `json:"arguments"`
}

func (t argoTask) arg(name string) string {
	for _, p := range t.Arguments.Parameters {
		if p.Name == name && p.Value != nil {
			return *p.Value
		}
	}
	return ""
}

var workflowParam = regexp.MustCompile(`^\{\{workflow\.parameters\.([\w.-]+)\}\}$`)

// ParseKFPRun reads the workflow KFP submits for a run.
func ParseKFPRun(wf *unstructured.Unstructured) (*KFPRun, error) {
	if wf.GetAPIVersion() != "argoproj.io/v1alpha1" || wf.GetKind() != "Workflow" {
		return nil, fmt.Errorf("not an Argo Workflow: %s %s", wf.GetAPIVersion(), wf.GetKind())
	}
	raw, err := json.Marshal(wf.Object["spec"])
	if err != nil {
		return nil, err
	}
	var spec argoSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("reading the workflow spec: %w", err)
	}
	params := map[string]string{}
	for _, p := range spec.Arguments.Parameters {
		if p.Value != nil {
			params[p.Name] = *p.Value
		}
	}
	resolve := func(v string) (string, error) {
		m := workflowParam.FindStringSubmatch(v)
		if m == nil {
			return v, nil
		}
		if s, ok := params[m[1]]; ok {
			return s, nil
		}
		return "", fmt.Errorf("no workflow parameter %s", m[1])
	}
	templates := map[string]argoTemplate{}
	for _, t := range spec.Templates {
		templates[t.Name] = t
	}
	run := &KFPRun{PipelineName: strings.TrimSuffix(wf.GetGenerateName(), "-"), RunID: wf.GetLabels()["pipeline/runid"], Tasks: map[string]*KFPRunTask{}}

	entry, ok := templates["entrypoint"]
	if !ok || entry.DAG == nil {
		return nil, errors.New("no entrypoint DAG")
	}
	for _, t := range entry.DAG.Tasks {
		if t.Template == "system-dag-driver" && t.arg("driver-type") == "ROOT_DAG" {
			if err := json.Unmarshal([]byte(t.arg("runtime-config")), &run.RuntimeConfig); err != nil {
				return nil, fmt.Errorf("root driver runtime-config: %w", err)
			}
		}
	}
	root, ok := templates["root"]
	if !ok || root.DAG == nil {
		return nil, errors.New("no root DAG")
	}
	executors := map[string]argoTask{}
	for _, t := range root.DAG.Tasks {
		if t.Template != "system-container-driver" {
			executors[t.Name] = t
			continue
		}
		name := strings.TrimSuffix(t.Name, "-driver")
		rt := &KFPRunTask{Name: name, DriverDepends: t.Depends, PodAnnotations: map[string]string{}}
		container, err := resolve(t.arg("container"))
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", name, err)
		}
		if err := json.Unmarshal([]byte(container), &rt.Container); err != nil {
			return nil, fmt.Errorf("task %s: container spec: %w", name, err)
		}
		if err := json.Unmarshal([]byte(t.arg("task")), &rt.Task); err != nil {
			return nil, fmt.Errorf("task %s: task spec: %w", name, err)
		}
		if k := t.arg("kubernetes-config"); k != "" {
			cfg, err := resolve(k)
			if err != nil {
				return nil, fmt.Errorf("task %s: %w", name, err)
			}
			if err := json.Unmarshal([]byte(cfg), &rt.KubernetesConfig); err != nil {
				return nil, fmt.Errorf("task %s: kubernetes config: %w", name, err)
			}
		}
		run.Tasks[name] = rt
		run.Order = append(run.Order, name)
	}
	for _, name := range run.Order {
		rt := run.Tasks[name]
		ex, ok := executors[name]
		if !ok {
			return nil, fmt.Errorf("task %s has a driver but no executor", name)
		}
		if ex.Depends != name+"-driver.Succeeded" {
			return nil, fmt.Errorf("executor %s depends on %q, want its driver", name, ex.Depends)
		}
		rt.ExecutorTemplate = ex.Template
		// The executor DAG passes its inputs on to the implementation template, whose metadata
		// names them: resolve the pod annotations the executor pod gets.
		exec, ok := templates[ex.Template]
		if !ok || exec.DAG == nil || len(exec.DAG.Tasks) != 1 {
			return nil, fmt.Errorf("executor template %s is not a one-task DAG", ex.Template)
		}
		impl, ok := templates[exec.DAG.Tasks[0].Template]
		if !ok {
			return nil, fmt.Errorf("no template %s", exec.DAG.Tasks[0].Template)
		}
		for k, v := range impl.Metadata.Annotations {
			k, v = substituteInputs(k, ex), substituteInputs(v, ex)
			if strings.HasPrefix(k, "pipelines.kubeflow.org/") || strings.HasPrefix(k, "sidecar.istio.io/") {
				continue
			}
			rt.PodAnnotations[k] = v
		}
	}
	return run, nil
}

var inputParam = regexp.MustCompile(`\{\{inputs\.parameters\.([\w-]+)\}\}`)

// substituteInputs replaces {{inputs.parameters.x}} with the argument x of the task that calls
// the template (the executor DAG forwards its inputs unchanged).
func substituteInputs(s string, caller argoTask) string {
	return inputParam.ReplaceAllStringFunc(s, func(m string) string {
		return caller.arg(inputParam.FindStringSubmatch(m)[1])
	})
}

// Argo keys the fake driver reads and writes.
const (
	argoWorkflowLabel         = "workflows.argoproj.io/workflow"
	argoNodeIDAnnotation      = "workflows.argoproj.io/node-id"
	argoOutputsCompletedLabel = "workflows.argoproj.io/report-outputs-completed"
)

// KFPDriverOutputs plays KFP's driver for a driver pod as Argo created it (its arguments
// substituted): it returns the output parameters the real driver writes to /tmp/outputs, which
// Argo's wait container reports in a WorkflowTaskResult. ok is false for pods that are not
// drivers.
//
// The real driver resolves the task's inputs and the cache in ML Metadata and asks the KFP API
// server about the run; here the cache always misses, the DAG execution ID is derived from the
// node, and the pod-spec patch is built from the same inputs the real driver reads: the
// component's container spec and its kfp-kubernetes configuration (driver.go initPodSpecPatch,
// k8s.go extendPodSpecPatch).
func KFPDriverOutputs(pod *corev1.Pod) (outputs map[string]string, ok bool, err error) {
	var main *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "main" {
			main = &pod.Spec.Containers[i]
		}
	}
	if main == nil {
		return nil, false, nil
	}
	// Argo runs the template's command through its executor: argoexec emissary ... -- <command>.
	command := main.Command
	if len(command) > 0 && strings.HasSuffix(command[0], "argoexec") {
		if i := slices.Index(command, "--"); i >= 0 {
			command = command[i+1:]
		}
	}
	if len(command) == 0 || command[0] != "driver" {
		return nil, false, nil
	}
	outputs, err = KFPDriverRun(main.Args, pod.Annotations[argoNodeIDAnnotation])
	if err != nil {
		return nil, true, fmt.Errorf("driver pod %s: %w", pod.Name, err)
	}
	return outputs, true, nil
}

// KFPDriverRun is KFPDriverOutputs for the driver's own arguments (flags and values, as the
// workflow passes them to the driver command) in the Argo node nodeID: the real-node tier's
// stand-in driver image (test/standins/kfp) runs it in the driver's pod.
func KFPDriverRun(args []string, nodeID string) (map[string]string, error) {
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		flags[strings.TrimPrefix(args[i], "--")] = args[i+1]
	}
	h := fnv.New32a()
	h.Write([]byte(nodeID))
	executionID := strconv.FormatUint(uint64(h.Sum32()%100000+1), 10)
	switch flags["type"] {
	case "ROOT_DAG", "DAG":
		return map[string]string{"execution-id": executionID, "iteration-count": "0", "condition": "true"}, nil
	case "CONTAINER":
	default:
		return nil, fmt.Errorf("unknown --type %q", flags["type"])
	}
	patch, spec, err := kfp.ExecutorPatch(flags["container"], flags["kubernetes_config"])
	if err != nil {
		return nil, err
	}
	executorInput := `{"inputs":{},"outputs":{}}`
	var component []string
	for _, a := range append(slices.Clone(spec.Command), spec.Args...) {
		component = append(component, strings.ReplaceAll(a, "{{$}}", executorInput))
	}
	executor := &patch.Containers[0]
	executor.Image = spec.Image
	executor.Command = []string{"/kfp-launcher/launch", "--pipeline_name", flags["pipeline_name"], "--run_id", flags["run_id"],
		"--execution_id", executionID, "--executor_input", executorInput, "--component_spec", flags["component"],
		"--pod_name", "$(KFP_POD_NAME)", "--pod_uid", "$(KFP_POD_UID)", "--"}
	executor.Args = component
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return map[string]string{"pod-spec-patch": string(b), "cached-decision": "false", "condition": "true"}, nil
}

// ArgoTaskResult is the WorkflowTaskResult by which Argo's wait container reports a pod's output
// parameters, complete, for the pod's workflow node.
func ArgoTaskResult(pod *corev1.Pod, outputs map[string]string) *unstructured.Unstructured {
	names := make([]string, 0, len(outputs))
	for k := range outputs {
		names = append(names, k)
	}
	slices.Sort(names)
	params := make([]any, 0, len(names))
	for _, k := range names {
		params = append(params, map[string]any{"name": k, "value": outputs[k]})
	}
	u := &unstructured.Unstructured{Object: map[string]any{"outputs": map[string]any{"parameters": params}}}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("WorkflowTaskResult")
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Annotations[argoNodeIDAnnotation])
	u.SetLabels(map[string]string{argoWorkflowLabel: pod.Labels[argoWorkflowLabel], argoOutputsCompletedLabel: "true"})
	if ref := metav1.GetControllerOf(pod); ref != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}})
	}
	return u
}
