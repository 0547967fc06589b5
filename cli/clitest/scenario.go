// Package clitest is the fixed scenario the CLI's golden tests run on: queues, PodGroups, pods
// bound with GPU shares, reservation pods and GPU nodes, with the status the scheduler would
// write. The unit tests load it into a fake client; the e2e test creates it on a local cluster
// (status through the status subresource) and expects the same output, so the goldens under
// cli/testdata are checked against both.
package clitest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// T0 is the creation time of every object of the scenario in the unit tests; Now is the clock
// the goldens are taken at, an hour later.
var (
	T0  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	Now = T0.Add(time.Hour)
)

// NodePool describes the scenario's GPU nodes: two H100 nodes and one A100 node of 8 GPUs.
type NodePool struct {
	Name, GPUType, Product string
	Count                  int
	MemoryMiB              int64
}

// NodePools are the scenario's nodes, named <pool>-<index> as test/cluster names them.
var NodePools = []NodePool{
	{Name: "h100", GPUType: "H100", Product: "NVIDIA H100 80GB HBM3", Count: 2, MemoryMiB: 81559},
	{Name: "a100", GPUType: "A100", Product: "NVIDIA A100-SXM4-80GB", Count: 1, MemoryMiB: 81920},
}

// Namespaces are the namespaces the scenario's pods live in.
var Namespaces = []string{"team-a", "team-b", "fairway-system"}

// UUID is the deterministic UUID of a GPU of the scenario.
func UUID(node string, index int) string { return fmt.Sprintf("GPU-%s-%d", node, index) }

// Inventory is the gpu-agent's inventory annotation of a scenario node.
func Inventory(node string, pool NodePool) string {
	// h100-1, which holds the scenario's shares, runs MPS; a100-0's lost GPU is in MIG mode (a
	// GPU fairway places no share on), so `fairway nodes` shows every sharing mode.
	inv := fairwayv1.GPUInventory{ObservedAt: metav1.NewTime(T0), RefreshSeconds: 30, Driver: "570.00", MPS: node == "h100-1"}
	for i := range 8 {
		lost := node == "a100-0" && i == 7
		inv.GPUs = append(inv.GPUs, fairwayv1.GPUDevice{Index: int32(i), UUID: UUID(node, i), Product: pool.Product,
			MemoryMiB: pool.MemoryMiB, Healthy: !lost, MIGEnabled: lost})
	}
	b, _ := json.Marshal(inv)
	return string(b)
}

// Nodes are the scenario's nodes as the unit tests need them (the e2e cluster makes its own
// and gets the labels and inventory patched in).
func Nodes() []client.Object {
	var out []client.Object
	for _, p := range NodePools {
		for i := range p.Count {
			name := fmt.Sprintf("%s-%d", p.Name, i)
			out = append(out, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(T0), Labels: NodeLabels(p),
					Annotations: map[string]string{fairwayv1.GPUInventoryAnnotation: Inventory(name, p)}},
				Status: corev1.NodeStatus{Capacity: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}},
			})
		}
	}
	return out
}

// NodeLabels are the gpu-agent's labels of a node of the pool.
func NodeLabels(p NodePool) map[string]string {
	return map[string]string{fairwayv1.GPUTypeLabel: p.GPUType, fairwayv1.GPUMemoryLabel: fmt.Sprint(p.MemoryMiB)}
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func queue(name, parent string, spec fairwayv1.QueueSpec, st fairwayv1.QueueStatus) *fairwayv1.Queue {
	spec.Parent = parent
	return &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(T0)}, Spec: spec, Status: st}
}

