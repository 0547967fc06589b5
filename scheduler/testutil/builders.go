package testutil

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Epoch is the creation time builders give objects unless told otherwise.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// PodWrapper builds a pod.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a pending pod of fairway's scheduler with one container asking for nothing.
func MakePod(namespace, name string) *PodWrapper {
	p := &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name),
			CreationTimestamp: metav1.NewTime(Epoch),
			Labels:            map[string]string{}, Annotations: map[string]string{},
		},
		Spec: corev1.PodSpec{
			SchedulerName: v1alpha1.SchedulerName,
			Containers:    []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
	return p
}

// Obj returns the pod.
func (p *PodWrapper) Obj() *corev1.Pod { return &p.Pod }

// Queue sets the fairway.dev/queue label.
func (p *PodWrapper) Queue(q string) *PodWrapper { p.Labels[v1alpha1.QueueLabel] = q; return p }

// Request sets a container request (and limit, for extended resources).
func (p *PodWrapper) Request(name corev1.ResourceName, qty string) *PodWrapper {
	q := resource.MustParse(qty)
	p.Spec.Containers[0].Resources.Requests[name] = q
	if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
		p.Spec.Containers[0].Resources.Limits[name] = q
	}
	return p
}

// GPU asks for n whole GPUs.
func (p *PodWrapper) GPU(n int) *PodWrapper {
	return p.Request(v1alpha1.ResourceGPU, strconv.Itoa(n))
}

// CPU asks for CPU ("1", "500m").
func (p *PodWrapper) CPU(q string) *PodWrapper { return p.Request(corev1.ResourceCPU, q) }

// Memory asks for memory ("1Gi").
func (p *PodWrapper) Memory(q string) *PodWrapper { return p.Request(corev1.ResourceMemory, q) }

// Fraction asks for a share of one GPU ("0.5").
func (p *PodWrapper) Fraction(f string) *PodWrapper {
	p.Annotations[v1alpha1.GPUFractionAnnotation] = f
	return p
}

// GPUMemory asks for MiB of one GPU's memory.
func (p *PodWrapper) GPUMemory(mib int64) *PodWrapper {
	p.Annotations[v1alpha1.GPUMemoryAnnotation] = strconv.FormatInt(mib, 10)
	return p
}

// Priority sets spec.priority.
func (p *PodWrapper) Priority(v int32) *PodWrapper { p.Spec.Priority = &v; return p }

// PodGroup names the pod's gang.
func (p *PodWrapper) PodGroup(name string) *PodWrapper {
	p.Annotations[v1alpha1.PodGroupAnnotation] = name
	return p
}

// MinMember sets the gang minimum annotation.
func (p *PodWrapper) MinMember(n int) *PodWrapper {
	p.Annotations[v1alpha1.MinMemberAnnotation] = strconv.Itoa(n)
	return p
}

// SubGroup sets the sub-group annotation.
func (p *PodWrapper) SubGroup(name string) *PodWrapper {
	p.Annotations[v1alpha1.SubGroupAnnotation] = name
	return p
}

// Preemptibility sets the preemptibility label.
func (p *PodWrapper) Preemptibility(v v1alpha1.Preemptibility) *PodWrapper {
	p.Labels[v1alpha1.PreemptibilityLabel] = string(v)
	return p
}

// TopologyRequired and TopologyPreferred set the topology annotations.
func (p *PodWrapper) TopologyRequired(level string) *PodWrapper {
	p.Annotations[v1alpha1.TopologyRequiredAnnotation] = level
	return p
}

// TopologyPreferred sets the preferred topology level annotation.
func (p *PodWrapper) TopologyPreferred(level string) *PodWrapper {
	p.Annotations[v1alpha1.TopologyPreferredAnnotation] = level
	return p
}

// Label sets a label.
func (p *PodWrapper) Label(k, v string) *PodWrapper { p.Labels[k] = v; return p }

// Annotation sets an annotation.
func (p *PodWrapper) Annotation(k, v string) *PodWrapper { p.Annotations[k] = v; return p }

