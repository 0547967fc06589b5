package v1alpha1

// SchedulerName is the spec.schedulerName of every pod fairway schedules.
const SchedulerName = "fairway"

// DefaultNamespace is fairway's own namespace when none is configured (the chart's usual
// release namespace): the scheduler's reservation pods live there.
const DefaultNamespace = "fairway-system"

// Prefix of every fairway label and annotation.
const Prefix = "fairway.dev/"

// Pod labels and annotations that users may set. The webhook reads them, normalizes them and
// writes the internal keys below.
const (
	// QueueLabel names the leaf queue a pod is accounted to. When absent the webhook uses the
	// queue that serves the pod's namespace. Aliases: RunAIQueueLabel, KAIQueueLabel; every
	// component reads the three with QueueOf.
	QueueLabel = Prefix + "queue"

	// GPUFractionAnnotation asks for a share of one GPU, a decimal in (0, 1), e.g. "0.5".
	// Alias: GPUFractionAliasAnnotation. Every component reads both with api/gpurequest, whose
	// package doc holds the rules (rounding to 0.001, what is refused).
	GPUFractionAnnotation = Prefix + "gpu-fraction"

	// GPUMemoryAnnotation asks for GPU memory on one shared GPU, in MiB ("20000") or as a
	// quantity with a byte unit ("20Gi"); the webhook writes MiB. Alias: GPUMemoryAliasAnnotation.
	// Read with api/gpurequest.
	GPUMemoryAnnotation = Prefix + "gpu-memory"

	// GPUContainerAnnotation names the container that gets the GPU share. When absent the adapter
	// of the pod's framework chooses (Argo and KFP: main; notebooks: notebook; otherwise index 0).
	// Alias: GPUContainerAliasAnnotation.
	GPUContainerAnnotation = Prefix + "gpu-container"

	// PreemptibilityLabel overrides the preemptibility derived from priority: "preemptible" or
	// "non-preemptible".
	PreemptibilityLabel = Prefix + "preemptibility"

	// IgnoreLabel set to "true" on a pod or a namespace keeps the webhook off it entirely.
	IgnoreLabel = Prefix + "ignore"

	// TopologyRequiredAnnotation and TopologyPreferredAnnotation name a node label (a topology
	// level) for the pod's gang; see TopologyConstraint.
	TopologyRequiredAnnotation  = Prefix + "topology-required"
	TopologyPreferredAnnotation = Prefix + "topology-preferred"

	// BorrowIdleGPUAnnotation set to "true" on a preemptible pod that asks for a GPU share lets
	// it run on loan on an idle interactive pod's GPU when no GPU has room for it (its queue's
	// spec.idleLending.borrow is OptIn, the default). A pod on loan is evicted, with a short
	// grace period, the moment the GPU's owner does GPU work again. Pods asking for whole GPUs
	// (nvidia.com/gpu) cannot borrow: the kubelet gives a device to one pod only, and a lent GPU
	// is already the device of the reservation that holds the interactive pods' shares.
	BorrowIdleGPUAnnotation = Prefix + "borrow-idle-gpu"

	// GangAnnotation set to "true" on the pod template of a batch/v1 Job makes the Job's pods one
	// gang of min(spec.parallelism, spec.completions): none of them starts until all of them can
	// (an indexed Job of N workers that talk to each other). Plain pods name their gang with the
	// conventions of Kueue, KAI or the coscheduling plugin instead (adapters/usergang).
	GangAnnotation = Prefix + "gang"
)

// Run:ai and KAI-Scheduler keys, honoured so that users can migrate without editing manifests.
const (
	GPUFractionAliasAnnotation  = "gpu-fraction"
	GPUMemoryAliasAnnotation    = "gpu-memory"
	GPUContainerAliasAnnotation = "gpu-fraction-container-name"
	RunAIQueueLabel             = "runai/queue"
	KAIQueueLabel               = "kai.scheduler/queue"
)

// Keys of other projects that a component of fairway reads outside the adapter of that project.
// They live here, with one owner, so that the scheduler need not import an adapter for a name.
const (
	// ArgoNodeNameAnnotation is an Argo step pod's node name in its Workflow's status: the
	// workflow's name, then ".task" for DAG tasks, "[i].step" for steps, "(i:item)" for loop
	// items and retries. The scheduler's pod cache keeps it, because pipeline admission's Stages
	// mode follows a run's steps by it; the Argo adapter names it argo.NodeNameAnnotation.
	ArgoNodeNameAnnotation = "workflows.argoproj.io/node-name"
)

