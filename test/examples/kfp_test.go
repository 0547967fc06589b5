package examples_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/examples"
)

// kfpExamples are the examples with a pipeline.py and its workflow.yaml, with the GPUs their
// train step asks for.
var kfpExamples = map[string]string{"kubeflow-pipelines": "1", "pipeline-admission": "4"}

func loadKFP(t *testing.T) (*examples.KFPPipeline, *examples.KFPRun) {
	t.Helper()
	return loadKFPIn(t, "kubeflow-pipelines")
}

func loadKFPIn(t *testing.T, dir string) (*examples.KFPPipeline, *examples.KFPRun) {
	t.Helper()
	src, err := examples.Read(dir, "pipeline.py")
	if err != nil {
		t.Fatal(err)
	}
	p, err := examples.ParseKFPPipeline(string(src))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := examples.Object(dir, "workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run, err := examples.ParseKFPRun(wf)
	if err != nil {
		t.Fatal(err)
	}
	return p, run
}

// TestKFPPipelineMatchesWorkflow: workflow.yaml is the compiled form of pipeline.py, written by
// hand because the kfp SDK is not part of the toolchain. The two must say the same thing: the
// same tasks in the same order with the same dependencies, each component's image and function
// source, the pipeline's defaults as the run's parameters, the GPU on train and the 0.5 share on
// evaluate, and nothing else asking for a GPU.
func TestKFPPipelineMatchesWorkflow(t *testing.T) {
	for dir, trainGPUs := range kfpExamples {
		t.Run(dir, func(t *testing.T) { testKFPPipelineMatchesWorkflow(t, dir, trainGPUs) })
	}
}

func testKFPPipelineMatchesWorkflow(t *testing.T, dir, trainGPUs string) {
	p, run := loadKFPIn(t, dir)
	if p.Name != run.PipelineName {
		t.Errorf("pipeline name %q, workflow generateName %q-", p.Name, run.PipelineName)
	}
	var components []string
	for _, task := range p.Tasks {
		components = append(components, task.Component)
	}
	if diff := cmp.Diff(components, run.Order); diff != "" {
		t.Fatalf("tasks of pipeline.py (-) and of workflow.yaml (+):\n%s", diff)
	}
	// Run parameters: the pipeline function's defaults.
	for name, def := range p.Defaults {
		got, ok := run.RuntimeConfig["parameterValues"].(map[string]any)[name]
		if !ok || fmt.Sprint(got) != strings.Trim(def, `"'`) {
			t.Errorf("run parameter %s = %v, pipeline.py default %s", name, got, def)
		}
	}
	for _, task := range p.Tasks {
		rt := run.Tasks[task.Component]
		comp := p.Components[task.Component]
		t.Run(task.Component, func(t *testing.T) {
			// Dependencies: a task's driver waits for the tasks whose outputs it consumes.
			var want []string
			for _, a := range task.After {
				want = append(want, a+".Succeeded")
			}
			if got := rt.DriverDepends; got != strings.Join(want, " && ") {
				t.Errorf("driver depends on %q, pipeline.py consumes outputs of %v", got, task.After)
			}
			var deps []string
			if d, ok := rt.Task["dependentTasks"].([]any); ok {
				for _, x := range d {
					deps = append(deps, fmt.Sprint(x))
				}
			}
			slices.Sort(deps)
			if !slices.Equal(deps, task.After) {
				t.Errorf("task spec dependentTasks %v, pipeline.py %v", deps, task.After)
			}
			inputs, _ := rt.Task["inputs"].(map[string]any)["parameters"].(map[string]any)
			if len(inputs) != len(task.Inputs) {
				t.Errorf("task spec inputs %v, pipeline.py arguments %v", inputs, task.Inputs)
			}
			for arg := range task.Inputs {
				if _, ok := inputs[arg]; !ok {
					t.Errorf("argument %s of pipeline.py is not an input of the task spec", arg)
				}
			}
			// The component: image and the function's own source, character for character.
			if rt.Container.Image != comp.BaseImage {
				t.Errorf("image %q, pipeline.py base_image %q", rt.Container.Image, comp.BaseImage)
			}
			fn, source, err := rt.Container.FunctionSource()
			if err != nil {
				t.Fatal(err)
			}
			if fn != comp.Name {
				t.Errorf("--function_to_execute %s, want %s", fn, comp.Name)
			}
			if diff := cmp.Diff(comp.Source, source); diff != "" {
				t.Errorf("function source in pipeline.py (-) and in workflow.yaml (+):\n%s", diff)
			}
			// Resources: what the setters ask for is what the driver will put on main.
			res, err := rt.Container.Resources.Resources()
			if err != nil {
				t.Fatal(err)
			}
			wantLimits := map[corev1.ResourceName]string{}
			for call, r := range map[string]corev1.ResourceName{"set_cpu_limit": corev1.ResourceCPU, "set_memory_limit": corev1.ResourceMemory} {
				if v, ok := task.Calls[call]; ok {
					wantLimits[r] = v
				}
			}
			if typ, ok := task.Calls["set_accelerator_type"]; ok {
				wantLimits[corev1.ResourceName(typ)] = task.Calls["set_accelerator_limit"]
			}
			gotLimits := map[corev1.ResourceName]string{}
			for k, v := range res.Limits {
				gotLimits[k] = v.String()
			}
			if diff := cmp.Diff(wantLimits, gotLimits); diff != "" {
				t.Errorf("limits of pipeline.py (-) and of the container spec (+):\n%s", diff)
			}
			// Pod annotations: add_pod_annotation reaches the executor's template metadata, and
			// the kfp-kubernetes config the driver gets says the same.
			if diff := cmp.Diff(task.PodAnnotations, rt.PodAnnotations); diff != "" {
				t.Errorf("executor pod annotations of pipeline.py (-) and workflow.yaml (+):\n%s", diff)
			}
			wantTemplate := "system-container-executor"
			if n := len(task.PodAnnotations); n > 0 {
				wantTemplate = fmt.Sprintf("metadata-%d-0-system-container-executor", n)
				md, _ := rt.KubernetesConfig["podMetadata"].(map[string]any)
				ann, _ := md["annotations"].(map[string]any)
				for k, v := range task.PodAnnotations {
					if ann[k] != v {
						t.Errorf("kubernetes config annotation %s = %v, want %s", k, ann[k], v)
					}
				}
			}
			if rt.ExecutorTemplate != wantTemplate {
				t.Errorf("executor template %s, want %s", rt.ExecutorTemplate, wantTemplate)
			}
		})
	}

	// What the example is about: one whole GPU on train, half a GPU on evaluate, none elsewhere.
	train, _ := p.Task("train")
	if train.Calls["set_accelerator_type"] != fairwayv1.ResourceGPU || train.Calls["set_accelerator_limit"] != trainGPUs {
		t.Errorf("train asks for %q x %q, want %s %s", train.Calls["set_accelerator_limit"], train.Calls["set_accelerator_type"], trainGPUs, fairwayv1.ResourceGPU)
	}
	evaluate, _ := p.Task("evaluate")
	if evaluate.PodAnnotations[fairwayv1.GPUFractionAnnotation] != "0.5" {
		t.Errorf("evaluate annotations %v, want %s 0.5", evaluate.PodAnnotations, fairwayv1.GPUFractionAnnotation)
	}
}

// TestKFPDriverOutputs: the driver the e2e test plays puts train's GPU into the executor's
// pod-spec patch, on container main, and nothing of the kind for the others.
func TestKFPDriverOutputs(t *testing.T) {
	_, run := loadKFP(t)
	for _, name := range run.Order {
		rt := run.Tasks[name]
		container, err := json.Marshal(rt.Container)
		if err != nil {
			t.Fatal(err)
		}
		// A driver pod as Argo makes it: the template's args with the task's inputs substituted.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "vision-training-x-system-container-driver-1", Annotations: map[string]string{
				"workflows.argoproj.io/node-id": "vision-training-x-1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "wait"}, {Name: "main", Command: []string{
				"/var/run/argo/argoexec", "emissary", "--loglevel", "info", "--", "driver"}, Args: []string{
				"--type", "CONTAINER", "--pipeline_name", run.PipelineName, "--run_id", run.RunID, "--container", string(container),
				"--kubernetes_config", "",
			}}}},
		}
		out, ok, err := examples.KFPDriverOutputs(pod)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v err %v", name, ok, err)
		}
		var patch corev1.PodSpec
		if err := json.Unmarshal([]byte(out["pod-spec-patch"]), &patch); err != nil {
			t.Fatalf("%s: pod-spec-patch: %v", name, err)
		}
		if len(patch.Containers) != 1 || patch.Containers[0].Name != "main" || patch.Containers[0].Image != rt.Container.Image {
			t.Fatalf("%s: patch containers %+v", name, patch.Containers)
		}
		gpu := patch.Containers[0].Resources.Limits[fairwayv1.ResourceGPU]
		if want := map[string]int64{"train": 1}[name]; gpu.Value() != want {
			t.Errorf("%s: patch asks for %s GPUs, want %d", name, gpu.String(), want)
		}
		if out["cached-decision"] != "false" || out["condition"] != "true" {
			t.Errorf("%s: outputs %v", name, out)
		}
	}
	dag := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Command: []string{"driver"}, Args: []string{"--type", "ROOT_DAG"}}}}}
	if out, ok, err := examples.KFPDriverOutputs(dag); err != nil || !ok || out["execution-id"] == "" {
		t.Errorf("root DAG driver: %v %v %v", out, ok, err)
	}
	executor := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Command: []string{"/kfp-launcher/launch"}}}}}
	if _, ok, _ := examples.KFPDriverOutputs(executor); ok {
		t.Error("an executor pod was taken for a driver")
	}
}
