package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestOwnedKeysPolicyMatchesTheContract keeps the key lists of the chart's
// ValidatingAdmissionPolicy fairway-owned-pod-keys equal to the pod contract's
// (api/v1alpha1/podcontract.go, podkeys.go): a key added to the contract but not to the policy
// would be writable by every tenant (the immutable keys, through pods/status).
func TestOwnedKeysPolicyMatchesTheContract(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "charts", "fairway", "templates", "admission-policies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"bindingLabels":        fairwayv1.BindingPodLabels,
		"bindingAnnotations":   fairwayv1.BindingPodAnnotations,
		"admissionLabels":      fairwayv1.AdmissionPodLabels,
		"admissionAnnotations": fairwayv1.AdmissionPodAnnotations,
		"immutableLabels":      fairwayv1.ImmutablePodLabels,
		"immutableAnnotations": fairwayv1.ImmutablePodAnnotations,
	} {
		m := regexp.MustCompile(`(?m)^\s+- name: ` + name + `\n\s+expression: "\[([^\]]*)\]"$`).FindSubmatch(raw)
		if m == nil {
			t.Errorf("admission-policies.yaml: no variable %s with a list literal", name)
			continue
		}
		var got []string
		for _, k := range strings.Split(string(m[1]), ",") {
			got = append(got, strings.Trim(strings.TrimSpace(k), "'"))
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("fairway-owned-pod-keys variable %s = %q; the pod contract says %q", name, got, w)
		}
	}
}
