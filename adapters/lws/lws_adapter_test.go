package lws_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/lws"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	group := []fairwayv1.SubGroup{{Name: "leader", MinMember: 1}, {Name: "worker", MinMember: 1}}
	cases := map[string]struct {
		pod         string
		leaderReady bool
		noLWS       bool
		want        adapters.Workload
		warning     string
	}{
		"leader: its group is one gang of size, the leader a sub-group": {
			pod:  "vllm-leader.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "lws-vllm-1", MinMember: 2, SubGroup: "leader", SubGroups: group, QueueHint: "team-a"},
		},
		"worker: the same gang, found by its leader's name": {
			pod:  "vllm-worker.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "lws-vllm-1", MinMember: 2, SubGroup: "worker", SubGroups: group, QueueHint: "team-a"},
		},
		"startupPolicy LeaderReady: the leader alone is the minimum": {
			pod: "vllm-leader.yaml", leaderReady: true,
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "lws-vllm-1", MinMember: 1, SubGroup: "leader",
				SubGroups: []fairwayv1.SubGroup{{Name: "leader", MinMember: 1}}, QueueHint: "team-a"},
		},
		"LWS CRD not installed: the default policy, with a warning": {
			pod: "vllm-worker.yaml", noLWS: true,
			want:    adapters.Workload{Kind: adapters.KindInference, PodGroup: "lws-vllm-1", MinMember: 2, SubGroup: "worker", SubGroups: group},
			warning: "CRD is not installed",
		},
	}
	a := lws.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize(%s) = false", tc.pod)
			}
			reader := adaptertest.NewReader()
			if !tc.noLWS {
				for _, o := range adaptertest.LoadObjects(t, filepath.Join("testdata", "lws-vllm.yaml")) {
					if tc.leaderReady {
						_ = unstructured.SetNestedField(o.Object, lws.LeaderReady, "spec", "startupPolicy")
					}
					reader.Add(o)
				}
			}
			got, err := a.Describe(context.Background(), pod, reader)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
			if tc.warning == "" && len(got.Warnings) > 0 || tc.warning != "" && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], tc.warning)) {
				t.Errorf("Warnings = %q, want one containing %q", got.Warnings, tc.warning)
			}
		})
	}
}

func TestDescribeRefusesBadSize(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "vllm-worker.yaml"))
	pod.Annotations[lws.SizeAnnotation] = "two"
	_, err := lws.New().Describe(context.Background(), pod, adaptertest.NewReader())
	if err == nil || !strings.Contains(err.Error(), lws.SizeAnnotation) {
		t.Errorf("Describe(size %q) error = %v, want one naming %s", "two", err, lws.SizeAnnotation)
	}
}

// TestRecognizeLookAlike: a Service selector's label copied onto a pod without the controller's
// size annotation is not a group member.
func TestRecognizeLookAlike(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "vllm-leader.yaml"))
	delete(pod.Annotations, lws.SizeAnnotation)
	if lws.New().Recognize(pod) {
		t.Error("Recognize(pod without the size annotation) = true")
	}
}
