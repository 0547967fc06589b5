package adapters

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// maxGroupName is the longest gang name GroupName returns: a DNS-1123 label, so the name is also
// valid as a label value and as a PodGroup name.
const maxGroupName = 63

// GroupName builds a deterministic gang name "<prefix>-<parts...>" that is a DNS-1123 label.
// Parts are lower-cased and characters outside [a-z0-9-] become '-'. When that changed anything or
// the name is too long, it is cut and ends with a hash of the unmodified parts, so two different
// workloads never share a name by accident of cleaning.
func GroupName(prefix string, parts ...string) string {
	raw := strings.Join(append([]string{prefix}, parts...), "-")
	clean := sanitize(raw)
	if clean == raw && len(clean) <= maxGroupName {
		return clean
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(raw))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	keep := maxGroupName - len(suffix)
	if len(clean) > keep {
		clean = clean[:keep]
	}
	return strings.TrimRight(clean, "-") + suffix
}

// ShortHash is an 8-hex-digit FNV-1a hash of s, for gang names keyed by long identifiers.
func ShortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// ControllerOfKind returns the pod's controller owner reference if it is of the given group and
// kind (any version), or nil.
func ControllerOfKind(pod *corev1.Pod, group, kind string) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != group {
		return nil
	}
	return ref
}

// ControllerOf returns the controller owner reference of an unstructured object, or nil.
func ControllerOf(obj *unstructured.Unstructured) *metav1.OwnerReference {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return &ref
		}
	}
	return nil
}

// HasContainer reports whether the pod has a (regular) container of that name.
func HasContainer(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return true
		}
	}
	return false
}

// QueueFromLabels returns the queue a framework object names with fairway's queue label or one of
// its Run:ai and KAI aliases (fairwayv1.QueueOf), or "" when it names none. It is only a hint,
// which the webhook checks against the queues serving the pod's namespace, so labels that name
// different queues give the preferred one rather than refusing the pods of the object.
func QueueFromLabels(labels map[string]string) string {
	_, q, _ := fairwayv1.QueueOf(labels)
	return q
}

// DegradedWarning is the warning an adapter returns when it could not read the framework object
// that sizes the gang, and admits the pod with no gang minimum (min-member 1) instead: the pod is
// not refused, it only loses all-or-nothing placement.
func DegradedWarning(what string, err error) string {
	return fmt.Sprintf("fairway: cannot read %s (%s); the pod is scheduled without a gang minimum (min-member 1)", what, ReadFailure(err))
}

// ReadFailure says, for a warning, why ObjectReader.Get failed.
func ReadFailure(err error) string {
	switch {
	case errors.Is(err, ErrKindNotInstalled):
		return "its CRD is not installed"
	case apierrors.IsNotFound(err):
		return "it was not found"
	case errors.Is(err, context.DeadlineExceeded):
		return "the cache did not answer in time"
	}
	return err.Error()
}

// Int64Field reads an integer at path in obj, accepting the int64 and float64 forms unstructured
// JSON decoding produces. It returns def when the field is absent or not a number.
func Int64Field(obj map[string]any, def int64, path ...string) int64 {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found {
		return def
	}
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return def
}

// BoolField reads a bool at path in obj, false when absent or not a bool.
func BoolField(obj map[string]any, path ...string) bool {
	v, found, err := unstructured.NestedBool(obj, path...)
	return err == nil && found && v
}

// Clamp32 bounds n to [lo, hi] and converts it to int32, so that absurd replica counts in a
// framework object cannot overflow a gang size.
func Clamp32(n, lo, hi int64) int32 {
	return int32(max(lo, min(n, hi)))
}

// MaxMinMember is the largest gang size an adapter reports, the PodGroup API's own bound.
const MaxMinMember = 100000

// Bool returns a pointer to b, for Workload.Recreatable.
func Bool(b bool) *bool { return &b }

// IgnoresDisruption reports whether a Job spec (batch/v1 JobSpec, as unstructured) has a
// podFailurePolicy rule that ignores pods failed with the DisruptionTarget condition: then an
// eviction does not count against the Job's backoffLimit and the Job controller simply makes the
// pod again. Without such a rule every eviction burns a retry, and the last one fails the Job.
func IgnoresDisruption(jobSpec map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(jobSpec, "podFailurePolicy", "rules")
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok || rule["action"] != string(batchv1.PodFailurePolicyActionIgnore) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(rule, "onPodConditions")
		for _, c := range conds {
			cond, ok := c.(map[string]any)
			if !ok || cond["type"] != string(corev1.DisruptionTarget) {
				continue
			}
			// status defaults to True, the status the condition has on an evicted pod.
			if st, set := cond["status"]; !set || st == string(corev1.ConditionTrue) {
				return true
			}
		}
	}
	return false
}
