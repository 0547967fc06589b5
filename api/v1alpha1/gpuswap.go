package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GPUSwapState is where an idle interactive pod's GPU memory is (GPUSwapAnnotation).
type GPUSwapState string

const (
	// GPUSwapEligible: the pod is idle, its GPU processes can be checkpointed and the node's
	// host RAM can take their Bytes. The scheduler may ask for a swap (GPUSwapRequestAnnotation).
	GPUSwapEligible GPUSwapState = "Eligible"
	// GPUSwapIneligible: the pod's memory cannot be swapped (Reason says why: an MPS client, a
	// process the driver refused to checkpoint, too little host RAM); its GPU is lent only the
	// memory it leaves free.
	GPUSwapIneligible GPUSwapState = "Ineligible"
	// GPUSwappedOut: Bytes of the pod's GPU memory are on the host, its processes are locked
	// (blocked at their next CUDA call), and its GPU may be lent in full.
	GPUSwappedOut GPUSwapState = "SwappedOut"
	// GPUSwapRestoreFailed: the memory could not be brought back (Reason). The GPU is never lent
	// while a pod of it is in this state: the pod's user must see it and restart.
	GPUSwapRestoreFailed GPUSwapState = "RestoreFailed"
)

// GPUSwap is the value of GPUSwapAnnotation, written by the gpu-agent only.
// +kubebuilder:object:generate=false
type GPUSwap struct {
	State GPUSwapState `json:"state"`
	// Bytes is, when Eligible, what the pod's processes hold on its GPU (what a swap would move);
	// when SwappedOut or RestoreFailed, what was moved to the host.
	Bytes int64 `json:"bytes,omitempty"`
	// SwapInMillis is, when SwappedOut, how long the agent expects bringing Bytes back to take (at
	// the rate its swap-out measured): the scheduler takes it from the loans' grace period, so
	// that the owner's time back stays within the loan-return budget.
	SwapInMillis int64 `json:"swapInMillis,omitempty"`
	// Reason says why, for Ineligible and RestoreFailed.
	Reason string `json:"reason,omitempty"`
	// PIDs are, when Eligible, SwappedOut or RestoreFailed, the pod's GPU processes (host PIDs)
	// the swap covers: a checkpointed process holds nothing on its GPU, so NVML no longer lists
	// it, and an agent that restarts finds what to bring back here. The scheduler ignores them.
	PIDs []int `json:"pids,omitempty"`
}

// Equal reports whether s and o are the same state, PIDs included.
func (s GPUSwap) Equal(o GPUSwap) bool {
	return s.State == o.State && s.Bytes == o.Bytes && s.SwapInMillis == o.SwapInMillis && s.Reason == o.Reason &&
		slices.Equal(s.PIDs, o.PIDs)
}

// Validate says which field of s is wrong.
func (s GPUSwap) Validate() error {
	switch s.State {
	case GPUSwapEligible, GPUSwapIneligible, GPUSwappedOut, GPUSwapRestoreFailed:
	default:
		return fmt.Errorf("state %q must be one of %s, %s, %s, %s", s.State, GPUSwapEligible, GPUSwapIneligible, GPUSwappedOut, GPUSwapRestoreFailed)
	}
	if s.Bytes < 0 {
		return fmt.Errorf("bytes %d must not be negative", s.Bytes)
	}
	if s.SwapInMillis < 0 {
		return fmt.Errorf("swapInMillis %d must not be negative", s.SwapInMillis)
	}
	for _, pid := range s.PIDs {
		if pid <= 0 {
			return fmt.Errorf("pids: %d is not a process ID", pid)
		}
	}
	return nil
}

// SwappedMiB is the whole MiB moved to the host (0 unless SwappedOut): what the scheduler no
// longer counts as resident on the GPU.
func (s GPUSwap) SwappedMiB() int64 {
	if s.State != GPUSwappedOut {
		return 0
	}
	return s.Bytes >> 20
}

// SwapIn is SwapInMillis as a duration.
func (s GPUSwap) SwapIn() time.Duration { return time.Duration(s.SwapInMillis) * time.Millisecond }

// FormatGPUSwap is the value of GPUSwapAnnotation for s.
func FormatGPUSwap(s GPUSwap) string {
	b, err := json.Marshal(s)
	if err != nil { // a struct of strings and integers always encodes
		panic(err)
	}
	return string(b)
}

// GPUSwapOf reads GPUSwapAnnotation: the state, whether the pod has one, and an error naming the
// annotation and the field when it is malformed.
func GPUSwapOf(annotations map[string]string) (GPUSwap, bool, error) {
	v, ok := annotations[GPUSwapAnnotation]
	if !ok {
		return GPUSwap{}, false, nil
	}
	var s GPUSwap
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return GPUSwap{}, true, fmt.Errorf("annotation %s %q: %w", GPUSwapAnnotation, v, err)
	}
	if err := s.Validate(); err != nil {
		return GPUSwap{}, true, fmt.Errorf("annotation %s: %w", GPUSwapAnnotation, err)
	}
	return s, true, nil
}

// FormatGPUSwapRequest is the value of GPUSwapRequestAnnotation asking for a swap during the idle
// period the gpu-agent observed starting at idleSince.
func FormatGPUSwapRequest(idleSince time.Time) string { return FormatGPUIdleObserved(idleSince) }

// GPUSwapRequested reports whether the scheduler asked for the pod's GPU memory to be swapped out
// during its current idle period: the pod is idle (GPUIdleCondition True) and the request names
// the start of that idle period (GPUIdleObserved).
func GPUSwapRequested(pod *corev1.Pod) bool {
	v, ok := pod.Annotations[GPUSwapRequestAnnotation]
	c := GPUIdleConditionOf(pod)
	if !ok || c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	t, err := time.Parse(GPUIdleObservedFormat, v)
	return err == nil && t.Equal(GPUIdleObserved(pod))
}
