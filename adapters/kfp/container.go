package kfp

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ContainerSpec is a component's implementation (PipelineContainerSpec of KFP's pipeline spec)
// as the compiler stores it in the workflow's implementations-* parameter, and as the driver
// receives it in --container. Only the driver reads it at run time, which is why a compiled
// workflow's executor template asks for nothing: a component's GPU is in here.
type ContainerSpec struct {
	Image     string           `json:"image"`
	Command   []string         `json:"command"`
	Args      []string         `json:"args"`
	Resources ResourceSpec     `json:"resources"`
	Env       []map[string]any `json:"env,omitempty"`
}

// ResourceSpec holds both the SDK's current fields (resource*) and the older numeric ones.
type ResourceSpec struct {
	CPULimit            float64      `json:"cpuLimit,omitempty"`
	MemoryLimit         float64      `json:"memoryLimit,omitempty"`
	ResourceCPULimit    string       `json:"resourceCpuLimit,omitempty"`
	ResourceMemoryLimit string       `json:"resourceMemoryLimit,omitempty"`
	ResourceCPURequest  string       `json:"resourceCpuRequest,omitempty"`
	ResourceMemoryReq   string       `json:"resourceMemoryRequest,omitempty"`
	Accelerator         *Accelerator `json:"accelerator,omitempty"`
}

// Accelerator is set_accelerator_type/set_accelerator_limit.
type Accelerator struct {
	Type          string `json:"type,omitempty"`
	Count         string `json:"count,omitempty"`
	ResourceType  string `json:"resourceType,omitempty"`
	ResourceCount string `json:"resourceCount,omitempty"`
}

// programPrefix is what the SDK puts before a lightweight component's function source.
const programPrefix = "\nimport kfp\nfrom kfp import dsl\nfrom kfp.dsl import *\nfrom typing import *\n\n"

// FunctionSource returns the Python function a lightweight component runs, as embedded in its
// command, and the function's name from --function_to_execute.
func (c *ContainerSpec) FunctionSource() (name, source string, err error) {
	if i := slices.Index(c.Args, "--function_to_execute"); i >= 0 && i+1 < len(c.Args) {
		name = c.Args[i+1]
	}
	if len(c.Command) == 0 {
		return "", "", errors.New("the component has no command")
	}
	program, ok := strings.CutPrefix(c.Command[len(c.Command)-1], programPrefix)
	if !ok || name == "" {
		return "", "", errors.New("the component is not a lightweight Python component")
	}
	return name, strings.TrimSuffix(program, "\n"), nil
}

// Resources returns what the driver puts into the executor's main container for a component:
// limits (and requests) of CPU and memory, and the accelerator as a limit named by its type
// (backend/src/v2/driver initPodSpecPatch).
func (r ResourceSpec) Resources() (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	set := func(list *corev1.ResourceList, name corev1.ResourceName, v string) error {
		if v == "" {
			return nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("%s %q: %w", name, v, err)
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
		return nil
	}
	cpu, mem := r.ResourceCPULimit, r.ResourceMemoryLimit
	if cpu == "" && r.CPULimit > 0 {
		cpu = strconv.FormatFloat(r.CPULimit, 'f', -1, 64)
	}
	if mem == "" && r.MemoryLimit > 0 {
		mem = strconv.FormatFloat(r.MemoryLimit, 'f', -1, 64) + "G"
	}
	errs := []error{
		set(&out.Limits, corev1.ResourceCPU, cpu),
		set(&out.Limits, corev1.ResourceMemory, mem),
		set(&out.Requests, corev1.ResourceCPU, r.ResourceCPURequest),
		set(&out.Requests, corev1.ResourceMemory, r.ResourceMemoryReq),
	}
	if a := r.Accelerator; a != nil {
		typ, count := a.ResourceType, a.ResourceCount
		if typ == "" {
			typ = a.Type
		}
		if count == "" {
			count = a.Count
		}
		if typ != "" {
			errs = append(errs, set(&out.Limits, corev1.ResourceName(typ), count))
		}
	}
	return out, errors.Join(errs...)
}

// ExecutorPatch is the pod-spec patch KFP's driver writes for a container task (its
// pod-spec-patch output, which Argo applies to the executor pod): the component's resources on
// main, and the node selector and tolerations of its kfp-kubernetes configuration
// (backend/src/v2/driver initPodSpecPatch and extendPodSpecPatch). container is the driver's
// --container, kubernetesConfig its --kubernetes_config ("" for none). Only the fields that
// decide where and whether the executor fits are filled: image, command and arguments are left
// to the caller.
func ExecutorPatch(container, kubernetesConfig string) (corev1.PodSpec, ContainerSpec, error) {
	var spec ContainerSpec
	if err := json.Unmarshal([]byte(container), &spec); err != nil {
		return corev1.PodSpec{}, spec, fmt.Errorf("--container: %w", err)
	}
	res, err := spec.Resources.Resources()
	if err != nil {
		return corev1.PodSpec{}, spec, fmt.Errorf("--container: resources: %w", err)
	}
	patch := corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: res}}}
	if kubernetesConfig != "" {
		var k8s struct {
			NodeSelector *struct {
				Labels map[string]string `json:"labels"`
			} `json:"nodeSelector"`
			Tolerations []corev1.Toleration `json:"tolerations"`
		}
		if err := json.Unmarshal([]byte(kubernetesConfig), &k8s); err != nil {
			return corev1.PodSpec{}, spec, fmt.Errorf("--kubernetes_config: %w", err)
		}
		if k8s.NodeSelector != nil {
			patch.NodeSelector = k8s.NodeSelector.Labels
		}
		patch.Tolerations = k8s.Tolerations
	}
	return patch, spec, nil
}
