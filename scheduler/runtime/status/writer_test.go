package status

import (
	"testing"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// A round before the next tick is asked for exactly when a PodGroup's gang gets a reason code it
// did not have: a new waiting gang, or a new code. Lone pods, and gangs whose reason only kept
// its code, wait for the tick.
func TestNewReason(t *testing.T) {
	pg := snapshot.GangKey{Namespace: "ns", Name: "big", PodGroup: true}
	lone := snapshot.GangKey{Namespace: "ns", Name: "pod"}
	report := func(reasons map[snapshot.GangKey]engine.ReasonCode) *Report {
		r := &Report{Waiting: map[snapshot.GangKey]*engine.GangReason{}}
		for k, code := range reasons {
			r.Waiting[k] = &engine.GangReason{Gang: k, Code: code, Message: "m"}
		}
		return r
	}
	waiting := report(map[snapshot.GangKey]engine.ReasonCode{pg: engine.ReasonWaitingForPods})
	noFit := report(map[snapshot.GangKey]engine.ReasonCode{pg: engine.ReasonNoNodeFits})
	loneOnly := report(map[snapshot.GangKey]engine.ReasonCode{lone: engine.ReasonNoNodeFits})
	for _, tc := range []struct {
		name       string
		prev, next *Report
		want       bool
	}{
		{"first report with a waiting PodGroup", nil, waiting, true},
		{"a PodGroup starts waiting", report(nil), noFit, true},
		{"its code changes", waiting, noFit, true},
		{"same code again", noFit, noFit, false},
		{"the gang no longer waits", noFit, report(nil), false},
		{"a lone pod starts waiting", report(nil), loneOnly, false},
	} {
		if got := newReason(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: newReason = %v, want %v", tc.name, got, tc.want)
		}
	}
}
