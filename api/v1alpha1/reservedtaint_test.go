package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

func TestReservedTaintValue(t *testing.T) {
	for _, c := range []struct{ ns, name, want string }{
		{"team-a", "train", "team-a.train"},
		{"team-a", "llama.70b", "team-a.llama.70b"},
		{"team-a", strings.Repeat("x", 55) + "-y", "team-a." + strings.Repeat("x", 55)},
	} {
		got := ReservedTaintValue(c.ns, c.name)
		if got != c.want {
			t.Errorf("ReservedTaintValue(%q, %q) = %q, want %q", c.ns, c.name, got, c.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("ReservedTaintValue(%q, %q) = %q is not a valid taint value: %v", c.ns, c.name, got, errs)
		}
	}
	tt, tol := ReservedTaint("a", "b"), ReservedToleration()
	if !tol.ToleratesTaint(klog.Background(), &tt, false) {
		t.Errorf("ReservedToleration does not tolerate %v", tt)
	}
}
