package kuberay_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		pod     string
		objects string
		want    adapters.Workload
		warning string
	}{
		"worker of a two-group cluster: gang = head + desired replicas x hosts": {
			pod: "worker-gpu.yaml", objects: "raycluster.yaml",
			want: adapters.Workload{Kind: adapters.KindRay, PodGroup: "ray-rc-gpu", MinMember: 7, SubGroup: "gpu-group",
				SubGroups:     []fairwayv1.SubGroup{{Name: "headgroup", MinMember: 1}, {Name: "cpu-group", MinMember: 2}, {Name: "gpu-group", MinMember: 4}},
				PriorityClass: "fairway-training", GPUContainer: "ray-worker", QueueHint: "ray-team", Recreatable: adapters.Bool(true)},
		},
		"head of the same cluster shares the gang": {
			pod: "head.yaml", objects: "raycluster.yaml",
			want: adapters.Workload{Kind: adapters.KindRay, PodGroup: "ray-rc-gpu", MinMember: 7, SubGroup: "headgroup",
				SubGroups:     []fairwayv1.SubGroup{{Name: "headgroup", MinMember: 1}, {Name: "cpu-group", MinMember: 2}, {Name: "gpu-group", MinMember: 4}},
				PriorityClass: "fairway-training", GPUContainer: "ray-head", QueueHint: "ray-team", Recreatable: adapters.Bool(false)},
		},
		"RayJob cluster with autoscaler: min replicas; queue from the RayJob; priority from the cluster label": {
			pod: "rayjob-worker.yaml", objects: "raycluster-autoscaling.yaml",
			want: adapters.Workload{Kind: adapters.KindRay, PodGroup: "ray-rayjob-sample-raycluster-k9x2p", MinMember: 2, SubGroup: "small",
				SubGroups:     []fairwayv1.SubGroup{{Name: "headgroup", MinMember: 1}, {Name: "small", MinMember: 1}},
				PriorityClass: "fairway-inference", GPUContainer: "ray-worker", QueueHint: "ray-team", Recreatable: adapters.Bool(true)},
		},
		"RayService (Ray Serve) worker: inference, fairway-inference": {
			pod: "rayservice-worker.yaml", objects: "rayservice-cluster.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "ray-rayservice-sample-raycluster-7pdzt", MinMember: 2, SubGroup: "small-group",
				SubGroups:     []fairwayv1.SubGroup{{Name: "headgroup", MinMember: 1}, {Name: "small-group", MinMember: 1}},
				PriorityClass: "fairway-inference", GPUContainer: "ray-worker", Recreatable: adapters.Bool(true)},
		},
		"RayService worker, CRDs not installed: still inference, from the pod's labels": {
			pod: "rayservice-worker.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, PodGroup: "ray-rayservice-sample-raycluster-7pdzt", MinMember: 1, SubGroup: "small-group",
				PriorityClass: "fairway-inference", GPUContainer: "ray-worker", Recreatable: adapters.Bool(true)},
			warning: "CRD is not installed",
		},
		"KubeRay CRDs not installed: same gang, min-member 1, a warning": {
			pod: "worker-gpu.yaml",
			want: adapters.Workload{Kind: adapters.KindRay, PodGroup: "ray-rc-gpu", MinMember: 1, SubGroup: "gpu-group",
				PriorityClass: "fairway-training", GPUContainer: "ray-worker", Recreatable: adapters.Bool(true)},
			warning: "CRD is not installed",
		},
	}
	a := kuberay.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			if pod.Name != "" {
				t.Fatalf("fixture has a name; KubeRay pods arrive with generateName only")
			}
			reader := adaptertest.NewReader()
			if tc.objects != "" {
				for _, o := range adaptertest.LoadObjects(t, filepath.Join("testdata", tc.objects)) {
					reader.Add(o)
				}
			}
			if !a.Recognize(pod) {
				t.Fatalf("Recognize = false, want true")
			}
			got, err := a.Describe(context.Background(), pod, reader)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
			if tc.warning == "" && len(got.Warnings) > 0 {
				t.Errorf("unexpected warnings: %q", got.Warnings)
			}
			if tc.warning != "" && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], tc.warning)) {
				t.Errorf("warnings = %q, want one containing %q", got.Warnings, tc.warning)
			}
		})
	}
}

func TestRecognizeSkipsCleanupJobPods(t *testing.T) {
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "worker-gpu.yaml"))
	pod.Labels[kuberay.NodeTypeLabel] = "redis-cleanup"
	if kuberay.New().Recognize(pod) {
		t.Errorf("a redis-cleanup pod was recognised as a Ray node")
	}
}
