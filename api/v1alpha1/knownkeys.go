package v1alpha1

// The keys a pod may carry, in one place, so that the webhook can tell a typo from a key fairway
// reads: a misspelt key (fairway.dev/gpu-fracton) is otherwise accepted silently and the pod runs
// without the GPU share it asked for. A test (knownkeys_test.go) checks that every fairway.dev/
// constant of this package is listed here or in OtherKeys, so a new key cannot be forgotten.
var (
	// PodLabelKeys are the labels fairway reads or writes on pods: the ones users set, then the
	// ones fairway's components write.
	PodLabelKeys = []string{
		QueueLabel, PreemptibilityLabel, IgnoreLabel, WorkloadKindLabel,
		ManagedLabel, FrameworkLabel, GPUGroupLabel, ReservationLabel,
	}
	// PodAnnotationKeys are the annotations fairway reads or writes on pods: the ones users set,
	// then the ones the webhook, the scheduler and the gpu-agent write.
	PodAnnotationKeys = []string{
		GPUFractionAnnotation, GPUMemoryAnnotation, GPUContainerAnnotation,
		TopologyRequiredAnnotation, TopologyPreferredAnnotation, BorrowIdleGPUAnnotation,
		GangAnnotation, ExpectedDurationAnnotation,
		PodGroupAnnotation, MinMemberAnnotation, SubGroupAnnotation, SubGroupsAnnotation,
		WorkloadKindAnnotation, RecreatableAnnotation, GPUConfigMapAnnotation,
		GPUIndexAnnotation, GPUUUIDAnnotation, ReservationSlotAnnotation, LoanAnnotation,
		IdleGPUMemoryAnnotation, GPUIdleObservedAnnotation,
	}
	// AliasLabelKeys and AliasAnnotationKeys are the Run:ai and KAI-Scheduler keys fairway honours
	// on pods. They have no fairway.dev/ prefix, so only their near-misses can be told apart from
	// other tools' keys.
	AliasLabelKeys      = []string{RunAIQueueLabel, KAIQueueLabel}
	AliasAnnotationKeys = []string{GPUFractionAliasAnnotation, GPUMemoryAliasAnnotation, GPUContainerAliasAnnotation}
	// GPUShareKeys are the pod annotations that ask for (or direct) a share of one GPU: a typo in
	// one of them leaves the pod without the share it asked for.
	GPUShareKeys = []string{
		GPUFractionAnnotation, GPUMemoryAnnotation, GPUContainerAnnotation,
		GPUFractionAliasAnnotation, GPUMemoryAliasAnnotation, GPUContainerAliasAnnotation,
	}
)

// OtherKeys are fairway.dev/ keys of objects other than pods, with what they belong to: on a
// pod they do nothing, and the webhook says where they go rather than suggesting a pod key.
// GPUMemoryLabel is not here: its key is GPUMemoryAnnotation's, a pod key.
var OtherKeys = map[string]string{
	GPUTypeLabel:                 "a node label the gpu-agent writes",
	GPUProductLabel:              "a node label the gpu-agent writes",
	GPUCountLabel:                "a node label the gpu-agent writes",
	NVLinkDomainLabel:            "a node label the gpu-agent writes",
	GPUInventoryAnnotation:       "a node annotation the gpu-agent writes",
	ReservedTaintKey:             "a node taint the scheduler sets",
	DeviceClassResourceLabel:     "a DeviceClass label",
	MPSVolumeAttribute:           "a CSI volume attribute",
	MPSSharedMemorySizeAttribute: "a CSI volume attribute",
	GPUIdleCondition:             "a pod condition type the gpu-agent sets",
	RunAdmissionAnnotation:       "a Workflow annotation fairway writes",
	RunReasonAnnotation:          "a Workflow annotation fairway writes",
	RunMessageAnnotation:         "a Workflow annotation fairway writes",
	RunQueueAnnotation:           "a Workflow annotation fairway writes",
	RunPeakAnnotation:            "a Workflow annotation fairway writes",
	RunTransitionAnnotation:      "a Workflow annotation fairway writes",
}