// NodeSelector adds a node selector entry.
func (p *PodWrapper) NodeSelector(k, v string) *PodWrapper {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[k] = v
	return p
}

// NodeAffinityIn requires a node label to be one of values.
func (p *PodWrapper) NodeAffinityIn(key string, values ...string) *PodWrapper {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}},
		}}},
	}}
	return p
}

// Toleration adds a toleration (operator Equal when value is set, Exists otherwise).
func (p *PodWrapper) Toleration(key, value string, effect corev1.TaintEffect) *PodWrapper {
	t := corev1.Toleration{Key: key, Value: value, Effect: effect, Operator: corev1.TolerationOpEqual}
	if value == "" {
		t.Operator = corev1.TolerationOpExists
	}
	p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	return p
}

// PodAntiAffinity adds a required anti-affinity term (which the engine does not evaluate).
func (p *PodWrapper) PodAntiAffinity(key, value string) *PodWrapper {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}, TopologyKey: corev1.LabelHostname,
	}}}
	return p
}

// HostPort adds a TCP host port.
func (p *PodWrapper) HostPort(port int32) *PodWrapper {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	return p
}

// Created sets the creation time.
func (p *PodWrapper) Created(t time.Time) *PodWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// Node binds the pod to a node and marks it running since the creation time.
func (p *PodWrapper) Node(name string) *PodWrapper {
	p.Spec.NodeName = name
	p.Status.Phase = corev1.PodRunning
	if p.Status.StartTime == nil {
		st := p.CreationTimestamp
		p.Status.StartTime = &st
	}
	return p
}

// Started sets when the pod started running.
func (p *PodWrapper) Started(t time.Time) *PodWrapper {
	st := metav1.NewTime(t)
	p.Status.StartTime = &st
	return p
}

// GPUIndex records the GPU indexes the pod holds on its node.
func (p *PodWrapper) GPUIndex(idx ...int) *PodWrapper {
	s := ""
	for i, x := range idx {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(x)
	}
	p.Annotations[v1alpha1.GPUIndexAnnotation] = s
	return p
}

// Reservation makes the pod a reservation pod holding GPU slot on node (label
// fairway.dev/reservation, annotation fairway.dev/gpu-slot, nvidia.com/gpu 1, bound), as the
// runtime creates it; physical is the index the agent reports (fairway.dev/gpu-index), -1 for
// none yet.
func (p *PodWrapper) Reservation(node string, slot, physical int) *PodWrapper {
	p.Labels[v1alpha1.ReservationLabel] = "true"
	p.Annotations[v1alpha1.Prefix+"gpu-slot"] = strconv.Itoa(slot)
	if physical >= 0 {
		p.Annotations[v1alpha1.GPUIndexAnnotation] = strconv.Itoa(physical)
	}
	return p.GPU(1).Node(node)
}

// Phase sets status.phase.
func (p *PodWrapper) Phase(ph corev1.PodPhase) *PodWrapper { p.Status.Phase = ph; return p }

// Terminating sets a deletion timestamp.
func (p *PodWrapper) Terminating() *PodWrapper {
	t := metav1.NewTime(Epoch)
	p.DeletionTimestamp = &t
	return p
}

// SchedulerName overrides spec.schedulerName.
func (p *PodWrapper) SchedulerName(n string) *PodWrapper { p.Spec.SchedulerName = n; return p }

// Gate adds a scheduling gate.
func (p *PodWrapper) Gate(name string) *PodWrapper {
	p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
	return p
}

// NodeWrapper builds a node.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a schedulable node with 64 CPUs, 512Gi of memory, 110 pods and no GPUs.
func MakeNode(name string) *NodeWrapper {
	n := &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}},
	}}
	return n
}

// Obj returns the node.
func (n *NodeWrapper) Obj() *corev1.Node { return &n.Node }

// GPUs gives the node n GPUs of a type (empty for no type label), 81920 MiB each by label.
func (n *NodeWrapper) GPUs(count int, gpuType string) *NodeWrapper {
	n.Status.Allocatable[v1alpha1.ResourceGPU] = resource.MustParse(strconv.Itoa(count))
	if gpuType != "" {
		n.Labels[v1alpha1.GPUTypeLabel] = gpuType
	}
	if _, ok := n.Labels[v1alpha1.GPUMemoryLabel]; !ok {
		n.Labels[v1alpha1.GPUMemoryLabel] = "81920"
	}
	return n
}

