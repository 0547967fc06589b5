package v1alpha1_test

import (
	"testing"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestEvictionReasons(t *testing.T) {
	seen := map[v1alpha1.EvictionReason]bool{}
	for _, r := range v1alpha1.EvictionReasons() {
		if !r.Known() || seen[r] {
			t.Errorf("%q listed twice or not known", r)
		}
		seen[r] = true
	}
	if v1alpha1.EvictionReason("Scheduled").Known() {
		t.Error("an event reason that is not an eviction is known")
	}
	if got := v1alpha1.DisruptionReason(v1alpha1.EvictReclaim); got != "FairwayReclaim" {
		t.Errorf("DisruptionReason(Reclaim) = %q", got)
	}
}
