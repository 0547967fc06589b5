package examples_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/nodepool"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/sim"
	"github.com/fairway-sched/fairway/test/examples"
)

// TestExampleFilesDecode: every file under examples/ is one the tests know how to read, and
// reads cleanly, so that a broken example fails `go test ./...` in a second rather than an e2e
// test later. Kubernetes and fairway objects are decoded strictly into their types (an unknown or
// misspelt field is an error); Argo and KubeRay objects, whose Go types are not dependencies of
// fairway, are checked by hand where it matters, and the pod templates and containers inside them
// are decoded strictly into Kubernetes types.
func TestExampleFilesDecode(t *testing.T) {
	dir, err := examples.Dir()
	if err != nil {
		t.Fatal(err)
	}
	scheme := strictScheme(t)
	seen := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		seen++
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			switch ext := filepath.Ext(path); {
			case ext == ".md" || ext == ".py": // README files; pipeline.py is read by TestKFPPipelineMatchesWorkflow
			case d.Name() == "nodes.yaml":
				pools, err := nodepool.Parse(data)
				if err != nil || len(pools) == 0 {
					t.Errorf("node pools: %v (%d pools)", err, len(pools))
				}
			case d.Name() == "values.yaml":
				if _, err := examples.ParseZ2JHValues(data); err != nil {
					t.Error(err)
				}
			case strings.HasPrefix(filepath.ToSlash(rel), "sim/") && d.Name() == "trace.yaml":
				// The simulator's inputs (docs/simulator.md) are read by the simulator, strictly.
				if pods, err := sim.LoadTrace(path, sim.OpenBTimed{}); err != nil || len(pods) == 0 {
					t.Errorf("simulator trace: %v (%d pods)", err, len(pods))
				}
			case strings.HasPrefix(filepath.ToSlash(rel), "sim/"):
				if _, err := sim.LoadConfigFile(path); err != nil {
					t.Errorf("simulator config: %v", err)
				}
			case ext == ".yaml":
				docs, err := splitYAML(data)
				if err != nil {
					t.Fatal(err)
				}
				if len(docs) == 0 {
					t.Fatal("no objects")
				}
				for i, doc := range docs {
					if err := checkObject(scheme, doc); err != nil {
						t.Errorf("document %d: %v", i+1, err)
					}
				}
			default:
				t.Errorf("no test reads %s files: teach TestExampleFilesDecode", ext)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 14 {
		t.Errorf("only %d files under %s", seen, dir)
	}
}

func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// checkObject decodes one object: strictly into its Go type when the scheme knows it, else by
// the checks of its kind.
func checkObject(scheme *runtime.Scheme, doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if tm.APIVersion == "" || tm.Kind == "" {
		return errors.New("no apiVersion or kind")
	}
	if scheme.Recognizes(gvk) {
		obj, err := scheme.New(gvk)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if q, ok := obj.(*fairwayv1.Queue); ok {
			return checkQueue(q)
		}
		return nil
	}
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return err
	}
	switch gvk {
	case schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}:
		return checkWorkflow(obj)
	case schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Notebook"}:
		tmpl, _, _ := unstructured.NestedMap(obj, "spec", "template")
		var pt corev1.PodTemplateSpec
		if err := strictConvert(tmpl, &pt); err != nil {
			return fmt.Errorf("Notebook spec.template: %w", err)
		}
		if len(pt.Spec.Containers) == 0 {
			return errors.New("Notebook without a container")
		}
		return nil
	case schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}:
		spec, _ := obj["spec"].(map[string]any)
		return checkRayClusterSpec(spec)
	case schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}:
		spec, _ := obj["spec"].(map[string]any)
		if s, _ := spec["entrypoint"].(string); s == "" {
			return errors.New("RayJob without an entrypoint")
		}
		cluster, _ := spec["rayClusterSpec"].(map[string]any)
		return checkRayClusterSpec(cluster)
	}
	if gvk.Group == "kubeflow.org" && gvk.Version == "v1" {
		if types, ok := trainingReplicaTypes[gvk.Kind]; ok {
			return checkTrainingJob(obj, types)
		}
	}
	return fmt.Errorf("no test knows %s: teach checkObject", gvk)
}

// trainingReplicaTypes are the replica types the Training Operator v1 validates, with the
// spec field that holds them (pytorch_validation.go, mpi_validation.go of v1.8.1).
var trainingReplicaTypes = map[string][]string{
	"PyTorchJob": {"pytorchReplicaSpecs", "Master", "Worker"},
	"MPIJob":     {"mpiReplicaSpecs", "Launcher", "Worker"},
}

// checkTrainingJob: known replica types (an MPIJob with exactly one launcher), the operator's
// restart policies, and pod templates that decode strictly and hold the kind's container.
func checkTrainingJob(obj map[string]any, types []string) error {
	spec, _ := obj["spec"].(map[string]any)
	replicas, _ := spec[types[0]].(map[string]any)
	if len(replicas) == 0 {
		return fmt.Errorf("no %s", types[0])
	}
	var errs []error
	for name, r := range replicas {
		rs, _ := r.(map[string]any)
		if !slices.Contains(types[1:], name) {
			errs = append(errs, fmt.Errorf("replica type %q: want one of %v", name, types[1:]))
		}
		switch p := fmt.Sprint(rs["restartPolicy"]); p {
		case "<nil>", "Always", "OnFailure", "Never", "ExitCode":
		default:
			errs = append(errs, fmt.Errorf("%s: restartPolicy %q", name, p))
		}
		if n, ok := rs["replicas"].(float64); name == "Launcher" && ok && n != 1 {
			errs = append(errs, fmt.Errorf("an MPIJob has one launcher, not %v", n))
		}
		var tmpl corev1.PodTemplateSpec
		if err := strictConvert(rs["template"], &tmpl); err != nil {
			errs = append(errs, fmt.Errorf("%s template: %w", name, err))
		} else if len(tmpl.Spec.Containers) == 0 {
			errs = append(errs, fmt.Errorf("%s template without containers", name))
		}
	}
	return errors.Join(errs...)
}

