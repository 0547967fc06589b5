package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// WorkloadKind names the kind of work a pod does, as its adapter recognised it at admission
// (the pod's WorkloadKindAnnotation). Queue policies are written per kind, so the kinds are
// part of the API.
// +kubebuilder:validation:Enum=pipeline-step;workflow-step;ray;notebook;training;pod;inference
type WorkloadKind string

// The workload kinds fairway's adapters recognise.
const (
	// KindPipelineStep is one step of a Kubeflow pipeline run.
	KindPipelineStep WorkloadKind = "pipeline-step"
	// KindWorkflowStep is one step of an Argo workflow.
	KindWorkflowStep WorkloadKind = "workflow-step"
	// KindRay is a head or worker of a Ray cluster.
	KindRay WorkloadKind = "ray"
	// KindNotebook is an interactive notebook server.
	KindNotebook WorkloadKind = "notebook"
	// KindTraining is a replica of a distributed training job (PyTorchJob, JobSet).
	KindTraining WorkloadKind = "training"
	// KindPod is any other pod.
	KindPod WorkloadKind = "pod"
	// KindInference is a replica of a model server (a KServe InferenceService, a Knative
	// Service, a Triton or vLLM Deployment, a Ray Serve cluster, a LeaderWorkerSet group).
	KindInference WorkloadKind = "inference"
)

// WorkloadKinds lists every kind, in the order policies are shown.
var WorkloadKinds = []WorkloadKind{KindNotebook, KindTraining, KindPipelineStep, KindWorkflowStep, KindRay, KindPod, KindInference}

// QueuePolicy is what an administrator lets the pods of a queue ask for, instead of the node
// affinity each researcher would otherwise write: which GPU types, how much GPU per pod, what a
// pod that asks for no GPU gets, and whether the queue may borrow above its quota. Rules can be
// set for every kind of work and per kind (Workloads); a queue's rules are inherited by its
// children, and a child overrides a rule by setting it.
//
// A rule applies from the nearest queue, starting at the pod's own, that sets it: at each queue
// the entry for the pod's kind is read first, then the queue-wide rule. So a department can put
// notebooks on T4 and training on H100 for all its projects, and one project can open H100 to
// its notebooks.
type QueuePolicy struct {
	// PolicyRules apply to every kind of work that has no rule of its own.
	PolicyRules `json:",inline"`

	// Workloads holds rules for one kind of work each (notebook, training, pipeline-step,
	// workflow-step, ray, pod, inference), read before the queue-wide rules.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +kubebuilder:validation:MaxItems=7
	Workloads []WorkloadPolicy `json:"workloads,omitempty"`
}

// WorkloadPolicy is a queue's rules for one kind of work.
type WorkloadPolicy struct {
	// Kind is the kind of work the rules are for, as fairway's adapters name it (the pod's
	// fairway.dev/workload-kind annotation).
	Kind WorkloadKind `json:"kind"`

	PolicyRules `json:",inline"`
}

