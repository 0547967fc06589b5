package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

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
		WorkloadKindAnnotation, RecreatableAnnotation, GPUConfigMapAnnotation, AdmittedAnnotation,
		GPUIndexAnnotation, GPUUUIDAnnotation, ReservationSlotAnnotation, LoanAnnotation,
		IdleGPUMemoryAnnotation, GPUIdleObservedAnnotation, GPUSwapAnnotation, GPUSwapRequestAnnotation,
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
	string(ResourceGPUShare):     "an extended resource the webhook sets on a share's GPU container, not a label or annotation",
	GPUTypeLabel:                 "a node label the gpu-agent writes",
	GPUProductLabel:              "a node label the gpu-agent writes",
	GPUCountLabel:                "a node label the gpu-agent writes",
	NVLinkDomainLabel:            "a node label the gpu-agent writes",
	GPUInventoryAnnotation:       "a node annotation the gpu-agent writes",
	HoldTaintKey:                 "a node taint the scheduler sets",
	RetiredHoldTaintKey:          "a node taint older schedulers set (now fairway.dev/held)",
	DeviceClassResourceLabel:     "a DeviceClass label",
	MPSVolumeAttribute:           "a CSI volume attribute",
	MPSSharedMemorySizeAttribute: "a CSI volume attribute",
	GPUIdleCondition:             "a pod condition type the gpu-agent sets",
	GPUSwapCondition:             "a pod condition type the gpu-agent sets",
	RunAdmissionAnnotation:       "a Workflow annotation fairway writes",
	RunReasonAnnotation:          "a Workflow annotation fairway writes",
	RunMessageAnnotation:         "a Workflow annotation fairway writes",
	RunQueueAnnotation:           "a Workflow annotation fairway writes",
	RunPeakAnnotation:            "a Workflow annotation fairway writes",
	RunTransitionAnnotation:      "a Workflow annotation fairway writes",
}

// KeyProblem is a label or annotation of a pod that looks like one of fairway's but is not read
// as the pod's author meant: an unknown fairway.dev/ key, a near-miss of a Run:ai/KAI key, a key
// in the wrong map, or a key of another object.
// +kubebuilder:object:generate=false
type KeyProblem struct {
	Key string
	// Message says what is wrong and, for a typo, names the key meant: "unknown annotation key
	// fairway.dev/gpu-fracton; did you mean fairway.dev/gpu-fraction?".
	Message string
	// Meant is the known key that Key misspells, "" when there is none.
	Meant string
}

// PodKeyProblems checks a pod's labels and annotations against the keys of this file, in sorted
// order of the keys, labels first. The webhook warns with them (or refuses the pod); `fairway
// why` repeats them for a pod that asks for no GPU.
func PodKeyProblems(labels, annotations map[string]string) []KeyProblem {
	allLabels := slices.Concat(PodLabelKeys, AliasLabelKeys)
	allAnnotations := slices.Concat(PodAnnotationKeys, AliasAnnotationKeys)
	out := keyProblems(labels, "label", PodLabelKeys, AliasLabelKeys, allAnnotations, "annotation")
	return append(out, keyProblems(annotations, "annotation", PodAnnotationKeys, AliasAnnotationKeys, allLabels, "label")...)
}

func keyProblems(m map[string]string, what string, keys, aliases, otherMap []string, otherWhat string) []KeyProblem {
	var out []KeyProblem
	sorted := make([]string, 0, len(m))
	for k := range m {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		if slices.Contains(keys, k) || slices.Contains(aliases, k) {
			continue
		}
		switch {
		case slices.Contains(otherMap, k):
			out = append(out, KeyProblem{Key: k, Meant: k, Message: fmt.Sprintf("%s is %s, not %s: fairway does not read it here; move it to metadata.%ss", k, article(otherWhat), article(what), otherWhat)})
		case strings.HasPrefix(k, Prefix):
			if where, ok := OtherKeys[k]; ok {
				out = append(out, KeyProblem{Key: k, Message: fmt.Sprintf("%s %s is %s; on a pod it does nothing", what, k, where)})
				continue
			}
			p := KeyProblem{Key: k, Meant: closestKey(k, keys)}
			if p.Meant != "" {
				p.Message = fmt.Sprintf("unknown %s key %s; did you mean %s?", what, k, p.Meant)
			} else {
				p.Message = fmt.Sprintf("unknown %s key %s: fairway neither reads nor writes it", what, k)
			}
			out = append(out, p)
		default:
			if near := nearAlias(k, aliases); near != "" {
				out = append(out, KeyProblem{Key: k, Meant: near, Message: fmt.Sprintf("unknown %s key %s; did you mean %s?", what, k, near)})
			}
		}
	}
	return out
}

// closestKey is the key of known nearest to key, if it is near enough to be a typo of it: an
// edit distance (insertions, deletions, substitutions, swaps of neighbours) of at most a third of
// the known key's name after the prefix, and at least 1. "" when none is.
func closestKey(key string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		limit := max(1, len(strings.TrimPrefix(k, Prefix))/3)
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = k, d
		}
	}
	return best
}

// nearAlias is the Run:ai/KAI key that key misspells, or "". Other tools' keys have no prefix to
// tell them apart, so only a change of case, one edit (two for keys of 12 bytes or more) and the
// same first letter count: cpu-memory is not a typo of gpu-memory. Such a key gets a warning,
// never a refusal unless the pod asks for a GPU share.
func nearAlias(key string, aliases []string) string {
	lower := strings.ToLower(key)
	for _, a := range aliases {
		limit := 1
		if len(a) >= 12 {
			limit = 2
		}
		if key != "" && key != a && lower[:1] == a[:1] && editDistance(lower, a) <= limit {
			return a
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance of a and b: the fewest insertions,
// deletions, substitutions and swaps of adjacent bytes that turn a into b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func article(noun string) string {
	if strings.IndexAny(noun[:1], "aeiou") == 0 {
		return "an " + noun
	}
	return "a " + noun
}
