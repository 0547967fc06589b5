package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Queue is a node of the quota tree: a department (a queue with children) or a project (a leaf
// queue). Only leaf queues take work; pods reach a leaf through the namespaces it serves.
//
// Quotas are per resource. The guaranteed quota is given on demand; above it a queue borrows idle
// capacity in proportion to its over-quota weight, up to its limit, and borrowed capacity is
// reclaimed when a queue below its fair share asks for it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=fq,categories=fairway
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="GPU Quota",type=string,JSONPath=`.spec.resources.gpu.quota`
// +kubebuilder:printcolumn:name="GPU Limit",type=string,JSONPath=`.spec.resources.gpu.limit`
// +kubebuilder:printcolumn:name="GPU Fair Share",type=string,JSONPath=`.status.fairShare.gpu`
// +kubebuilder:printcolumn:name="GPU Allocated",type=string,JSONPath=`.status.allocated.gpu`
// +kubebuilder:printcolumn:name="GPU Requested",type=string,JSONPath=`.status.requested.gpu`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",message="spec.parent: a queue cannot be its own parent"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.namespaceSelector) || (has(self.spec.namespaceSelector.matchLabels) && size(self.spec.namespaceSelector.matchLabels) > 0) || (has(self.spec.namespaceSelector.matchExpressions) && size(self.spec.namespaceSelector.matchExpressions) > 0)",message="spec.namespaceSelector: an empty selector would select every namespace; set matchLabels or matchExpressions (for Kubeflow profiles: matchLabels: {app.kubernetes.io/part-of: kubeflow-profile})"
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec QueueSpec `json:"spec,omitempty"`
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueSpec is what an administrator promises a department or project.
type QueueSpec struct {
	// Parent is the name of the parent queue (a department). Empty for a top-level queue. Trees
	// may be of any depth; a queue whose parent does not exist is reported in its conditions and
	// takes no work until the parent appears.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Parent string `json:"parent,omitempty"`

	// Namespaces lists the namespaces whose pods are scheduled through this queue. Only leaf queues
	// serve namespaces; a namespace must be served by at most one queue. The webhook refuses a pod
	// that names a queue which does not serve the pod's namespace, and the scheduler does not
	// place it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects more namespaces to serve by their labels, alongside Namespaces:
	// for namespaces made on demand, such as Kubeflow profiles (matchLabels:
	// {app.kubernetes.io/part-of: kubeflow-profile}). A namespace joins or leaves the queue as its
	// labels change. It must not be empty (an empty selector would select every namespace), and
	// like Namespaces it never selects fairway's own namespace or kube-system.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Admit says which pods of the namespaces this queue serves the webhook hands to fairway; the
	// rest keep their own scheduler (kube-scheduler) and count against no quota, so a namespace
	// that also runs a framework's services (JupyterHub's hub and proxy, Kubeflow Pipelines'
	// ml-pipeline, MySQL, MinIO) can be served without those becoming preemptible fairway pods.
	//
	//   - Frameworks (the default): pods of the frameworks fairway knows (Argo and Kubeflow
	//     Pipelines steps, Ray clusters, notebooks, PyTorchJobs, JobSets), and any other pod that
	//     asks for a GPU (nvidia.com/gpu, a GPU-share annotation) or for fairway (a fairway.dev/
	//     label or annotation, a queue label, spec.schedulerName: fairway).
	//   - GPU: only pods that ask for a GPU or for fairway, plus every pod of a multi-pod framework
	//     gang (a Ray head goes with its GPU workers: a gang is placed whole or not at all).
	//   - All: every pod but DaemonSet pods and the frameworks' own helpers.
	//
	// Whatever the value, Kubeflow Pipelines' drivers and importers and Argo's agent and
	// artifact-GC pods are left to kube-scheduler: they are short control pods that hold no GPU,
	// and queueing or preempting them behind GPU work would stall the pipeline they drive, so they
	// count against no quota. A pod with a constraint fairway does not evaluate (required
	// inter-pod affinity or anti-affinity, a DoNotSchedule topology spread constraint, a dynamic
	// resource claim) is left to kube-scheduler too, and its creator sees the warning "fairway:
	// pod uses <constraint>, which fairway does not evaluate, so it is left to scheduler
	// <name>: ..."; only a pod that names fairway's scheduler itself is still taken (and then
	// reported UnsupportedConstraint). A pod of these namespaces that asks for nvidia.com/gpu is
	// refused unless fairway's scheduler places it (constraints it does not evaluate, opted out,
	// created on a node, a DaemonSet's, another scheduler's): its GPUs would be charged to no
	// queue. When several queues serve one namespace, the widest of their values applies.
	// +optional
	// +kubebuilder:default=Frameworks
	Admit AdmitPolicy `json:"admit,omitempty"`

	// Resources holds the guaranteed quota, over-quota weight and limit for GPUs, CPU and memory.
	// A resource left out has no guarantee, weight 1 and no limit.
	// +optional
	Resources QueueResources `json:"resources,omitempty"`

	// GPUTypes refines the GPU quota per GPU type (node pool). A node's GPU type is its
	// fairway.dev/gpu-type label (set by the gpu-agent from the product name unless an
	// administrator sets it). GPUs used on a type listed here count against that entry as well as
	// against resources.gpu; types not listed count against resources.gpu only. At most 7 types:
	// the API server checks limit >= quota on every entry, and its CEL cost budget allows that
	// check on no more entries than this.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=7
	GPUTypes []GPUTypeQuota `json:"gpuTypes,omitempty"`

	// Policy says what the pods of the queue (and of its children, which inherit it) may ask
	// for and what they get when they ask for nothing: GPU types, GPU per pod, a default GPU
	// request, borrowing, per kind of work. The webhook applies its defaults and refuses pods
	// that break it; the scheduler places pods only on the GPU types it allows. See QueuePolicy.
	// +optional
	Policy *QueuePolicy `json:"policy,omitempty"`

	// PipelineAdmission says how the runs of Argo Workflows and Kubeflow Pipelines in the
	// namespaces this queue serves are admitted: PerPod (each step pod on its own, as it comes),
	// Peak (a run waits, suspended before its first pod, until the most GPUs its steps may hold
	// at once fits the queue) or Stages (a run starts at once, and each GPU stage's capacity is
	// held when the steps before it are about to finish); see docs/pipeline-admission.md. A
	// queue that leaves it out takes the value of the nearest ancestor that sets it, else PerPod.
	// +optional
	PipelineAdmission PipelineAdmission `json:"pipelineAdmission,omitempty"`

	// Priority orders sibling queues when capacity above their guarantees is divided: higher
	// priority queues are satisfied first, then weights divide what is left within one priority.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// PreemptMinRuntime protects a job of this queue from preemption by higher-priority work of the
	// same queue until it has run this long. Unset means no protection.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	PreemptMinRuntime *metav1.Duration `json:"preemptMinRuntime,omitempty"`

	// ReclaimMinRuntime protects a job of this queue from reclaim by other queues until it has run
	// this long. Unset means no protection.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	ReclaimMinRuntime *metav1.Duration `json:"reclaimMinRuntime,omitempty"`

	// MaxEvictionGracePeriod caps the grace period of this queue's pods when fairway evicts them
	// (reclaim, preemption, consolidation, a stale gang): a pod gets its own
	// terminationGracePeriodSeconds, at most this long. Unset means no cap; a queue that leaves it
	// out takes the cap of the nearest ancestor that sets it. Returning a GPU lent by an idle
	// notebook keeps the scheduler's own short grace (--loan-return-grace-period).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="maxEvictionGracePeriod must not be negative (leave it out for no cap)"
	MaxEvictionGracePeriod *metav1.Duration `json:"maxEvictionGracePeriod,omitempty"`

	// Reclaim says how this queue takes back its guarantee from queues that borrow. A field left
	// out takes the value of the nearest ancestor that sets it, else its default.
	// +optional
	Reclaim *QueueReclaim `json:"reclaim,omitempty"`

	// IdleLending says whether this queue's interactive pods lend their GPU while idle, and
	// whether its preemptible pods borrow such GPUs (see docs/idle-lending.md). A field left
	// out takes the value of the nearest ancestor that sets it, else its default.
	// +optional
	IdleLending *IdleLending `json:"idleLending,omitempty"`
}

// QueueReclaim is how a queue takes back its guarantee.
type QueueReclaim struct {
	// BudgetTimeout bounds how long PodDisruptionBudgets of other queues' over-quota (borrowed)
	// pods may delay a reclaim that delivers this queue its guaranteed quota: borrowed capacity is
	// a loan, and a budget may ask for patience, never keep it. Once a gang of this queue, within
	// its guarantee, has waited this long since such a budget first held it up, fairway deletes
	// the borrowed pods it needs with their own grace period, and their DisruptionTarget
	// condition names the budget it overrode. Pods within their own queue's guarantee keep the
	// full protection of their budgets. Defaults to 60s; 0 overrides at once.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="budgetTimeout must not be negative"
	BudgetTimeout *metav1.Duration `json:"budgetTimeout,omitempty"`
}

// IdleLending is a queue's policy for idle GPU lending: a GPU whose shares are held only by idle
// interactive pods (notebooks) runs preemptible work on loan until one of them does GPU work
// again, when every loan on that GPU is evicted at once.
type IdleLending struct {
	// Lend lets the GPUs this queue's interactive pods hold be lent out while every pod holding
	// the GPU is idle (the gpu-agent's fairway.dev/GPUIdle condition). Their memory stays
	// resident: a loan gets at most the memory the GPU has free. Defaults to false: lending
	// changes what a notebook's user sees (a wake-up of a second or two during which the loan
	// still runs, and memory beyond what is free only after the loan has gone), so the
	// administrator of the notebooks' queue opts in.
	// +optional
	Lend *bool `json:"lend,omitempty"`

	// Borrow says which of this queue's preemptible pods that ask for a GPU share
	// (fairway.dev/gpu-fraction or fairway.dev/gpu-memory) may run on loan on an idle GPU when
	// no GPU has room for them: OptIn (the default) lets those annotated
	// fairway.dev/borrow-idle-gpu: "true"; Always lets every one; Never lets none.
	// +optional
	Borrow *BorrowPolicy `json:"borrow,omitempty"`

	// MinIdleTime is how long the pods holding a GPU must have been idle before it is lent, on
	// top of the gpu-agent's --idle-after (which makes them idle in the first place). It applies
	// to the lending queue's pods. Defaults to 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	MinIdleTime *metav1.Duration `json:"minIdleTime,omitempty"`

	// MaxLoansPerGPU caps the loans one lent GPU runs at a time (the lending queue's setting;
	// the lowest of the holders' queues when several share the GPU). Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxLoansPerGPU *int32 `json:"maxLoansPerGPU,omitempty"`
}

// BorrowPolicy says which preemptible pods of a queue may borrow idle GPUs.
// +kubebuilder:validation:Enum=OptIn;Always;Never
type BorrowPolicy string

// Borrow policies.
const (
	// BorrowOptIn lets pods annotated fairway.dev/borrow-idle-gpu: "true" borrow.
	BorrowOptIn BorrowPolicy = "OptIn"
	// BorrowAlways lets every preemptible pod that asks for a GPU share borrow.
	BorrowAlways BorrowPolicy = "Always"
	// BorrowNever lets no pod borrow.
	BorrowNever BorrowPolicy = "Never"
)

// AdmitPolicy says which pods of a queue's namespaces fairway takes (QueueSpec.Admit).
// +kubebuilder:validation:Enum=Frameworks;GPU;All
type AdmitPolicy string

// Admit policies, from the narrowest to the widest.
const (
	// AdmitGPU takes pods that ask for a GPU or for fairway, and the gangs they belong to.
	AdmitGPU AdmitPolicy = "GPU"
	// AdmitFrameworks takes the pods of known frameworks, and those AdmitGPU takes.
	AdmitFrameworks AdmitPolicy = "Frameworks"
	// AdmitAll takes every pod but DaemonSet pods and framework helpers.
	AdmitAll AdmitPolicy = "All"
)

// DefaultAdmitPolicy applies to a queue whose spec.admit is empty (the CRD defaults it; a queue
// read from a client that skipped defaulting still gets it).
const DefaultAdmitPolicy = AdmitFrameworks

// AdmitPolicies lists the valid values, narrowest first.
var AdmitPolicies = []AdmitPolicy{AdmitGPU, AdmitFrameworks, AdmitAll}

// Effective is p, or DefaultAdmitPolicy when p is empty or unknown.
func (p AdmitPolicy) Effective() AdmitPolicy {
	switch p {
	case AdmitGPU, AdmitFrameworks, AdmitAll:
		return p
	}
	return DefaultAdmitPolicy
}

// Widest returns the policy that takes the most pods of the given ones (effective values);
// DefaultAdmitPolicy when there are none.
func Widest(policies ...AdmitPolicy) AdmitPolicy {
	if len(policies) == 0 {
		return DefaultAdmitPolicy
	}
	rank := func(p AdmitPolicy) int {
		for i, q := range AdmitPolicies {
			if q == p.Effective() {
				return i
			}
		}
		return 0
	}
	w := policies[0].Effective()
	for _, p := range policies[1:] {
		if rank(p) > rank(w) {
			w = p.Effective()
		}
	}
	return w
}

// QueueResources names the quota of each resource a queue accounts for.
type QueueResources struct {
	// GPU is counted in devices; fractional GPUs count their share (0.5 counts half a GPU).
	// +optional
	GPU *ResourceQuota `json:"gpu,omitempty"`
	// CPU is counted in cores (1 or 1000m).
	// +optional
	CPU *ResourceQuota `json:"cpu,omitempty"`
	// Memory is counted in bytes (64Gi).
	// +optional
	Memory *ResourceQuota `json:"memory,omitempty"`
}

// ResourceQuota is one resource's share of the cluster for a queue.
//
// +kubebuilder:validation:XValidation:rule="!has(self.limit) || !has(self.quota) || !quantity(string(self.limit)).isLessThan(quantity(string(self.quota)))",message="limit must be at least quota (leave limit out for no limit)",fieldPath=".limit"
type ResourceQuota struct {
	// Quota is the guaranteed amount, given on demand. Defaults to 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="quota must be at least 0"
	Quota *resource.Quantity `json:"quota,omitempty"`

	// OverQuotaWeight divides capacity above the guarantees among queues that want more: a queue
	// with weight 2 gets twice the surplus of a sibling with weight 1. Weight 0 means the queue
	// borrows only what no sibling with a positive weight wants. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	OverQuotaWeight *int32 `json:"overQuotaWeight,omitempty"`

	// Limit caps what the queue may hold, guaranteed and borrowed together. Leave it out for no
	// limit. It must be at least Quota.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="limit must be at least 0"
	Limit *resource.Quantity `json:"limit,omitempty"`
}

// GPUTypeQuota is a queue's GPU quota on one GPU type (node pool).
//
// +kubebuilder:validation:XValidation:rule="!has(self.limit) || !has(self.quota) || !quantity(string(self.limit)).isLessThan(quantity(string(self.quota)))",message="limit must be at least quota (leave limit out for no limit)",fieldPath=".limit"
type GPUTypeQuota struct {
	// Name is the GPU type, matched against the node label fairway.dev/gpu-type (for example
	// H100, A100, L4).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Quota is the guaranteed number of GPUs of this type. Defaults to 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="quota must be at least 0"
	Quota *resource.Quantity `json:"quota,omitempty"`

	// OverQuotaWeight divides spare GPUs of this type; see ResourceQuota. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	OverQuotaWeight *int32 `json:"overQuotaWeight,omitempty"`

	// Limit caps the GPUs of this type the queue may hold. Leave it out for no limit.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="limit must be at least 0"
	Limit *resource.Quantity `json:"limit,omitempty"`
}

// QueueStatus is the scheduler's view of a queue, refreshed every few seconds. Resource names are
// gpu, cpu and memory, and gpu/<type> for each GPU type in use.
type QueueStatus struct {
	// Allocated is what the queue's running and bound pods hold.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// AllocatedNonPreemptible is the part of Allocated that cannot be preempted or reclaimed.
	// +optional
	AllocatedNonPreemptible corev1.ResourceList `json:"allocatedNonPreemptible,omitempty"`
	// Requested is Allocated plus what the queue's pending pods ask for.
	// +optional
	Requested corev1.ResourceList `json:"requested,omitempty"`
	// FairShare is what the queue is entitled to now: its guarantee (capped by its demand) plus
	// its part of the idle capacity. Allocated above FairShare is reclaimable.
	// +optional
	FairShare corev1.ResourceList `json:"fairShare,omitempty"`
	// Borrowed is Allocated above the guaranteed quota, per resource. Loans always count here.
	// +optional
	Borrowed corev1.ResourceList `json:"borrowed,omitempty"`
	// Loaned is the part of Allocated (and of Borrowed) that runs on loan on the idle GPUs of
	// interactive pods: it takes nothing from the queue's guarantee or fair share, counts
	// against its limits, and goes back the moment a lender does GPU work again.
	// +optional
	Loaned corev1.ResourceList `json:"loaned,omitempty"`
	// PendingPods counts pods of the queue that wait to be scheduled.
	// +optional
	PendingPods int32 `json:"pendingPods,omitempty"`
	// ChildQueues lists the queues whose parent is this queue.
	// +optional
	ChildQueues []string `json:"childQueues,omitempty"`
	// Usage is the queue's usage history, kept when the scheduler runs with a usage half-life
	// (--fair-share-usage-half-life): fair share over time divides the capacity above guarantees
	// against queues that used more than their weight entitles them to. It lives here so that a
	// restarted scheduler, or a new leader, goes on from it.
	// +optional
	Usage *QueueUsage `json:"usage,omitempty"`
	// Conditions: Ready is False with a reason when the queue cannot take work (its parent is
	// missing, it has children and also serves namespaces, a namespace is served twice).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QueueUsage is a queue's decayed usage and what it is measured against (docs/fair-share.md).
// Each hour of use counts 2^(-age/halfLife): with a 24h half-life, a GPU-hour of yesterday counts
// half a GPU-hour of now.
type QueueUsage struct {
	// HalfLife is the half-life the history was kept with.
	HalfLife metav1.Duration `json:"halfLife"`
	// Used is the queue's decayed usage in resource-hours: gpu in GPU-hours, cpu in core-hours,
	// memory in byte-hours. A parent's is the sum of its children's.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// OverQuota is the part of Used above the queue's guaranteed quota: what fair share over time
	// weighs (use within a guarantee costs nothing).
	// +optional
	OverQuota corev1.ResourceList `json:"overQuota,omitempty"`
	// Capacity is what the cluster could hand out, integrated and decayed the same way. Used
	// over Capacity is the fraction of the cluster the queue had over the window; OverQuota over
	// Capacity is its over-quota usage share.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// ObservedTime is when the scheduler computed Used and Capacity.
	ObservedTime metav1.Time `json:"observedTime"`
}

// QueueList is a list of Queues.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