// PolicyRules are the rules of a queue policy; every one is optional, and one left out is taken
// from the queue's parent (see QueuePolicy).
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxGPUsPerPod) || quantity(string(self.maxGPUsPerPod)).isGreaterThan(quantity('0'))",message="maxGPUsPerPod must be more than 0 (a share counts its fraction: 0.5 for half a GPU)",fieldPath=".maxGPUsPerPod"
type PolicyRules struct {
	// GPUTypes is an allow-list of GPU types (the nodes' fairway.dev/gpu-type label, e.g. T4,
	// H100): the pods it applies to run only on nodes of these types, and a pod that names
	// another type is refused at admission. A type not listed is closed, so a new GPU model
	// is open to nobody until an administrator lists it. Where no queue in the pod's ancestry
	// lists types, every type is open.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	GPUTypes []string `json:"gpuTypes,omitempty"`

	// DefaultGPU is what a pod of the kind gets when it asks for no GPU at all (no
	// nvidia.com/gpu, no share or memory annotation): the webhook adds it at admission. Use it
	// for kinds that always need a GPU, such as notebooks ({fraction: "0.25"}).
	// +optional
	DefaultGPU *DefaultGPU `json:"defaultGPU,omitempty"`

	// MaxGPUsPerPod caps the GPU a single pod may ask for, counted as the scheduler counts it:
	// whole GPUs, or the share's fraction (0.5). A pod above it is refused at admission.
	// +optional
	MaxGPUsPerPod *resource.Quantity `json:"maxGPUsPerPod,omitempty"`

	// Borrowing says whether the pods may run above the queue's guaranteed quota on capacity
	// other queues do not use (Allowed, the default) or only within it (Never).
	// +optional
	Borrowing *BorrowingPolicy `json:"borrowing,omitempty"`

	// CPUOnGPUNodes says whether pods that ask for no GPU may run on GPU nodes (nodes with
	// nvidia.com/gpu). Under a policy it defaults to false: CPU work then stays off the GPU
	// nodes, where it would take CPU and memory that GPU pods need.
	// +optional
	CPUOnGPUNodes *bool `json:"cpuOnGPUNodes,omitempty"`

	// PriorityClassName is the priority class the webhook gives pods that name none (or name
	// the cluster's global default). Left out, the kind decides (DefaultPriorityClass):
	// fairway-inference for inference, fairway-interactive for notebooks, fairway-training for
	// training, pipeline and workflow steps and Ray, the cluster's default for other pods. A
	// class that does not exist leaves the pod at the cluster's default, with a warning.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName *string `json:"priorityClassName,omitempty"`

	// Preemptibility is written to the fairway.dev/preemptibility label of pods that choose
	// neither it nor a priority class of their own. Left out, the kind decides
	// (DefaultPreemptibility): notebooks and inference are non-preemptible, and so run only
	// within the queue's guaranteed quota; other kinds follow their priority (below 100
	// preemptible). Set preemptible for inference to let its replicas borrow above the
	// guarantee, at the price of being reclaimed.
	// +optional
	Preemptibility *Preemptibility `json:"preemptibility,omitempty"`
}

// DefaultGPU is a GPU request added to pods that ask for none; exactly one field is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.gpus), has(self.fraction), has(self.memory)].filter(x, x).size() == 1",message="defaultGPU: set exactly one of gpus, fraction and memory"
// +kubebuilder:validation:XValidation:rule="!has(self.fraction) || (quantity(self.fraction).isGreaterThan(quantity('0')) && quantity(self.fraction).isLessThan(quantity('1')))",message="defaultGPU.fraction must be a decimal between 0 and 1, such as \"0.25\" (for whole GPUs use gpus)",fieldPath=".fraction"
type DefaultGPU struct {
	// GPUs is a number of whole GPUs (nvidia.com/gpu on the pod's GPU container).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	GPUs *int32 `json:"gpus,omitempty"`

	// Fraction is a share of one GPU, a decimal between 0 and 1 ("0.25"): the pod's
	// fairway.dev/gpu-fraction annotation.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^0?\.[0-9]+$`
	Fraction *string `json:"fraction,omitempty"`

	// Memory is GPU memory on one shared GPU, in MiB ("20000") or with a unit ("20Gi"): the
	// pod's fairway.dev/gpu-memory annotation.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(Mi|Gi|Ti|M|G|T)?$`
	Memory *string `json:"memory,omitempty"`
}

// BorrowingPolicy says whether a queue's pods may run above its guaranteed quota.
// +kubebuilder:validation:Enum=Allowed;Never
type BorrowingPolicy string

// Borrowing policies.
const (
	// BorrowingAllowed lets pods run above the guarantee on capacity nobody else uses (they are
	// reclaimed when its owners ask for it).
	BorrowingAllowed BorrowingPolicy = "Allowed"
	// BorrowingNever keeps the pods within the queue's guaranteed quota.
	BorrowingNever BorrowingPolicy = "Never"
)
