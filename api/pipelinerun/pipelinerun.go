// Package pipelinerun is what a pipeline run asks of the cluster over its life (Profile): the
// peak of what its pods hold at once, its steps and the stages they run in. The webhook holds a
// run by its profile and the scheduler places stand-ins for it, so the model is a contract
// between components and lives in api/; the Argo adapter (adapters/argo/runprofile) computes it
// from a Workflow's spec, and the scheduler reads it without knowing Argo.
package pipelinerun

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
