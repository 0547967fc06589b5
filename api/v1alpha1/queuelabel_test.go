package v1alpha1_test

import (
	"errors"
	"testing"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestQueueOf(t *testing.T) {
	const fw, runai, kai = v1alpha1.QueueLabel, v1alpha1.RunAIQueueLabel, v1alpha1.KAIQueueLabel
	for name, tc := range map[string]struct {
		labels     map[string]string
		key, queue string
		conflict   string
	}{
		"none":                     {},
		"other labels":             {labels: map[string]string{"queue": "a"}},
		"fairway":                  {labels: map[string]string{fw: "a"}, key: fw, queue: "a"},
		"Run:ai":                   {labels: map[string]string{runai: "a"}, key: runai, queue: "a"},
		"KAI":                      {labels: map[string]string{kai: "a"}, key: kai, queue: "a"},
		"all agree":                {labels: map[string]string{fw: "a", runai: "a", kai: "a"}, key: fw, queue: "a"},
		"empty counts as not set":  {labels: map[string]string{fw: "", runai: "a"}, key: runai, queue: "a"},
		"only empty":               {labels: map[string]string{fw: "", kai: ""}},
		"Run:ai before KAI":        {labels: map[string]string{runai: "a", kai: "a"}, key: runai, queue: "a"},
		"conflict keeps fairway's": {labels: map[string]string{fw: "a", runai: "b"}, key: fw, queue: "a", conflict: `fairway.dev/queue "a" and runai/queue "b": the labels name different queues; set one`},
		"conflict of the aliases":  {labels: map[string]string{runai: "a", kai: "b"}, key: runai, queue: "a", conflict: `runai/queue "a" and kai.scheduler/queue "b": the labels name different queues; set one`},
		"conflict with the third":  {labels: map[string]string{fw: "a", runai: "a", kai: "c"}, key: fw, queue: "a", conflict: `fairway.dev/queue "a" and kai.scheduler/queue "c"`},
	} {
		t.Run(name, func(t *testing.T) {
			key, queue, err := v1alpha1.QueueOf(tc.labels)
			if key != tc.key || queue != tc.queue {
				t.Errorf("QueueOf(%v) = %q, %q; want %q, %q", tc.labels, key, queue, tc.key, tc.queue)
			}
			var conflict *v1alpha1.QueueConflictError
			switch {
			case tc.conflict == "" && err != nil:
				t.Errorf("QueueOf(%v): %v", tc.labels, err)
			case tc.conflict != "" && (!errors.As(err, &conflict) || len(err.Error()) < len(tc.conflict) || err.Error()[:len(tc.conflict)] != tc.conflict):
				t.Errorf("QueueOf(%v) error = %v, want %s", tc.labels, err, tc.conflict)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = v1alpha1.QueueOf(map[string]string{fw: "a", runai: "a"}) }); n != 0 {
		t.Errorf("QueueOf allocates %v times", n)
	}
}
