package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

func TestHoldTaintValue(t *testing.T) {
	for _, c := range []struct{ ns, name, want string }{
		{"team-a", "train", "team-a.train"},
		{"team-a", "llama.70b", "team-a.llama.70b"},
		{"team-a", strings.Repeat("x", 55) + "-y", "team-a." + strings.Repeat("x", 55)},
	} {
		got := HoldTaintValue(c.ns, c.name)
		if got != c.want {
			t.Errorf("HoldTaintValue(%q, %q) = %q, want %q", c.ns, c.name, got, c.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("HoldTaintValue(%q, %q) = %q is not a valid taint value: %v", c.ns, c.name, got, errs)
		}
	}
	tt, tol := HoldTaint("a", "b"), HoldToleration()
	if !tol.ToleratesTaint(klog.Background(), &tt, false) {
		t.Errorf("HoldToleration does not tolerate %v", tt)
	}
}

func TestIsHoldTaintKey(t *testing.T) {
	for key, want := range map[string]bool{
		"fairway.dev/held": true, "fairway.dev/reserved": true, "fairway.dev/reservation": false, "nvidia.com/gpu": false,
	} {
		if got := IsHoldTaintKey(key); got != want {
			t.Errorf("IsHoldTaintKey(%q) = %v, want %v", key, got, want)
		}
	}
}