// Queues: department research (team-a, team-b) and department ops (inference).
func Queues() []client.Object {
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "the queue takes work", LastTransitionTime: metav1.NewTime(T0)}}
	return []client.Object{
		queue("research", "", fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{
			GPU: &fairwayv1.ResourceQuota{Quota: q("12")}, CPU: &fairwayv1.ResourceQuota{Quota: q("256")}, Memory: &fairwayv1.ResourceQuota{Quota: q("2Ti")}}},
			fairwayv1.QueueStatus{Allocated: list("gpu", "10", "cpu", "13", "memory", "48Gi"), Requested: list("gpu", "18.5", "cpu", "22", "memory", "80Gi"),
				FairShare: list("gpu", "20", "cpu", "256", "memory", "2Ti"), Borrowed: list("gpu", "0.25"), Loaned: list("gpu", "0.25"), PendingPods: 6, ChildQueues: []string{"team-a", "team-b"}, Conditions: ready}),
		queue("team-a", "research", fairwayv1.QueueSpec{Namespaces: []string{"team-a"}, Resources: fairwayv1.QueueResources{
			GPU: &fairwayv1.ResourceQuota{Quota: q("4"), Limit: q("16")}, CPU: &fairwayv1.ResourceQuota{Quota: q("64")}, Memory: &fairwayv1.ResourceQuota{Quota: q("512Gi")}}},
			fairwayv1.QueueStatus{Allocated: list("gpu", "8.5", "cpu", "9", "memory", "32Gi", "gpu/H100", "8.5"), Requested: list("gpu", "16.5", "cpu", "17", "memory", "64Gi"),
				FairShare: list("gpu", "12", "cpu", "64", "memory", "512Gi"), Borrowed: list("gpu", "4.5"), Loaned: list("gpu", "0.25", "gpu/H100", "0.25"), PendingPods: 4, Conditions: ready}),
		queue("team-b", "research", fairwayv1.QueueSpec{Namespaces: []string{"team-b"}, Resources: fairwayv1.QueueResources{
			GPU: &fairwayv1.ResourceQuota{Quota: q("8")}, CPU: &fairwayv1.ResourceQuota{Quota: q("64")}}},
			fairwayv1.QueueStatus{Allocated: list("gpu", "0.75", "cpu", "4", "memory", "16Gi"), Requested: list("gpu", "2", "cpu", "6", "memory", "17Gi"),
				FairShare: list("gpu", "8", "cpu", "64", "memory", "16Gi"), PendingPods: 2, Conditions: ready}),
		queue("ops", "", fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: q("4")}}},
			fairwayv1.QueueStatus{ChildQueues: []string{"inference"}, Conditions: ready}),
		queue("inference", "ops", fairwayv1.QueueSpec{Namespaces: []string{"inference"}, Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: q("4")}}},
			fairwayv1.QueueStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NamespaceConflict",
				Message: "namespace inference is also served by queue ops-old", LastTransitionTime: metav1.NewTime(T0)}}}),
	}
}

// PriorityClasses are the chart's default classes.
func PriorityClasses() []client.Object {
	return []client.Object{
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fairwayv1.PriorityClassTraining}, Value: 50},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fairwayv1.PriorityClassInteractive}, Value: 100},
	}
}

func podGroup(ns, name, queue, class string, minMember int32, st fairwayv1.PodGroupStatus) *fairwayv1.PodGroup {
	return &fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(T0)},
		Spec: fairwayv1.PodGroupSpec{MinMember: minMember, Queue: queue, PriorityClassName: class}, Status: st}
}

func running(minMember int32, startedAfter time.Duration) fairwayv1.PodGroupStatus {
	return fairwayv1.PodGroupStatus{Phase: fairwayv1.PodGroupRunning, Scheduled: minMember, Running: minMember,
		LastStartTime: ptr.To(metav1.NewTime(T0.Add(startedAfter))),
		Conditions: []metav1.Condition{{Type: fairwayv1.PodGroupConditionUnschedulable, Status: metav1.ConditionFalse, Reason: "Schedulable",
			Message: "no pod of the gang waits", LastTransitionTime: metav1.NewTime(T0.Add(startedAfter))}}}
}

// PodGroups: a running training gang and a waiting one in team-a, one PodGroup per notebook.
func PodGroups() []client.Object {
	return []client.Object{
		podGroup("team-a", "train-llama", "team-a", fairwayv1.PriorityClassTraining, 2, running(2, 90*time.Second)),
		podGroup("team-a", "train-big", "team-a", fairwayv1.PriorityClassTraining, 4, fairwayv1.PodGroupStatus{Phase: fairwayv1.PodGroupPending,
			Conditions: []metav1.Condition{{Type: fairwayv1.PodGroupConditionUnschedulable, Status: metav1.ConditionTrue, Reason: "QueueLimit",
				Message: "queue team-a would hold 16.25 GPUs, above its limit of 16", LastTransitionTime: metav1.NewTime(T0)}}}),
		podGroup("team-a", "nb-carol", "team-a", fairwayv1.PriorityClassInteractive, 1, running(1, 5*time.Second)),
		podGroup("team-b", "nb-alice", "team-b", fairwayv1.PriorityClassInteractive, 1, running(1, 3*time.Second)),
		podGroup("team-b", "nb-bob", "team-b", fairwayv1.PriorityClassInteractive, 1, running(1, 4*time.Second)),
		podGroup("team-a", "train-lora", "team-a", fairwayv1.PriorityClassTraining, 1, running(1, 2*time.Second)),
		podGroup("team-b", "nb-dave", "team-b", fairwayv1.PriorityClassInteractive, 1, running(1, 6*time.Second)),
	}
}

