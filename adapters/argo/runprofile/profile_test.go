package runprofile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func load(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(b))
}

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("parsing the workflow: %v", err)
	}
	return u
}

// withGPUPerExecutor gives every KFP component of a compiled workflow one GPU, as
// set_accelerator_type("nvidia.com/gpu").set_accelerator_limit("1") would.
func withGPUPerExecutor(t *testing.T, wf *unstructured.Unstructured) {
	t.Helper()
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	for _, p := range params {
		m := p.(map[string]any)
		if !strings.HasPrefix(m["name"].(string), "implementations-") {
			continue
		}
		var impl map[string]any
		if err := json.Unmarshal([]byte(m["value"].(string)), &impl); err != nil {
			t.Fatal(err)
		}
		if _, container := impl["image"]; !container || impl["artifactUri"] != nil {
			continue
		}
		impl["resources"] = map[string]any{"accelerator": map[string]any{"resourceType": "nvidia.com/gpu", "resourceCount": "1"}}
		b, _ := json.Marshal(impl)
		m["value"] = string(b)
	}
	if err := unstructured.SetNestedSlice(wf.Object, params, "spec", "arguments", "parameters"); err != nil {
		t.Fatal(err)
	}
}

// TestKFPCompiledWorkflows profiles every golden workflow of the KFP v2 compiler. All compute;
// only nvidia_gpu_scheduling_check asks for a GPU (one). Then every component is given one GPU:
// the GPU peak is then the number of executors that may run at once, which each hold the
// launcher's 100m of CPU, so it must match the CPU peak; and for the workflows below it was
// counted by hand from their component JSON (see the comments).
func TestKFPCompiledWorkflows(t *testing.T) {
	files, err := filepath.Glob("testdata/kfp/*.yaml")
	if err != nil || len(files) != 96 {
		t.Fatalf("want the 96 golden workflows in testdata/kfp, got %d (%v)", len(files), err)
	}
	byHand := map[string]int64{
		"nvidia_gpu_scheduling_check.yaml": 1,
		"add_numbers.yaml":                 1,
		// ParallelFor over 3 items with parallelism 1.
		"parallel_for_secret.yaml": 1,
		// createpvc is the driver's work; one item.
		"parallel_for_mount_pvc.yaml": 1,
		// 3 items, each a ParallelFor of 3 items running double and double-2 side by side.
		"nested_with_parameters.yaml": 18,
		// 3 x 3 double-pipeline; then add beside 4 echo-and-return; then join.
		"pipeline_producer_consumer.yaml": 9,
		// 3 items, each running double beside a ParallelFor of 3 (condition-5 / double-2).
		"artifacts_complex.yaml": 12,
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			p, err := Compute(load(t, f), Options{})
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			wantGPU := int64(0)
			if name == "nvidia_gpu_scheduling_check.yaml" {
				wantGPU = 1000
			}
			if p.Peak.GPUMilli != wantGPU {
				t.Errorf("peak %s, want %d milli-GPU", p.Peak, wantGPU)
			}
			if p.Peak.CPUMilli == 0 || len(p.Stages) == 0 {
				t.Errorf("peak %s with %d stages: every run has an executor", p.Peak, len(p.Stages))
			}

			wf := load(t, f)
			withGPUPerExecutor(t, wf)
			g, err := Compute(wf, Options{})
			if err != nil {
				t.Fatalf("Compute with a GPU per executor: %v", err)
			}
			if g.Peak.GPUMilli/1000*100 != g.Peak.CPUMilli {
				t.Errorf("with a GPU per executor: peak %s: the GPUs do not match the executors' 100m each", g.Peak)
			}
			if want, ok := byHand[name]; ok && g.Peak.GPUMilli != want*1000 {
				t.Errorf("with a GPU per executor: peak %s, want %d GPUs (counted by hand)", g.Peak, want)
			}
			var witnessed int64
			for _, pc := range g.PeakGPUPods {
				witnessed += g.Steps[pc.Step].Demand.GPUMilli * pc.Count
			}
			if witnessed != g.Peak.GPUMilli {
				t.Errorf("the peak's pods hold %d milli-GPU, the peak is %d", witnessed, g.Peak.GPUMilli)
			}
		})
	}
}

