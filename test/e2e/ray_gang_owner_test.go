//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestRayGangFollowsOwner runs RayClusters under the real KubeRay operator while they are scaled
// as their users and the Ray autoscaler scale them, with a stale-gang grace period of 5s so that
// a gang wrongly counted short would be evicted within the test:
//
//   - A RayCluster scaled from 6 workers to 3 keeps running: KubeRay deletes three workers, the
//     PodGroup's minMember follows to 4 and no pod is evicted, well past the grace period.
//   - Raising workerGroupSpecs[].replicas back to 6 (as the Ray autoscaler does) adds three
//     workers to the running gang: same PodGroup, minMember 7, the four running pods untouched.
//   - An autoscaled RayCluster (minReplicas 1, replicas 3: the gang is the head and one worker)
//     whose head fits no node never starts, although its three workers fit and outnumber the
//     gang's minimum; once a node takes the head, all four start, and workers the autoscaler
//     adds later join them.
func TestRayGangFollowsOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "ray-scale"
	pool := cluster.NodePool{Name: "cpu", Count: 1, CPU: "64", Memory: "256Gi"}
	c := startExample(t, []cluster.NodePool{pool}, []client.Object{exampleQueue("ray-scale", ns, "")},
		stack.Options{SchedulerArgs: []string{"--stale-gang-grace-period=5s"}})
	if _, err := c.StartKubeRay(ctx, cluster.KubeRayOptions{}); err != nil {
		t.Fatalf("starting KubeRay: %v", err)
	}

	// 1. Shrink 6 -> 3.
	rc := scalingRayCluster(ns, "shrink", 6, 0, false, nil)
	mustCreate(t, c, rc)
	sel := map[string]string{kuberay.ClusterLabel: rc.GetName()}
	group := types.NamespacedName{Namespace: ns, Name: adapters.GroupName("ray", rc.GetName())}
	eventually(t, 90*time.Second, "the 7 pods of the cluster bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, sel))) == 7, nil
	})
	expectGang(t, c, group, 7, map[string]int32{kuberay.HeadGroup: 1, "workers": 6})
	setWorkerGroup(t, c, rc, func(g map[string]any) { g["replicas"] = int64(3) })
	expectGang(t, c, group, 4, map[string]int32{kuberay.HeadGroup: 1, "workers": 3})
	eventually(t, 60*time.Second, "KubeRay down to 3 workers", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, ns, sel)
		return len(pods) == 4 && len(bound(pods)) == 4, fmt.Errorf("pods %s", describePods(pods))
	})
	running := podsIn(t, c, ctx, ns, sel)
	time.Sleep(15 * time.Second) // three stale-gang grace periods
	if notes := eventsFor(t, c, ctx, ns, "StaleGang"); len(notes) != 0 {
		t.Fatalf("the shrunk gang was evicted as stale: %v", notes)
	}
	if now := bound(podsIn(t, c, ctx, ns, sel)); !sameUIDs(now, running) {
		t.Fatalf("the shrunk cluster's pods changed: %s, were %s", describePods(now), describePods(running))
	}
	t.Logf("scaled to 3 workers: gang %s minMember 4, %d pods running, no eviction after 15s", group.Name, len(running))

	// 2. Grow 3 -> 6, as the Ray autoscaler grows a cluster: raise replicas.
	setWorkerGroup(t, c, rc, func(g map[string]any) { g["replicas"] = int64(6) })
	eventually(t, 60*time.Second, "the 3 new workers bound", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, ns, sel)
		return len(bound(pods)) == 7, fmt.Errorf("pods %s", describePods(pods))
	})
	expectGang(t, c, group, 7, map[string]int32{kuberay.HeadGroup: 1, "workers": 6})
	grown := bound(podsIn(t, c, ctx, ns, sel))
	for _, p := range running {
		if !slices.ContainsFunc(grown, func(q corev1.Pod) bool { return q.UID == p.UID }) {
			t.Errorf("running pod %s was replaced while the cluster grew", p.Name)
		}
	}
	for _, p := range grown {
		if p.Annotations[fairwayv1.PodGroupAnnotation] != group.Name {
			t.Errorf("pod %s of the grown cluster is in gang %q, want %q", p.Name, p.Annotations[fairwayv1.PodGroupAnnotation], group.Name)
		}
	}
	var groups fairwayv1.PodGroupList
	if err := c.Client().List(ctx, &groups, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(groups.Items) != 1 {
		t.Errorf("%d PodGroups in %s after the scale-up, want the one gang", len(groups.Items), ns)
	}

	// 3. No start without the head: autoscaled, gang = head + 1, three workers, head fits nowhere.
	headless := scalingRayCluster(ns, "headless", 3, 1, true, map[string]string{"pool": "head"})
	mustCreate(t, c, headless)
	hsel := map[string]string{kuberay.ClusterLabel: headless.GetName()}
	hgroup := types.NamespacedName{Namespace: ns, Name: adapters.GroupName("ray", headless.GetName())}
	waitPods(t, c, ns, hsel, 4, 60*time.Second)
	expectGang(t, c, hgroup, 2, map[string]int32{kuberay.HeadGroup: 1, "workers": 1})
	time.Sleep(10 * time.Second)
	if b := bound(podsIn(t, c, ctx, ns, hsel)); len(b) != 0 {
		t.Fatalf("%d pods of a cluster whose head fits nowhere bound: %s", len(b), describePods(b))
	}
	var pg fairwayv1.PodGroup
	if err := c.Client().Get(ctx, hgroup, &pg); err != nil {
		t.Fatal(err)
	}
	t.Logf("headless gang waits: %s", conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable))
	headPool := cluster.NodePool{Name: "head", Count: 1, CPU: "16", Memory: "64Gi", Labels: map[string]string{"pool": "head"}}
	if _, err := c.AddNodes(ctx, headPool); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "head and 3 workers bound", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, ns, hsel)
		return len(bound(pods)) == 4, fmt.Errorf("pods %s", describePods(pods))
	})
	setWorkerGroup(t, c, headless, func(g map[string]any) { g["replicas"] = int64(5) })
	eventually(t, 60*time.Second, "the autoscaler's 2 workers bound", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, ns, hsel)
		return len(bound(pods)) == 6, fmt.Errorf("pods %s", describePods(pods))
	})
	expectGang(t, c, hgroup, 2, map[string]int32{kuberay.HeadGroup: 1, "workers": 1})
	if notes := eventsFor(t, c, ctx, ns, "StaleGang"); len(notes) != 0 {
		t.Errorf("stale-gang evictions: %v", notes)
	}
}