// PodSpec is how a scenario pod is built.
type PodSpec struct {
	Namespace, Name, Group, Queue, Class, Framework, Node string
	// Kind is the pod's fairway.dev/workload-kind, as the webhook writes it.
	Kind                fairwayv1.WorkloadKind
	WholeGPUs           int
	Fraction, MemoryMiB string
	Slot                int
	UUID                string
	// Waiting is the PodScheduled=False message of a pending pod.
	Waiting string
	// Loan marks a pod bound on loan on an idle notebook's GPU (fairway.dev/loan); Borrow a pod
	// that opted in to borrowing (fairway.dev/borrow-idle-gpu).
	Loan, Borrow bool
	// Annotations are further annotations of the pod's author.
	Annotations map[string]string
}

// Pod builds a pod shaped as fairway's webhook and scheduler leave it.
func Pod(s PodSpec) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, CreationTimestamp: metav1.NewTime(T0),
			Labels:      map[string]string{fairwayv1.QueueLabel: s.Queue, fairwayv1.ManagedLabel: "true"},
			Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, PriorityClassName: s.Class, NodeName: s.Node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	for k, v := range s.Annotations {
		p.Annotations[k] = v
	}
	if s.Framework != "" {
		p.Labels[fairwayv1.FrameworkLabel] = s.Framework
	}
	if s.Group != "" {
		p.Annotations[fairwayv1.PodGroupAnnotation] = s.Group
	}
	if s.Kind != "" {
		p.Annotations[fairwayv1.WorkloadKindAnnotation] = string(s.Kind)
	}
	if s.WholeGPUs > 0 {
		n := resource.MustParse(fmt.Sprint(s.WholeGPUs))
		p.Spec.Containers[0].Resources.Requests[fairwayv1.ResourceGPU] = n
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: n}
	}
	if s.Fraction != "" || s.MemoryMiB != "" {
		if s.Fraction != "" {
			p.Annotations[fairwayv1.GPUFractionAnnotation] = s.Fraction
		} else {
			p.Annotations[fairwayv1.GPUMemoryAnnotation] = s.MemoryMiB
		}
		if s.Node != "" {
			p.Annotations[fairwayv1.GPUIndexAnnotation] = fmt.Sprint(s.Slot)
			p.Annotations[fairwayv1.GPUUUIDAnnotation] = s.UUID
			p.Labels[fairwayv1.GPUGroupLabel] = fmt.Sprintf("%s-%d", s.Node, s.Slot)
		}
	}
	if s.Loan {
		p.Annotations[fairwayv1.LoanAnnotation] = "true"
	}
	if s.Borrow {
		p.Annotations[fairwayv1.BorrowIdleGPUAnnotation] = "true"
	}
	if s.Node != "" {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(T0)}}}
	} else {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		if s.Waiting != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: s.Waiting, LastTransitionTime: metav1.NewTime(T0)}}
		}
	}
	return p
}

// Reservation is the reservation pod of a shared GPU slot: bound to the node, holding one GPU,
// annotated by the gpu-agent with the physical GPU.
func Reservation(node string, slot, index int) *corev1.Pod {
	one := resource.MustParse("1")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fairway-system", Name: fmt.Sprintf("fairway-gpu-%s-%d", node, slot), CreationTimestamp: metav1.NewTime(T0),
			Labels: map[string]string{fairwayv1.ReservationLabel: "true", fairwayv1.GPUGroupLabel: fmt.Sprintf("%s-%d", node, slot)},
			Annotations: map[string]string{fairwayv1.Prefix + "gpu-slot": fmt.Sprint(slot), fairwayv1.GPUIndexAnnotation: fmt.Sprint(index),
				fairwayv1.GPUUUIDAnnotation: UUID(node, index)}},
		Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "pause", Image: fairwayv1.DefaultReservationImage, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{fairwayv1.ResourceGPU: one}, Limits: corev1.ResourceList{fairwayv1.ResourceGPU: one}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// Pods: the training gang on h100-0 (8 GPUs), the waiting gang, three notebooks sharing two