// GPUMemory sets the per-GPU memory label.
func (n *NodeWrapper) GPUMemory(mib int64) *NodeWrapper {
	n.Labels[v1alpha1.GPUMemoryLabel] = strconv.FormatInt(mib, 10)
	return n
}

// Inventory publishes a GPU inventory annotation with UUIDs GPU-<node>-<i>.
func (n *NodeWrapper) Inventory(memMiB int64) *NodeWrapper {
	q := n.Status.Allocatable[v1alpha1.ResourceGPU]
	var inv []map[string]any
	for i := 0; i < int(q.Value()); i++ {
		inv = append(inv, map[string]any{"index": i, "uuid": fmt.Sprintf("GPU-%s-%d", n.Name, i), "memoryMiB": memMiB})
	}
	b, _ := json.Marshal(inv)
	n.Annotations[v1alpha1.GPUInventoryAnnotation] = string(b)
	return n
}

// TimeSliced makes the node's GPUs time-sliced by its device plugin: the GPUs it has so far
// (GPUs) are the physical ones, each advertised replicas times under nvidia.com/gpu, and the
// gpu-agent's inventory (an object, UUIDs GPU-<node>-<i>) says so.
func (n *NodeWrapper) TimeSliced(replicas int, memMiB int64) *NodeWrapper {
	q := n.Status.Allocatable[v1alpha1.ResourceGPU]
	physical := int(q.Value())
	inv := v1alpha1.GPUInventory{Replicas: int32(replicas)}
	for i := range physical {
		inv.GPUs = append(inv.GPUs, v1alpha1.GPUDevice{Index: int32(i), UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), MemoryMiB: memMiB, Healthy: true})
	}
	b, _ := json.Marshal(inv)
	n.Annotations[v1alpha1.GPUInventoryAnnotation] = string(b)
	n.Status.Allocatable[v1alpha1.ResourceGPU] = *resource.NewQuantity(int64(physical*replicas), resource.DecimalSI)
	return n
}

// Allocatable sets an allocatable resource.
func (n *NodeWrapper) Allocatable(name corev1.ResourceName, qty string) *NodeWrapper {
	n.Status.Allocatable[name] = resource.MustParse(qty)
	return n
}

// Label sets a label.
func (n *NodeWrapper) Label(k, v string) *NodeWrapper { n.Labels[k] = v; return n }

// Taint adds a taint.
func (n *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Unschedulable cordons the node.
func (n *NodeWrapper) Unschedulable() *NodeWrapper { n.Spec.Unschedulable = true; return n }

// QueueWrapper builds a queue.
type QueueWrapper struct{ v1alpha1.Queue }

// MakeQueue starts a top-level queue with no quotas that serves the namespace of its own name
// (as the scenario files assume: a job's namespace defaults to its queue's name).
func MakeQueue(name string) *QueueWrapper {
	return &QueueWrapper{v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(Epoch)},
		Spec: v1alpha1.QueueSpec{Namespaces: []string{name}}}}
}

// Namespaces sets the namespaces the queue serves (replacing its own name's).
func (q *QueueWrapper) Namespaces(ns ...string) *QueueWrapper { q.Spec.Namespaces = ns; return q }

// Obj returns the queue.
func (q *QueueWrapper) Obj() *v1alpha1.Queue { return &q.Queue }

// Parent sets the parent queue.
func (q *QueueWrapper) Parent(p string) *QueueWrapper { q.Spec.Parent = p; return q }

// PipelineAdmission sets how the queue admits pipeline runs.
func (q *QueueWrapper) PipelineAdmission(m v1alpha1.PipelineAdmission) *QueueWrapper {
	q.Spec.PipelineAdmission = m
	return q
}

// Priority sets the queue priority.
func (q *QueueWrapper) Priority(p int32) *QueueWrapper { q.Spec.Priority = p; return q }