// scalingRayCluster is a RayCluster of CPU pods: a head (on nodes matching headSelector) and one
// worker group "workers".
func scalingRayCluster(ns, name string, replicas, minReplicas int64, autoscaling bool, headSelector map[string]string) *unstructured.Unstructured {
	container := func(name string) map[string]any {
		return map[string]any{"name": name, "image": "rayproject/ray:2.46.0",
			"resources": map[string]any{"requests": map[string]any{"cpu": "2", "memory": "4Gi"}, "limits": map[string]any{"cpu": "2", "memory": "4Gi"}}}
	}
	headSpec := map[string]any{"containers": []any{container("ray-head")}}
	if len(headSelector) > 0 {
		sel := map[string]any{}
		for k, v := range headSelector {
			sel[k] = v
		}
		headSpec["nodeSelector"] = sel
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"rayVersion":              "2.46.0",
			"enableInTreeAutoscaling": autoscaling,
			"headGroupSpec":           map[string]any{"rayStartParams": map[string]any{}, "template": map[string]any{"spec": headSpec}},
			"workerGroupSpecs": []any{map[string]any{
				"groupName": "workers", "replicas": replicas, "minReplicas": minReplicas, "maxReplicas": int64(10), "rayStartParams": map[string]any{},
				"template": map[string]any{"spec": map[string]any{"containers": []any{container("ray-worker")}}},
			}},
		},
	}}
}

// setWorkerGroup edits the RayCluster's first worker group, retrying on conflicts with KubeRay.
func setWorkerGroup(t *testing.T, c *cluster.Cluster, rc *unstructured.Unstructured, edit func(map[string]any)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client().Get(t.Context(), client.ObjectKeyFromObject(rc), rc); err != nil {
			return err
		}
		groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
		edit(groups[0].(map[string]any))
		if err := unstructured.SetNestedSlice(rc.Object, groups, "spec", "workerGroupSpecs"); err != nil {
			return err
		}
		return c.Client().Update(t.Context(), rc)
	}); err != nil {
		t.Fatalf("scaling RayCluster %s: %v", rc.GetName(), err)
	}
}

// expectGang waits until the PodGroup has the minimum and sub-group minimums.
func expectGang(t *testing.T, c *cluster.Cluster, key types.NamespacedName, minMember int32, subs map[string]int32) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("PodGroup %s minMember %d, sub-groups %v", key.Name, minMember, subs), func(ctx context.Context) (bool, error) {
		var pg fairwayv1.PodGroup
		if err := c.Client().Get(ctx, key, &pg); err != nil {
			return false, err
		}
		got := map[string]int32{}
		for _, sg := range pg.Spec.SubGroups {
			got[sg.Name] = sg.MinMember
		}
		ok := pg.Spec.MinMember == minMember && len(got) == len(subs)
		for k, v := range subs {
			ok = ok && got[k] == v
		}
		return ok, fmt.Errorf("minMember %d, sub-groups %v", pg.Spec.MinMember, got)
	})
}

func sameUIDs(a, b []corev1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.ContainsFunc(b, func(q corev1.Pod) bool { return q.UID == p.UID }) {
			return false
		}
	}
	return true
}