// Keys written by fairway's webhook on pods. Users should not set them.
const (
	// PodGroupAnnotation names the pod's PodGroup in the pod's namespace.
	PodGroupAnnotation = Prefix + "pod-group"
	// MinMemberAnnotation is the gang's minimum member count the adapter computed.
	MinMemberAnnotation = Prefix + "min-member"
	// SubGroupAnnotation names the pod's sub-group within its gang.
	SubGroupAnnotation = Prefix + "sub-group"
	// SubGroupsAnnotation lists the gang's sub-groups and the minimum of each, as the adapter
	// computed them at admission ("head=1,workers=3"; FormatSubGroups, ParseSubGroups): the
	// scheduler copies them to the PodGroup it creates, so that a gang never starts without,
	// say, its Ray head. Absent when the gang has no sub-groups.
	SubGroupsAnnotation = Prefix + "sub-groups"
	// WorkloadKindAnnotation is the adapter's name for the workload: pipeline-step, workflow-step,
	// ray, notebook, training, inference, or pod (WorkloadKinds). A user's WorkloadKindLabel,
	// which has the same key, overrides the adapter's.
	WorkloadKindAnnotation = Prefix + "workload-kind"
	// FrameworkLabel is the framework that made the pod (kubeflow-pipelines, argo, ray,
	// jupyterhub, pytorchjob, jobset, none); dashboards group by it.
	FrameworkLabel = Prefix + "framework"
	// ManagedLabel marks a pod the webhook handed to fairway ("true").
	ManagedLabel = Prefix + "managed"
	// RecreatableAnnotation is "true" when the pod's controller makes it again after an
	// eviction without losing work (a retried Argo step, a Ray worker, a restarted training
	// replica), "false" when an eviction loses it for good (a Ray head, an Argo step without a
	// retry on errors). The adapter writes it at admission from the owner objects it reads; see
	// PodRecreatable for pods without it.
	RecreatableAnnotation = Prefix + "recreatable"
)

// Keys written by the scheduler runtime.
const (
	// GPUIndexAnnotation is the index (on its node) of the GPU a fractional pod was placed on.
	GPUIndexAnnotation = Prefix + "gpu-index"
	// GPUUUIDAnnotation is the UUID of that GPU, once the gpu-agent has reported it.
	GPUUUIDAnnotation = Prefix + "gpu-uuid"
	// GPUGroupLabel ties fractional pods to the reservation pod that holds their GPU.
	GPUGroupLabel = Prefix + "gpu-group"
	// ReservationLabel marks a reservation pod ("true").
	ReservationLabel = Prefix + "reservation"
	// ReservationSlotAnnotation is the GPU slot (the scheduler's numbering of a node's GPUs) a
	// reservation pod holds a GPU for. It differs from GPUIndexAnnotation, which the gpu-agent
	// writes on the same pod with the index of the physical GPU the kubelet gave it.
	ReservationSlotAnnotation = Prefix + "gpu-slot"
	// GPUConfigMapAnnotation named the ConfigMap (in the pod's namespace) from which webhooks
	// before issue 35 wired NVIDIA_VISIBLE_DEVICES into a fractional pod's GPU container. Nothing
	// writes or reads it any more: a share's GPU reaches the container through the gpu-agent's
	// device plugin (ResourceGPUShare). It stays an admission key so that a pod admitted
	// before the upgrade keeps its seal and cannot be pointed at another ConfigMap.
	GPUConfigMapAnnotation = Prefix + "gpu-configmap"
	// LoanAnnotation is "true" on a pod the scheduler placed on loan on an idle interactive
	// pod's GPU; written with GPUIndexAnnotation at bind time.
	LoanAnnotation = Prefix + "loan"
)

// Pod condition types.
const (
	// GPUIdleCondition is set by the gpu-agent on interactive pods: True when the pod's GPU work
	// has been below the idle threshold for the configured time, False at the first sign of work.
	// Its lastTransitionTime keeps only seconds; GPUIdleObservedAnnotation has the time of the
	// same transition to the microsecond (read both with GPUIdleObserved).
	GPUIdleCondition = "fairway.dev/GPUIdle"
	// GPUSwapCondition is set by the gpu-agent on an interactive pod whose GPU memory it moved
	// to host RAM (docs/idle-lending.md#swap): True while the memory is on the host (reason
	// SwappedOut, or RestoreFailed when it could not be brought back), False once restored. It is
	// for people; the scheduler reads GPUSwapAnnotation.
	GPUSwapCondition = "fairway.dev/GPUMemorySwapped"
)