// Terms builds a ResourceQuota: empty quota or limit strings are left out; weight < 0 is left out.
func Terms(quota string, weight int32, limit string) *v1alpha1.ResourceQuota {
	rq := &v1alpha1.ResourceQuota{}
	if quota != "" {
		v := resource.MustParse(quota)
		rq.Quota = &v
	}
	if weight >= 0 {
		rq.OverQuotaWeight = &weight
	}
	if limit != "" {
		v := resource.MustParse(limit)
		rq.Limit = &v
	}
	return rq
}

// GPU sets the GPU terms.
func (q *QueueWrapper) GPU(quota string, weight int32, limit string) *QueueWrapper {
	q.Spec.Resources.GPU = Terms(quota, weight, limit)
	return q
}

// CPU sets the CPU terms.
func (q *QueueWrapper) CPU(quota string, weight int32, limit string) *QueueWrapper {
	q.Spec.Resources.CPU = Terms(quota, weight, limit)
	return q
}

// Memory sets the memory terms.
func (q *QueueWrapper) Memory(quota string, weight int32, limit string) *QueueWrapper {
	q.Spec.Resources.Memory = Terms(quota, weight, limit)
	return q
}

// GPUType adds per-type GPU terms.
func (q *QueueWrapper) GPUType(name, quota string, weight int32, limit string) *QueueWrapper {
	t := Terms(quota, weight, limit)
	q.Spec.GPUTypes = append(q.Spec.GPUTypes, v1alpha1.GPUTypeQuota{Name: name, Quota: t.Quota, OverQuotaWeight: t.OverQuotaWeight, Limit: t.Limit})
	return q
}

// ReclaimMinRuntime protects the queue's jobs from reclaim for d.
func (q *QueueWrapper) ReclaimMinRuntime(d time.Duration) *QueueWrapper {
	q.Spec.ReclaimMinRuntime = &metav1.Duration{Duration: d}
	return q
}

// PreemptMinRuntime protects the queue's jobs from preemption for d.
func (q *QueueWrapper) PreemptMinRuntime(d time.Duration) *QueueWrapper {
	q.Spec.PreemptMinRuntime = &metav1.Duration{Duration: d}
	return q
}

// PodGroupWrapper builds a pod group.
type PodGroupWrapper struct{ v1alpha1.PodGroup }

// MakePodGroup starts a pod group with minMember 1.
func MakePodGroup(namespace, name string) *PodGroupWrapper {
	return &PodGroupWrapper{v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(Epoch)},
		Spec:       v1alpha1.PodGroupSpec{MinMember: 1},
	}}
}

// Obj returns the pod group.
func (g *PodGroupWrapper) Obj() *v1alpha1.PodGroup { return &g.PodGroup }

// MinMember sets the gang minimum.
func (g *PodGroupWrapper) MinMember(n int32) *PodGroupWrapper { g.Spec.MinMember = n; return g }

// Queue sets the queue.
func (g *PodGroupWrapper) Queue(q string) *PodGroupWrapper { g.Spec.Queue = q; return g }

// Preemptibility sets the preemptibility.
func (g *PodGroupWrapper) Preemptibility(p v1alpha1.Preemptibility) *PodGroupWrapper {
	g.Spec.Preemptibility = p
	return g
}

// Topology sets the gang's topology constraint.
func (g *PodGroupWrapper) Topology(required, preferred string) *PodGroupWrapper {
	g.Spec.TopologyConstraint = &v1alpha1.TopologyConstraint{RequiredLevel: required, PreferredLevel: preferred}
	return g
}

// SubGroup adds a sub-group.
func (g *PodGroupWrapper) SubGroup(name string, min int32, requiredLevel string) *PodGroupWrapper {
	sg := v1alpha1.SubGroup{Name: name, MinMember: min}
	if requiredLevel != "" {
		sg.TopologyConstraint = &v1alpha1.TopologyConstraint{RequiredLevel: requiredLevel}
	}
	g.Spec.SubGroups = append(g.Spec.SubGroups, sg)
	return g
}
