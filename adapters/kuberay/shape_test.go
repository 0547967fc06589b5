package kuberay_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// rayCluster loads the first RayCluster of a file.
func rayCluster(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range adaptertest.LoadObjects(t, path) {
		if o.GetKind() == "RayCluster" {
			return o
		}
	}
	t.Fatalf("%s holds no RayCluster", path)
	return nil
}

// TestShapeOfKubeRaySamples derives the gang of KubeRay's own samples: the head is always a
// sub-group of 1, each worker group one of its minimum.
func TestShapeOfKubeRaySamples(t *testing.T) {
	head := fairwayv1.SubGroup{Name: kuberay.HeadGroup, MinMember: 1}
	cases := map[string]adapters.GangShape{
		// replicas 1, minReplicas 1, maxReplicas 10, no autoscaler.
		"ray-cluster.complete.yaml": {PodGroup: "ray-raycluster-complete", MinMember: 2,
			SubGroups: []fairwayv1.SubGroup{head, {Name: "small-group", MinMember: 1}}},
		// The autoscaler starts from minReplicas 0: the gang is the head alone, and every worker
		// the autoscaler asks for joins it later.
		"ray-cluster.autoscaler.yaml": {PodGroup: "ray-raycluster-autoscaler", MinMember: 1,
			SubGroups: []fairwayv1.SubGroup{head}},
		"ray-cluster.sample.yaml": {PodGroup: "ray-raycluster-kuberay", MinMember: 2,
			SubGroups: []fairwayv1.SubGroup{head, {Name: "workergroup", MinMember: 1}}},
		"ray-cluster.kai-scheduler.yaml": {PodGroup: "ray-raycluster-sample", MinMember: 3,
			SubGroups: []fairwayv1.SubGroup{head, {Name: "worker", MinMember: 2}}},
	}
	a := kuberay.New()
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			rc := rayCluster(t, filepath.Join("testdata", "realworld", file))
			got := a.GangShapes(rc)
			if d := cmp.Diff([]adapters.GangShape{want}, got); d != "" {
				t.Errorf("GangShapes (-want +got):\n%s", d)
			}
		})
	}
}

// TestShapeFollowsScaling is the RayCluster of the e2e test scaled as users and the Ray
// autoscaler scale it: the desired replicas size the gang without the autoscaler, minReplicas
// with it, and a suspended group counts for nothing.
func TestShapeFollowsScaling(t *testing.T) {
	rc := rayCluster(t, filepath.Join("testdata", "realworld", "ray-cluster.complete.yaml"))
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	set := func(field string, v any) {
		t.Helper()
		g := groups[0].(map[string]any)
		g[field] = v
		if err := unstructured.SetNestedSlice(rc.Object, groups, "spec", "workerGroupSpecs"); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		field string
		value any
		want  int32
	}{
		{"replicas", int64(6), 7},
		{"numOfHosts", int64(2), 13},
		{"replicas", int64(3), 7},
		{"replicas", int64(0), 3}, // below minReplicas 1: the minimum wins
		{"maxReplicas", int64(2), 3},
		{"replicas", int64(9), 5}, // above maxReplicas 2: the maximum wins
		{"suspend", true, 1},
	} {
		set(step.field, step.value)
		shape := kuberay.Shape(rc)
		var sum int32
		for _, sg := range shape.SubGroups {
			sum += sg.MinMember
		}
		if shape.MinMember != step.want || sum != shape.MinMember {
			t.Errorf("after %s=%v: MinMember %d (sub-groups %v), want %d, the sum of the sub-groups", step.field, step.value, shape.MinMember, shape.SubGroups, step.want)
		}
	}
	if err := unstructured.SetNestedField(rc.Object, true, "spec", "enableInTreeAutoscaling"); err != nil {
		t.Fatal(err)
	}
	set("suspend", false)
	set("replicas", int64(9))
	if got := kuberay.Shape(rc); got.MinMember != 3 {
		t.Errorf("with the autoscaler, replicas 9, minReplicas 1, 2 hosts: MinMember %d, want 3", got.MinMember)
	}
}