// checkQueue checks what the API server's validation of the Queue CRD would (limit at least
// quota, at most 7 GPU types), so that the example applies.
func checkQueue(q *fairwayv1.Queue) error {
	var errs []error
	for name, rq := range map[string]*fairwayv1.ResourceQuota{"gpu": q.Spec.Resources.GPU, "cpu": q.Spec.Resources.CPU, "memory": q.Spec.Resources.Memory} {
		if rq != nil && rq.Limit != nil && rq.Quota != nil && rq.Limit.Cmp(*rq.Quota) < 0 {
			errs = append(errs, fmt.Errorf("queue %s: %s limit below quota", q.Name, name))
		}
	}
	if len(q.Spec.GPUTypes) > 7 {
		errs = append(errs, fmt.Errorf("queue %s: %d GPU types, at most 7", q.Name, len(q.Spec.GPUTypes)))
	}
	for _, g := range q.Spec.GPUTypes {
		if g.Limit != nil && g.Quota != nil && g.Limit.Cmp(*g.Quota) < 0 {
			errs = append(errs, fmt.Errorf("queue %s: GPU type %s limit below quota", q.Name, g.Name))
		}
	}
	return errors.Join(errs...)
}

// checkWorkflow: the entrypoint and every template a step or task calls exist, every container
// decodes as a Kubernetes container and names its command (Argo looks an image's entrypoint up
// in its registry otherwise), and retry policies are Argo's.
func checkWorkflow(obj map[string]any) error {
	spec, _ := obj["spec"].(map[string]any)
	templates, _ := spec["templates"].([]any)
	names := map[string]bool{}
	for _, t := range templates {
		tm, _ := t.(map[string]any)
		names[fmt.Sprint(tm["name"])] = true
	}
	var errs []error
	if !names[fmt.Sprint(spec["entrypoint"])] {
		errs = append(errs, fmt.Errorf("entrypoint %v is not a template", spec["entrypoint"]))
	}
	for _, t := range templates {
		tm, _ := t.(map[string]any)
		name := fmt.Sprint(tm["name"])
		var calls []any
		if steps, ok := tm["steps"].([]any); ok {
			for _, group := range steps {
				g, _ := group.([]any)
				calls = append(calls, g...)
			}
		}
		if dag, ok := tm["dag"].(map[string]any); ok {
			tasks, _ := dag["tasks"].([]any)
			calls = append(calls, tasks...)
		}
		for _, c := range calls {
			cm, _ := c.(map[string]any)
			if !names[fmt.Sprint(cm["template"])] {
				errs = append(errs, fmt.Errorf("template %s calls unknown template %v", name, cm["template"]))
			}
		}
		if c, ok := tm["container"]; ok {
			var ctr corev1.Container
			if err := strictConvert(c, &ctr); err != nil {
				errs = append(errs, fmt.Errorf("template %s: container: %w", name, err))
			} else if len(ctr.Command) == 0 {
				errs = append(errs, fmt.Errorf("template %s: container without a command", name))
			}
		}
		if rs, ok := tm["retryStrategy"].(map[string]any); ok {
			switch p := fmt.Sprint(rs["retryPolicy"]); p {
			case "Always", "OnFailure", "OnError", "OnTransientError":
			default:
				errs = append(errs, fmt.Errorf("template %s: retryPolicy %q", name, p))
			}
		}
	}
	return errors.Join(errs...)
}

// checkRayClusterSpec: a head, uniquely named worker groups with replicas within
// [minReplicas, maxReplicas], and pod templates that decode strictly.
func checkRayClusterSpec(spec map[string]any) error {
	if spec == nil {
		return errors.New("no cluster spec")
	}
	head, _ := spec["headGroupSpec"].(map[string]any)
	var errs []error
	var tmpl corev1.PodTemplateSpec
	if err := strictConvert(head["template"], &tmpl); err != nil {
		errs = append(errs, fmt.Errorf("head template: %w", err))
	} else if len(tmpl.Spec.Containers) == 0 {
		errs = append(errs, errors.New("head template without containers"))
	}
	groups, _ := spec["workerGroupSpecs"].([]any)
	seen := map[string]bool{}
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		name := fmt.Sprint(gm["groupName"])
		if seen[name] || name == "" {
			errs = append(errs, fmt.Errorf("worker group %q is not uniquely named", name))
		}
		seen[name] = true
		num := func(k string, def float64) float64 {
			if v, ok := gm[k].(float64); ok {
				return v
			}
			return def
		}
		if r, lo, hi := num("replicas", 0), num("minReplicas", 0), num("maxReplicas", 1<<31-1); r < lo || r > hi || lo > hi {
			errs = append(errs, fmt.Errorf("worker group %s: replicas %v outside [%v, %v]", name, r, lo, hi))
		}
		var wt corev1.PodTemplateSpec
		if err := strictConvert(gm["template"], &wt); err != nil {
			errs = append(errs, fmt.Errorf("worker group %s template: %w", name, err))
		} else if len(wt.Spec.Containers) == 0 {
			errs = append(errs, fmt.Errorf("worker group %s template without containers", name))
		}
	}
	return errors.Join(errs...)
}

func strictConvert(in any, out any) error {
	b, err := yaml.Marshal(in)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "null" {
		return errors.New("missing")
	}
	return yaml.UnmarshalStrict(b, out)
}

// strictScheme knows the Kubernetes and fairway types the examples and the guides show.
func strictScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := fairwayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}