// GPUs of h100-1, a waiting pod outside any gang, and the two reservations.
func Pods() []client.Object {
	out := []client.Object{
		Pod(PodSpec{Namespace: "team-a", Name: "train-llama-0", Group: "train-llama", Queue: "team-a", Class: fairwayv1.PriorityClassTraining, Framework: "pytorchjob", Kind: fairwayv1.KindTraining, Node: "h100-0", WholeGPUs: 4}),
		Pod(PodSpec{Namespace: "team-a", Name: "train-llama-1", Group: "train-llama", Queue: "team-a", Class: fairwayv1.PriorityClassTraining, Framework: "pytorchjob", Kind: fairwayv1.KindTraining, Node: "h100-0", WholeGPUs: 4}),
		Pod(PodSpec{Namespace: "team-a", Name: "nb-carol", Group: "nb-carol", Queue: "team-a", Class: fairwayv1.PriorityClassInteractive, Framework: "jupyterhub", Kind: fairwayv1.KindNotebook, Node: "h100-1", MemoryMiB: "20000", Slot: 1, UUID: UUID("h100-1", 5)}),
		Pod(PodSpec{Namespace: "team-b", Name: "nb-alice", Group: "nb-alice", Queue: "team-b", Class: fairwayv1.PriorityClassInteractive, Framework: "jupyterhub", Kind: fairwayv1.KindNotebook, Node: "h100-1", Fraction: "0.25", Slot: 0, UUID: UUID("h100-1", 3)}),
		// nb-bob's 30 GiB are on the host while train-lora is on loan (swap).
		Pod(PodSpec{Namespace: "team-b", Name: "nb-bob", Group: "nb-bob", Queue: "team-b", Class: fairwayv1.PriorityClassInteractive, Framework: "jupyterhub", Kind: fairwayv1.KindNotebook, Node: "h100-1", Fraction: "0.5", Slot: 0, UUID: UUID("h100-1", 3),
			Annotations: map[string]string{fairwayv1.GPUSwapAnnotation: fairwayv1.FormatGPUSwap(fairwayv1.GPUSwap{State: fairwayv1.GPUSwappedOut, Bytes: 30 << 30, SwapInMillis: 1200, PIDs: []int{4242}})}}),
		Pod(PodSpec{Namespace: "team-b", Name: "debug", Queue: "team-b", Kind: fairwayv1.KindPod, Class: fairwayv1.PriorityClassInteractive, Fraction: "0.75",
			Waiting: "NonPreemptibleOverQuota: team-b would hold 1.5 non-preemptible GPUs, above its quota of 1"}),
		// Idle GPU lending: a training pod on loan on nb-alice's and nb-bob's GPU, while they are
		// idle, and one that waits for a loan.
		Pod(PodSpec{Namespace: "team-a", Name: "train-lora", Group: "train-lora", Queue: "team-a", Kind: fairwayv1.KindPod, Class: fairwayv1.PriorityClassTraining, Node: "h100-1", Fraction: "0.25", Slot: 0, UUID: UUID("h100-1", 3), Loan: true, Borrow: true}),
		Pod(PodSpec{Namespace: "team-b", Name: "sweep", Queue: "team-b", Kind: fairwayv1.KindPod, Class: fairwayv1.PriorityClassTraining, Fraction: "0.5", Borrow: true,
			Waiting: "NoNodeFits: 0/3 nodes fit pod team-b/sweep (0.5 GPU, 1 CPU): on 3 nodes: no GPU with enough free share or memory; idle GPU lending: 1 lendable GPU, none takes pod team-b/sweep: 1 at its loan cap"}),
		// A notebook whose author misspelt the fraction key (admitted before the webhook checked
		// keys, or while it was down): it runs, without a GPU.
		Pod(PodSpec{Namespace: "team-b", Name: "nb-dave", Group: "nb-dave", Queue: "team-b", Class: fairwayv1.PriorityClassInteractive, Framework: "jupyterhub", Kind: fairwayv1.KindNotebook, Node: "a100-0",
			Annotations: map[string]string{"fairway.dev/gpu-fracton": "0.25"}}),
		Reservation("h100-1", 0, 3),
		Reservation("h100-1", 1, 5),
	}
	for i := range 4 {
		out = append(out, Pod(PodSpec{Namespace: "team-a", Name: fmt.Sprintf("train-big-%d", i), Group: "train-big", Queue: "team-a",
			Class: fairwayv1.PriorityClassTraining, Framework: "ray", Kind: fairwayv1.KindRay, WholeGPUs: 2}))
	}
	return out
}