// TestKFPGPUExecutor: the driver's patch reaches the executor: its GPU, its toleration, and
// the drivers are system pods.
func TestKFPGPUExecutor(t *testing.T) {
	p, err := Compute(load(t, "testdata/kfp/nvidia_gpu_scheduling_check.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PeakGPUPods) != 1 {
		t.Fatalf("peak pods %v, want the executor", p.PeakGPUPods)
	}
	s := p.Steps[p.PeakGPUPods[0].Step]
	if s.System || s.Path != "entrypoint/root/verify-gpu-scheduled/executor" {
		t.Errorf("peak pod %+v, want the executor of verify-gpu-scheduled", s)
	}
	if tol := s.Pod.Spec.Tolerations; len(tol) != 1 || tol[0].Key != "nvidia.com/gpu" {
		t.Errorf("executor tolerations %v, want the kfp-kubernetes one", tol)
	}
	system := 0
	for _, st := range p.Steps {
		if st.System {
			system++
		}
	}
	if system != 2 {
		t.Errorf("%d system pods, want the root DAG driver and the container driver", system)
	}
}

// TestExampleKubeflowPipelines profiles examples/kubeflow-pipelines/workflow.yaml: preprocess
// (4 CPU, 16G), train (1 GPU, 8 CPU, 32G), evaluate (half a GPU, 4 CPU, 16G) run one after the
// other.
func TestExampleKubeflowPipelines(t *testing.T) {
	p, err := Compute(load(t, "../../../examples/kubeflow-pipelines/workflow.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Demand{GPUMilli: 1000, CPUMilli: 8000, MemoryBytes: 32e9}
	if p.Peak != want {
		t.Errorf("peak %s, want %s", p.Peak, want)
	}
	var gpu []string
	for _, s := range p.GPUStages() {
		gpu = append(gpu, s.Demand.String())
	}
	if strings.Join(gpu, " then ") != "gpu=1,cpu=8,memory=32G then gpu=0.5,cpu=4,memory=16G" {
		t.Errorf("GPU stages %v, want train then evaluate", gpu)
	}
}

// TestArgoShapes checks the peak of hand-written workflows whose answer is plain.
func TestArgoShapes(t *testing.T) {
	const head = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: shapes-}
spec:
  entrypoint: main
`
	// gpu(n) is a container template asking for n GPUs.
	gpuTemplates := `
  - name: gpu1
    container: {image: x, resources: {limits: {nvidia.com/gpu: "1"}}}
  - name: gpu2
    container: {image: x, resources: {limits: {nvidia.com/gpu: "2"}}}
  - name: gpu4
    container: {image: x, resources: {limits: {nvidia.com/gpu: "4"}}}
  - name: half
    metadata: {annotations: {fairway.dev/gpu-fraction: "0.5"}}
    container: {image: x, resources: {requests: {cpu: "1"}}}
  - name: gpun
    inputs: {parameters: [{name: count}]}
    container: {image: x, resources: {limits: {nvidia.com/gpu: "{{inputs.parameters.count}}"}}}
  - name: emit
    container: {image: x}
    outputs: {parameters: [{name: list, valueFrom: {path: /tmp/list}}]}
`
	cases := []struct {
		name      string
		body      string
		wantGPU   int64 // milli
		unbounded bool
		stages    string
	}{{
		name: "diamond",
		body: `
  arguments: {}
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: gpu1}
      - {name: b, template: gpu4, depends: a}
      - {name: c, template: gpu2, dependencies: [a]}
      - {name: d, template: gpu1, depends: "b.Succeeded && (c.Succeeded || c.Failed)"}
`, wantGPU: 6000, stages: "gpu=1 | gpu=6 | gpu=1",
	}, {
		name: "a task beside a chain overlaps its heaviest link",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: gpu1}
      - {name: b, template: gpu4, depends: a}
      - {name: c, template: gpu2}
`, wantGPU: 6000, stages: "gpu=3 | gpu=4",
	}, {
		name: "items under parallelism",
		body: `
  templates:
  - name: main
    parallelism: 2
    dag:
      tasks:
      - {name: t, template: gpu2, withItems: [a, b, c]}
`, wantGPU: 4000, stages: "gpu=6",
	}, {
		name: "steps groups",
		body: `
  templates:
  - name: main
    steps:
    - - {name: a, template: gpu1}
      - {name: b, template: gpu1}
    - - {name: c, template: gpu4}
`, wantGPU: 4000, stages: "gpu=2 | gpu=4",
	}, {
		name: "withParam from a workflow parameter",
		body: `
  arguments: {parameters: [{name: shards, value: '["a","b","c","d"]'}]}
  templates:
  - name: main
    dag:
      tasks:
      - {name: t, template: gpu1, withParam: "{{workflow.parameters.shards}}"}
`, wantGPU: 4000, stages: "gpu=4",
	}, {
		name: "withParam from an upstream output is not known",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - {name: e, template: emit}
      - {name: t, template: gpu1, depends: e, withParam: "{{tasks.e.outputs.parameters.list}}"}
`, wantGPU: 1000, unbounded: true, stages: "nothing | gpu=1",
	}, {
		name: "workflow parallelism",
		body: `
  parallelism: 1
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: gpu4}
      - {name: b, template: gpu4}
`, wantGPU: 4000, stages: "gpu=8",
	}, {
		name: "both branches of a condition count",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - {name: heads, template: gpu4, when: "{{workflow.parameters.coin}} == heads"}
      - {name: tails, template: gpu4, when: "{{workflow.parameters.coin}} == tails"}
`, wantGPU: 8000, stages: "gpu=8",
	}, {
		name: "a share and a whole GPU",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: gpu1}
      - {name: b, template: half}
