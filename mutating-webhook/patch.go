package mutatingwebhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// patchFor returns the JSON patch that turns raw, the pod as the API server sent it, into
// mutated, the pod as the defaulter left it; original is raw decoded. An empty patch means the
// defaulter changed nothing.
//
// The defaulter changes a known set of fields: labels, annotations, the scheduler name, the
// priority fields, a container's resource limits and requests (the share ticket), and env, volume
// mounts and volumes, which it only appends to or replaces in place. The patch is built from those fields directly, which costs a fraction of diffing two
// JSON documents and holds exactly the defaulter's operations (no field the Go type does not know
// is dropped, no quantity rewritten). It applies to raw because raw decodes one-to-one into
// original: every member the patch descends into exists in raw, and members raw lacks or holds
// as null or empty are added whole. Should the defaulter ever change another field, or raw lack
// metadata or spec (the API server always sends both), the patch is computed by diffing JSON
// instead, against raw itself.
func patchFor(raw []byte, original, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
	if hasMetadataAndSpec(raw) {
		if ops, ok := directPatch(original, mutated); ok {
			return ops, nil
		}
	}
	return diffPatch(raw, original, mutated)
}

// directPatch builds the patch from the fields the defaulter may change. It returns false when
// the pods also differ elsewhere, or a list shrank.
func directPatch(original, mutated *corev1.Pod) ([]jsonpatch.Operation, bool) {
	// Anything outside the covered fields must be equal: compare copies in which the covered
	// fields are taken from mutated.
	cmp := *original
	cmp.Labels, cmp.Annotations = mutated.Labels, mutated.Annotations
	cmp.Spec.SchedulerName, cmp.Spec.PriorityClassName = mutated.Spec.SchedulerName, mutated.Spec.PriorityClassName
	cmp.Spec.Priority, cmp.Spec.PreemptionPolicy = mutated.Spec.Priority, mutated.Spec.PreemptionPolicy
	cmp.Spec.Volumes = mutated.Spec.Volumes
	if len(original.Spec.Containers) != len(mutated.Spec.Containers) {
		return nil, false
	}
	cmp.Spec.Containers = make([]corev1.Container, len(original.Spec.Containers))
	for i := range cmp.Spec.Containers {
		cmp.Spec.Containers[i] = original.Spec.Containers[i]
		cmp.Spec.Containers[i].Env = mutated.Spec.Containers[i].Env
		cmp.Spec.Containers[i].VolumeMounts = mutated.Spec.Containers[i].VolumeMounts
		cmp.Spec.Containers[i].Resources.Limits = mutated.Spec.Containers[i].Resources.Limits
		cmp.Spec.Containers[i].Resources.Requests = mutated.Spec.Containers[i].Resources.Requests
	}
	// Both sides come from one decoded pod (mutated is a deep copy of original, then changed),
	// so plain reflection is exact here and cheaper than equality.Semantic.
	if !reflect.DeepEqual(&cmp, mutated) {
		return nil, false
	}

	var ops []jsonpatch.Operation
	ops = mapOps(ops, "/metadata/labels", original.Labels, mutated.Labels, sameString)
	ops = mapOps(ops, "/metadata/annotations", original.Annotations, mutated.Annotations, sameString)
	ops = scalarOp(ops, "/spec/schedulerName", original.Spec.SchedulerName, mutated.Spec.SchedulerName)
	ops = scalarOp(ops, "/spec/priorityClassName", original.Spec.PriorityClassName, mutated.Spec.PriorityClassName)
	ops = pointerOp(ops, "/spec/priority", original.Spec.Priority, mutated.Spec.Priority)
	ops = pointerOp(ops, "/spec/preemptionPolicy", original.Spec.PreemptionPolicy, mutated.Spec.PreemptionPolicy)
	var ok bool
	for i := range original.Spec.Containers {
		path := "/spec/containers/" + strconv.Itoa(i)
		ops = resourceOps(ops, path+"/resources", original.Spec.Containers[i].Resources, mutated.Spec.Containers[i].Resources)
		if ops, ok = listOps(ops, path+"/env", original.Spec.Containers[i].Env, mutated.Spec.Containers[i].Env); !ok {
			return nil, false
		}
		if ops, ok = listOps(ops, path+"/volumeMounts", original.Spec.Containers[i].VolumeMounts, mutated.Spec.Containers[i].VolumeMounts); !ok {
			return nil, false
		}
	}
	if ops, ok = listOps(ops, "/spec/volumes", original.Spec.Volumes, mutated.Spec.Volumes); !ok {
		return nil, false
	}
	return ops, true
}