// Replicas are the pods of a Deployment (serve: two replicas running, one waiting, one evicted)
// and of a StatefulSet (triton: two running) in team-a, each a gang of its own with the PodGroup
// the webhook names for it. They are kept out of Objects: on the e2e test's cluster the garbage
// collector deletes pods whose owner does not exist, so only the unit tests (fake client) use
// them, with the golden cli/testdata/jobs-replicas.txt.
func Replicas() []client.Object {
	replica := func(s PodSpec, kind, owner, hash string) []client.Object {
		s.Namespace, s.Queue, s.Class, s.Kind = "team-a", "team-a", fairwayv1.PriorityClassInteractive, fairwayv1.KindInference
		s.Group = "pod-" + s.Name
		p := Pod(s)
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}
		if hash != "" {
			p.Labels["pod-template-hash"] = hash
		}
		p.OwnerReferences = []metav1.OwnerReference{ref}
		fairwayv1.SetMinMember(p.Annotations, 1)
		pg := podGroup("team-a", s.Group, "team-a", fairwayv1.PriorityClassInteractive, 1, running(1, 7*time.Second))
		if s.Node == "" {
			pg.Status = fairwayv1.PodGroupStatus{Phase: fairwayv1.PodGroupPending}
		}
		return []client.Object{p, pg}
	}
	var out []client.Object
	for i, name := range []string{"serve-6cc45dbb8-q8fk7", "serve-6cc45dbb8-x2z9m", "serve-6cc45dbb8-b7v4d"} {
		s := PodSpec{Name: name, Framework: "vllm", Fraction: "0.5", Slot: i, Node: "a100-0", UUID: UUID("a100-0", i)}
		if i == 2 {
			s.Node, s.UUID = "", ""
			s.Waiting = "NoNodeFits: 0/3 nodes fit pod team-a/serve-6cc45dbb8-b7v4d (0.5 GPU, 1 CPU): on 3 nodes: no GPU with enough free share or memory"
		}
		out = append(out, replica(s, "ReplicaSet", "serve-6cc45dbb8", "6cc45dbb8")...)
	}
	evicted := replica(PodSpec{Name: "serve-6cc45dbb8-old01", Framework: "vllm", Fraction: "0.5", Slot: 0, Node: "h100-1", UUID: UUID("h100-1", 0)},
		"ReplicaSet", "serve-6cc45dbb8", "6cc45dbb8")
	evicted[0].(*corev1.Pod).Status.Phase = corev1.PodFailed
	out = append(out, evicted...)
	for i := range 2 {
		out = append(out, replica(PodSpec{Name: fmt.Sprintf("triton-%d", i), Framework: "triton", WholeGPUs: 1, Node: "a100-0"}, "StatefulSet", "triton", "")...)
	}
	return out
}

// Objects is the whole scenario but the nodes.
func Objects() []client.Object {
	var out []client.Object
	out = append(out, PriorityClasses()...)
	out = append(out, Queues()...)
	out = append(out, PodGroups()...)
	return append(out, Pods()...)
}

// Case is one golden test: the CLI's arguments and the file under cli/testdata that holds the
// expected output.
type Case struct {
	Golden string
	Args   []string
}

// Cases are the golden tests, shared by the unit tests (fake client) and the e2e test (a local
// cluster).
var Cases = []Case{
	{"queues.txt", []string{"queues"}},
	{"queues-all-resources.txt", []string{"queues", "--resources", "gpu,cpu,memory"}},
	{"queues.json", []string{"queues", "-o", "json"}},
	{"jobs-all.txt", []string{"jobs", "-A"}},
	{"jobs-team-a.txt", []string{"jobs", "-n", "team-a"}},
	{"jobs-team-b.yaml", []string{"jobs", "-n", "team-b", "-o", "yaml"}},
	{"jobs-default.txt", []string{"jobs", "-n", "default"}},
	{"why-train-big.txt", []string{"why", "train-big", "-n", "team-a"}},
	{"why-train-llama.txt", []string{"why", "podgroup/train-llama", "-n", "team-a"}},
	{"why-nb-alice.txt", []string{"why", "pod/nb-alice", "-n", "team-b"}},
	{"why-debug.txt", []string{"why", "pod/debug", "-n", "team-b"}},
	{"why-nb-carol.json", []string{"why", "nb-carol", "-n", "team-a", "-o", "json"}},
	{"why-train-lora.txt", []string{"why", "pod/train-lora", "-n", "team-a"}},
	{"why-sweep.txt", []string{"why", "pod/sweep", "-n", "team-b"}},
	{"why-nb-dave.txt", []string{"why", "nb-dave", "-n", "team-b"}},
	{"nodes.txt", []string{"nodes"}},
	{"nodes.json", []string{"nodes", "-o", "json"}},
	{"nodes-wide.txt", []string{"nodes", "-o", "wide"}},
}

var waitSecondsRE = regexp.MustCompile(`("waitSeconds": |waitSeconds: )\d+`)

// Normalize hides what depends on when the objects were created on a real cluster: the wait in
// seconds of JSON and YAML output (tables print ages at minute resolution, which is stable).
func Normalize(s string) string { return waitSecondsRE.ReplaceAllString(s, "${1}N") }
