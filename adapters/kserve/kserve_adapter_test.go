package kserve_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kserve"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		pod  string
		want adapters.Workload
	}{
		"RawDeployment predictor replica: inference, a gang of its own, GPU on kserve-container": {
			pod:  "raw-predictor.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: "kserve-container"},
		},
		"Serverless predictor replica (Knative revision with queue-proxy): the same": {
			pod:  "serverless-predictor.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: "kserve-container"},
		},
		"multi-node head: one gang of RAY_NODE_COUNT, the head a sub-group": {
			pod: "multinode-head.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "kserve-llama-predictor", MinMember: 2, SubGroup: "head",
				SubGroups: []fairwayv1.SubGroup{{Name: "head", MinMember: 1}, {Name: "worker", MinMember: 1}}, GPUContainer: "kserve-container"},
		},
		"multi-node worker: the same gang": {
			pod: "multinode-worker.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "kserve-llama-predictor", MinMember: 2, SubGroup: "worker",
				SubGroups: []fairwayv1.SubGroup{{Name: "head", MinMember: 1}, {Name: "worker", MinMember: 1}}, GPUContainer: "worker-container"},
		},
	}
	a := kserve.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize(%s) = false", tc.pod)
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecognizeLookAlike: a pod that only names an InferenceService (a client, a test job) is
// not a replica of it.
func TestRecognizeLookAlike(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "raw-predictor.yaml"))
	delete(pod.Labels, kserve.ComponentLabel)
	if kserve.New().Recognize(pod) {
		t.Error("Recognize(pod without the component label) = true")
	}
}

func TestDescribeRefusesBadNodeCount(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "multinode-worker.yaml"))
	pod.Spec.Containers[0].Env[0].Value = "two"
	_, err := kserve.New().Describe(context.Background(), pod, adaptertest.NewReader())
	if err == nil || !strings.Contains(err.Error(), kserve.RayNodeCountEnv) {
		t.Errorf("Describe(RAY_NODE_COUNT two) error = %v, want one naming %s", err, kserve.RayNodeCountEnv)
	}
}
