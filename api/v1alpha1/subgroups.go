package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FormatSubGroups writes sub-groups' names and minimums as SubGroupsAnnotation holds them,
// "name=min" joined by commas in the order given; topology constraints are not written (the
// annotation carries what adapters derive, and they derive none).
func FormatSubGroups(subs []SubGroup) string {
	parts := make([]string, 0, len(subs))
	for _, sg := range subs {
		parts = append(parts, sg.Name+"="+strconv.FormatInt(int64(sg.MinMember), 10))
	}
	return strings.Join(parts, ",")
}

// ParseSubGroups reads SubGroupsAnnotation. Each name must be a valid label value (it matches
// the pods' SubGroupAnnotation, which adapters take from framework labels) and appear once, each
// minimum must be in [1, 100000] as in SubGroup.MinMember, and there may be at most 32 of them,
// the PodGroup API's bound. An empty value is no sub-groups.
func ParseSubGroups(v string) ([]SubGroup, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxSubGroups {
		return nil, fmt.Errorf("%s: %d sub-groups, at most %d are allowed", SubGroupsAnnotation, len(parts), maxSubGroups)
	}
	out := make([]SubGroup, 0, len(parts))
	for _, p := range parts {
		name, n, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not name=minimum", SubGroupsAnnotation, p)
		}
		if name == "" || len(validation.IsValidLabelValue(name)) > 0 {
			return nil, fmt.Errorf("%s: sub-group name %q must be a non-empty label value (up to 63 letters, digits, '-', '_', '.')", SubGroupsAnnotation, name)
		}
		if slices.ContainsFunc(out, func(s SubGroup) bool { return s.Name == name }) {
			return nil, fmt.Errorf("%s: sub-group %q appears twice", SubGroupsAnnotation, name)
		}
		m, err := strconv.ParseInt(n, 10, 32)
		if err != nil || m < 1 || m > maxMinMember {
			return nil, fmt.Errorf("%s: minimum %q of sub-group %q must be an integer from 1 to %d", SubGroupsAnnotation, n, name, maxMinMember)
		}
		out = append(out, SubGroup{Name: name, MinMember: int32(m)})
	}
	return out, nil
}

// The bounds of the PodGroup API's validation markers (PodGroupSpec.SubGroups, SubGroup.MinMember).
const (
	maxSubGroups = 32
	maxMinMember = 100000
)
