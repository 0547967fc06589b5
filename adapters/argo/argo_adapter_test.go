package argo_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		fixture string
		want    adapters.Workload
	}{
		"step pod: GPU goes to main, never to wait at index 0": {
			fixture: "step-gpu.yaml",
			want: adapters.Workload{
				Kind:          adapters.KindWorkflowStep,
				PodGroup:      "wf-train-pipeline-x7k2p-" + adapters.ShortHash("train-pipeline-x7k2p-1862377541"),
				MinMember:     1,
				PriorityClass: "fairway-training",
				GPUContainer:  "main",
			},
		},
		"container set: first container after wait": {
			fixture: "containerset.yaml",
			want: adapters.Workload{
				Kind:          adapters.KindWorkflowStep,
				PodGroup:      "wf-etl-5g8fq-" + adapters.ShortHash("etl-5g8fq-3456784210"),
				MinMember:     1,
				PriorityClass: "fairway-training",
				GPUContainer:  "fetch",
			},
		},
		"agent pod is left alone":       {fixture: "agent.yaml", want: adapters.Workload{Ignore: "Argo agent pod"}},
		"artifact-GC pod is left alone": {fixture: "artifact-gc.yaml", want: adapters.Workload{Ignore: "Argo artifact-gc pod"}},
	}
	a := argo.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.fixture))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize(%s) = false, want true", tc.fixture)
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			// Recreatable and its warnings: see recreatable_test.go.
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Recreatable", "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStepGroupIsStablePerStepAndDistinctAcrossSteps(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "step-gpu.yaml"))
	first := argo.StepGroup(pod)
	if again := argo.StepGroup(pod.DeepCopy()); again != first {
		t.Errorf("StepGroup changed between calls: %q then %q", first, again)
	}
	retry := pod.DeepCopy()
	retry.Annotations[argo.NodeIDAnnotation] = "train-pipeline-x7k2p-2939447101"
	if got := argo.StepGroup(retry); got == first {
		t.Errorf("a retry (new node ID) got the same gang %q", got)
	}
}
