package sim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Pod is one workload pod of a trace, in the units fairway's requests use.
type Pod struct {
	// Name must be unique within the trace.
	Name string
	// Queue is the leaf queue the pod is accounted to.
	Queue string
	// Kind is the framework that made the pod (fairway.dev/framework), informative.
	Kind string
	// Arrival is when the pod is created, from the start of the replay.
	Arrival time.Duration
	// Duration is how long the pod runs once bound; 0 runs forever.
	Duration time.Duration
	// GPUs is the number of whole GPUs; GPUMilli a share of one GPU (1..999) when GPUs is 0.
	GPUs     int
	GPUMilli int64
	// GPUMemoryMiB asks for GPU memory on one shared GPU instead of a share.
	GPUMemoryMiB int64
	MilliCPU     int64
	MemoryMiB    int64
	// Gang names the pod's gang (pods of one gang share it); GangSize its minimum member count.
	Gang     string
	GangSize int
	Priority int32
	// Preemptibility is "preemptible", "non-preemptible" or empty (derived from the priority).
	Preemptibility string
	// GPUTypes are the GPU types (fairway.dev/gpu-type) the pod may run on; empty: any.
	GPUTypes []string
	// Node, when set, is where the pod already runs when it arrives, on the GPUs GPUIndexes (a
	// snapshot of a live cluster, fairway sim export): it is bound from the start.
	Node       string
	GPUIndexes []int
}

// MilliGPU is the pod's GPU demand in milli-GPU.
func (p *Pod) MilliGPU() int64 { return int64(p.GPUs)*1000 + p.GPUMilli }

// Object is the pod as the webhook would have left it, in the namespace of its queue's name:
// fairway's scheduler, the queue label,
// the normalised share annotation, GPU-type node affinity.
func (p *Pod) Object(created time.Time) *corev1.Pod {
	req := corev1.ResourceList{}
	if p.MilliCPU > 0 {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI)
	}
	if p.MemoryMiB > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)
	}
	if p.GPUs > 0 {
		req[v1alpha1.ResourceGPU] = *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Queue, Name: p.Name, UID: types.UID(p.Queue + "/" + p.Name),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{v1alpha1.QueueLabel: p.Queue, v1alpha1.ManagedLabel: "true"},
			Annotations:       map[string]string{},
		},
		Spec: corev1.PodSpec{
			SchedulerName: v1alpha1.SchedulerName,
			Containers:    []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if p.Priority != 0 {
		pr := p.Priority
		obj.Spec.Priority = &pr
	}
	if p.Preemptibility != "" {
		obj.Labels[v1alpha1.PreemptibilityLabel] = p.Preemptibility
	}
	if p.Kind != "" {
		obj.Labels[v1alpha1.FrameworkLabel] = p.Kind
	}
	switch {
	case p.GPUs == 0 && p.GPUMilli > 0:
		obj.Annotations[v1alpha1.GPUFractionAnnotation] = fractionString(p.GPUMilli)
	case p.GPUs == 0 && p.GPUMemoryMiB > 0:
		obj.Annotations[v1alpha1.GPUMemoryAnnotation] = strconv.FormatInt(p.GPUMemoryMiB, 10)
	}
	if p.Gang != "" {
		obj.Annotations[v1alpha1.PodGroupAnnotation] = p.Gang
		obj.Annotations[v1alpha1.MinMemberAnnotation] = strconv.Itoa(max(p.GangSize, 1))
	}
	if len(p.GPUTypes) > 0 {
		obj.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.GPUTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: p.GPUTypes}},
			}}},
		}}
	}
	return obj
}

// fractionString writes milli-GPU as the decimal the share annotation takes: 810 -> "0.81".
func fractionString(m int64) string {
	s := strings.TrimRight(fmt.Sprintf("0.%03d", m), "0")
	return s
}

// Node is one simulated node.
type Node struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int
	GPUType   string
	// GPUMemoryMiB of one GPU; 0 unknown.
	GPUMemoryMiB int64
	// Pods is the pod capacity; 0 means unbounded (the paper's simulator does not limit pods).
	Pods int
}

// Object is the node as the gpu-agent would have labelled it, with a GPU inventory so that
// shares may go there (the scheduler runs with SharesNeedInventory).
func (n *Node) Object() *corev1.Node {
	pods := int64(n.Pods)
	if pods == 0 {
		pods = 100000
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{corev1.LabelHostname: n.Name}, Annotations: map[string]string{}},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc.DeepCopy()},
	}
	if n.GPUs > 0 {
		AddGPUs(obj, n.GPUs, n.GPUType, n.GPUMemoryMiB)
	}
	return obj
}

// AddGPUs gives a node object GPUs, their type and memory labels and an inventory.
func AddGPUs(obj *corev1.Node, gpus int, gpuType string, memMiB int64) {
	obj.Status.Allocatable[v1alpha1.ResourceGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	if obj.Status.Capacity != nil {
		obj.Status.Capacity[v1alpha1.ResourceGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	if gpuType != "" {
		obj.Labels[v1alpha1.GPUTypeLabel] = gpuType
	}
	if memMiB > 0 {
		obj.Labels[v1alpha1.GPUMemoryLabel] = strconv.FormatInt(memMiB, 10)
	}
	if _, ok := obj.Annotations[v1alpha1.GPUInventoryAnnotation]; ok {
		return
	}
	inv := make([]map[string]any, 0, gpus)
	for i := range gpus {
		e := map[string]any{"index": i, "uuid": fmt.Sprintf("GPU-%s-%d", obj.Name, i)}
		if memMiB > 0 {
			e["memoryMiB"] = memMiB
		}
		inv = append(inv, e)
	}
	b, _ := json.Marshal(inv)
	obj.Annotations[v1alpha1.GPUInventoryAnnotation] = string(b)
}