// Pod annotations written by the gpu-agent.
const (
	// IdleGPUMemoryAnnotation is the GPU memory (MiB) in use on an interactive pod's GPU when the
	// pod last went idle, not counting the memory of preemptible pods (borrowers): what stays
	// resident while the GPU is lent. The agent writes it just before it sets GPUIdleCondition
	// True; memory growth wakes the pod, so it holds while the pod is idle.
	IdleGPUMemoryAnnotation = Prefix + "idle-gpu-memory-used"
	// GPUIdleObservedAnnotation is when the gpu-agent observed the transition GPUIdleCondition
	// last recorded, in GPUIdleObservedFormat (FormatGPUIdleObserved): the scheduler times how
	// fast a lent GPU goes back from the moment the agent saw the work, finer than the
	// condition's lastTransitionTime (whole seconds). The agent writes it just before the
	// condition; GPUIdleObserved reads the two together.
	GPUIdleObservedAnnotation = Prefix + "gpu-idle-observed"
	// GPUSwapAnnotation is the gpu-agent's swap state of an interactive pod's GPU memory, a
	// GPUSwap as JSON (read with GPUSwapOf, written with FormatGPUSwap): whether it may be moved
	// to host RAM, whether it was, and how long bringing it back takes.
	GPUSwapAnnotation = Prefix + "gpu-swap"
)

// Pod annotations written by the scheduler for the gpu-agent.
const (
	// GPUSwapRequestAnnotation asks the gpu-agent to move an idle interactive pod's GPU memory to
	// host RAM, so that a waiting borrower gets the whole GPU. Its value is the pod's idle
	// observation (FormatGPUSwapRequest of GPUIdleObserved): a request holds only for the idle
	// period it was made in (GPUSwapRequested), so a stale one never swaps a pod that woke and
	// went idle again.
	GPUSwapRequestAnnotation = Prefix + "gpu-swap-request"
)

// Node labels and annotations published by the gpu-agent.
const (
	// GPUTypeLabel is the node's GPU type (node pool), e.g. H100; queues quota per type by it.
	GPUTypeLabel = Prefix + "gpu-type"
	// GPUProductLabel is the full NVML product name with spaces replaced by dashes.
	GPUProductLabel = Prefix + "gpu-product"
	// GPUMemoryLabel is the memory of one GPU in MiB.
	GPUMemoryLabel = Prefix + "gpu-memory"
	// GPUCountLabel is the number of GPUs on the node.
	GPUCountLabel = Prefix + "gpu-count"
	// NVLinkDomainLabel is the node's NVLink domain (fabric clique); nodes that share a value are
	// one topology domain.
	NVLinkDomainLabel = Prefix + "nvlink-domain"
	// GPUInventoryAnnotation holds the node's per-GPU inventory as JSON (index, UUID, memory).
	GPUInventoryAnnotation = Prefix + "gpu-inventory"
)

// ResourceGPU is the extended resource of whole NVIDIA GPUs.
const ResourceGPU = "nvidia.com/gpu"

// Node labels NVIDIA's GPU feature discovery writes from the device plugin's sharing config. The
// gpu-agent reads them to tell a time-sliced node (GPUInventory.Replicas); nothing else does.
const (
	// NVIDIAReplicasLabel is how many devices the device plugin advertises per GPU ("1" when
	// it does not share them).
	NVIDIAReplicasLabel = "nvidia.com/gpu.replicas"
	// NVIDIASharingStrategyLabel is how those replicas share their GPU: "time-slicing", "mps"
	// or "none".
	NVIDIASharingStrategyLabel = "nvidia.com/gpu.sharing-strategy"
)

// NonPreemptiblePriority is the lowest priority value that is non-preemptible by default, as in
// Run:ai and KAI-Scheduler: training and pipeline steps run below it, notebooks and inference at
// or above it.
const NonPreemptiblePriority = 100

// Default PriorityClasses installed by the chart.
const (
	PriorityClassTraining    = "fairway-training"    // 50, preemptible
	PriorityClassInteractive = "fairway-interactive" // 100, non-preemptible (notebooks, builds)
	PriorityClassInference   = "fairway-inference"   // 125, non-preemptible
)