`, wantGPU: 1500, stages: "gpu=1.5,cpu=1",
	}, {
		name: "resources from items",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - name: t
        template: gpun
        arguments: {parameters: [{name: count, value: "{{item.gpus}}"}]}
        withItems: [{gpus: 1}, {gpus: 2}]
`, wantGPU: 3000, stages: "gpu=3",
	}, {
		name: "resources from an unknown parameter",
		body: `
  templates:
  - name: main
    dag:
      tasks:
      - {name: e, template: emit}
      - name: t
        template: gpun
        depends: e
        arguments: {parameters: [{name: count, value: "{{tasks.e.outputs.parameters.list}}"}]}
`, wantGPU: 0, unbounded: true,
	}, {
		name: "a pod-spec patch from a parameter, and an exit handler",
		body: `
  onExit: gpu2
  arguments: {parameters: [{name: patch, value: '{"containers":[{"name":"main","resources":{"limits":{"nvidia.com/gpu":"4"}}}]}'}]}
  templates:
  - name: main
    podSpecPatch: "{{workflow.parameters.patch}}"
    container: {image: x}
`, wantGPU: 4000, stages: "gpu=4 | gpu=2",
	}, {
		name: "sequential withSequence",
		body: `
  templates:
  - name: main
    steps:
    - - {name: t, template: gpu1, withSequence: {count: "3"}}
`, wantGPU: 3000, stages: "gpu=3",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compute(parse(t, head+c.body+gpuTemplates), Options{})
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if p.Peak.GPUMilli != c.wantGPU || p.Unbounded != c.unbounded {
				t.Errorf("peak %s unbounded %v (%v), want %d milli-GPU, unbounded %v", p.Peak, p.Unbounded, p.Bounds, c.wantGPU, c.unbounded)
			}
			var stages []string
			for _, s := range p.Stages {
				stages = append(stages, s.Demand.String())
			}
			if c.stages != "" && strings.Join(stages, " | ") != c.stages {
				t.Errorf("stages %q, want %q", strings.Join(stages, " | "), c.stages)
			}
		})
	}
}

func TestComputeRefuses(t *testing.T) {
	cases := map[string]string{
		"not a workflow": `{apiVersion: v1, kind: Pod, metadata: {name: x}}`,
		"no template":    `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: x}, spec: {entrypoint: main, templates: []}}`,
		"cycle": `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: x}, spec: {entrypoint: main, templates: [
			{name: main, dag: {tasks: [{name: a, template: c, depends: b}, {name: b, template: c, depends: a}]}}, {name: c, container: {image: x}}]}}`,
		"workflowTemplateRef": `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: x}, spec: {workflowTemplateRef: {name: t}}}`,
	}
	for name, doc := range cases {
		if _, err := Compute(parse(t, doc), Options{}); err == nil {
			t.Errorf("%s: Compute succeeded", name)
		}
	}
}