// mapOps patches a map member: added whole when the pod had none (raw holds it absent, null or
// empty), else key by key. Only changed keys are written, so a value the defaulter left alone
// keeps the text raw has (a quantity's "1000m" stays "1000m").
func mapOps[K ~string, V any](ops []jsonpatch.Operation, path string, before, after map[K]V, equal func(a, b V) bool) []jsonpatch.Operation {
	if len(before) == 0 {
		if len(after) > 0 {
			ops = append(ops, jsonpatch.NewOperation("add", path, after))
		}
		return ops
	}
	for k, v := range after {
		if old, ok := before[k]; !ok || !equal(old, v) {
			ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escape(string(k)), v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+escape(string(k)), nil))
		}
	}
	return ops
}

func sameString(a, b string) bool { return a == b }

func sameQuantity(a, b resource.Quantity) bool { return a.Equal(b) }

// resourceOps patches a container's resource limits and requests name by name. A container
// whose resources were empty gets the member whole: raw may lack it, hold it as null, or as {}.
func resourceOps(ops []jsonpatch.Operation, path string, before, after corev1.ResourceRequirements) []jsonpatch.Operation {
	if len(before.Limits) == 0 && len(before.Requests) == 0 && len(before.Claims) == 0 {
		if len(after.Limits) > 0 || len(after.Requests) > 0 {
			ops = append(ops, jsonpatch.NewOperation("add", path, after))
		}
		return ops
	}
	ops = mapOps(ops, path+"/limits", before.Limits, after.Limits, sameQuantity)
	return mapOps(ops, path+"/requests", before.Requests, after.Requests, sameQuantity)
}

// scalarOp patches an omitempty string member. "add" also replaces an existing member.
func scalarOp(ops []jsonpatch.Operation, path, before, after string) []jsonpatch.Operation {
	switch {
	case before == after:
		return ops
	case after == "":
		return append(ops, jsonpatch.NewOperation("remove", path, nil))
	}
	return append(ops, jsonpatch.NewOperation("add", path, after))
}

func pointerOp[T comparable](ops []jsonpatch.Operation, path string, before, after *T) []jsonpatch.Operation {
	switch {
	case before == nil && after == nil, before != nil && after != nil && *before == *after:
		return ops
	case after == nil:
		return append(ops, jsonpatch.NewOperation("remove", path, nil))
	}
	return append(ops, jsonpatch.NewOperation("add", path, *after))
}

// listOps patches a list the defaulter appends to or changes in place. It returns false for a
// list that shrank, which the defaulter never does.
func listOps[T any](ops []jsonpatch.Operation, path string, before, after []T) ([]jsonpatch.Operation, bool) {
	switch {
	case len(after) < len(before):
		return ops, false
	case len(before) == 0:
		if len(after) > 0 {
			ops = append(ops, jsonpatch.NewOperation("add", path, after))
		}
		return ops, true
	}
	for i := range before {
		if !reflect.DeepEqual(before[i], after[i]) {
			ops = append(ops, jsonpatch.NewOperation("replace", path+"/"+strconv.Itoa(i), after[i]))
		}
	}
	for i := len(before); i < len(after); i++ {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", after[i]))
	}
	return ops, true
}

// escape writes a map key as a JSON pointer token (RFC 6901).
func escape(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// diffPatch diffs JSON: raw against mutated encoded, leaving out the operations that raw against
// original encoded also has, which only reflect decoding raw into Go.
func diffPatch(raw []byte, original, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
	before, err := json.Marshal(original)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod: %w", err)
	}
	after, err := json.Marshal(mutated)
	if err != nil {
		return nil, fmt.Errorf("encoding the rewritten pod: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(raw, after)
	if err != nil {
		return nil, fmt.Errorf("computing the patch: %w", err)
	}
	artefacts, err := jsonpatch.CreatePatch(raw, before)
	if err != nil {
		return nil, fmt.Errorf("computing the patch: %w", err)
	}
	skip := make(map[string]bool, len(artefacts))
	for _, op := range artefacts {
		skip[op.Json()] = true
	}
	kept := ops[:0]
	for _, op := range ops {
		if !skip[op.Json()] {
			kept = append(kept, op)
		}
	}
	return kept, nil
}

// hasMetadataAndSpec reports whether raw is a JSON object whose metadata and spec members are
// objects.
func hasMetadataAndSpec(raw []byte) bool {
	var top struct {
		Metadata json.RawMessage `json:"metadata"`
		Spec     json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return false
	}
	isObject := func(m json.RawMessage) bool {
		m = bytes.TrimLeft(m, " \t\r\n")
		return len(m) > 0 && m[0] == '{'
	}
	return isObject(top.Metadata) && isObject(top.Spec)
}
