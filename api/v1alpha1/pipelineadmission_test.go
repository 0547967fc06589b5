package v1alpha1_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// TestRunAdmissionRoundTrip: what the writer writes the reader reads back, and the writer writes
// only the keys of RunAdmissionKeys, none of them empty.
func TestRunAdmissionRoundTrip(t *testing.T) {
	full := v1alpha1.RunAdmission{State: v1alpha1.RunHeld, Reason: string(v1alpha1.RunPeakAboveGuarantee), Message: "m",
		Queue: "team", Peak: "gpu=8", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for name, a := range map[string]v1alpha1.RunAdmission{
		"full":       full,
		"scheduler":  {State: v1alpha1.RunPerPod, Reason: string(v1alpha1.RunQueueUnavailable), Message: "gone", Time: full.Time},
		"empty":      {},
		"state only": {State: v1alpha1.RunStaged},
	} {
		t.Run(name, func(t *testing.T) {
			ann := a.Annotations()
			for k, v := range ann {
				if !slices.Contains(v1alpha1.RunAdmissionKeys, k) || v == "" {
					t.Errorf("wrote %s=%q: not a run key, or empty", k, v)
				}
			}
			if got := v1alpha1.RunAdmissionOf(ann); got != a {
				t.Errorf("read back %+v, wrote %+v", got, a)
			}
		})
	}
	if n := len(full.Annotations()); n != len(v1alpha1.RunAdmissionKeys) {
		t.Errorf("a full record writes %d keys, want every one of the %d run keys", n, len(v1alpha1.RunAdmissionKeys))
	}
	for _, k := range v1alpha1.RunAdmissionKeys {
		if _, ok := v1alpha1.OtherKeys[k]; !ok {
			t.Errorf("run key %s is not among the known keys of other objects", k)
		}
	}
}

func TestRunAdmissionStateMode(t *testing.T) {
	for s, want := range map[v1alpha1.RunAdmissionState]v1alpha1.PipelineAdmission{
		v1alpha1.RunHeld: v1alpha1.PipelineAdmissionPeak, v1alpha1.RunStaged: v1alpha1.PipelineAdmissionStages,
		v1alpha1.RunAdmitted: "", v1alpha1.RunPerPod: "", "Bogus": "",
	} {
		if got := s.Mode(); got != want {
			t.Errorf("%q.Mode() = %q, want %q", s, got, want)
		}
	}
}

func TestIsFairwayIdentity(t *testing.T) {
	for user, want := range map[string]bool{
		"system:serviceaccount:fairway-system:fairway-scheduler": true,
		"system:serviceaccount:fairway-system:fairway-webhook":   true,
		"system:serviceaccount:team-a:default":                   false,
		"system:serviceaccount:fairway-system-evil:x":            false,
		"alice": false,
		"":      false,
	} {
		if got := v1alpha1.IsFairwayIdentity(user, []string{"system:authenticated"}, "fairway-system"); got != want {
			t.Errorf("IsFairwayIdentity(%q) = %v, want %v", user, got, want)
		}
	}
	if v1alpha1.IsFairwayIdentity("system:serviceaccount::x", nil, "") {
		t.Error("no fairway namespace: nobody is fairway")
	}
	if !v1alpha1.IsFairwayIdentity("admin", []string{"system:authenticated", v1alpha1.MastersGroup}, "fairway-system") {
		t.Error("a cluster admin may write fairway's keys")
	}
}
