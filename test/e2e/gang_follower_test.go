//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	"github.com/fairway-sched/fairway/adapters/registry"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/podgroups"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestGangFollowerEnvtest runs podgroups.Follower against a real API server (envtest) with
// KubeRay's CRDs, installed only after the follower started, as an operator installed after the
// scheduler is. A RayCluster is scaled as its user and the Ray autoscaler scale it; the PodGroup
// the runtime made for it (labelled managed-by fairway) follows: minMember and sub-groups, with a
// sub-group's topology constraint kept. A PodGroup a user wrote for another RayCluster is never
// changed.
func TestGangFollowerEnvtest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// envtest waits 10 s by default for installed CRDs to be served; CI's 2 cores, shared with
	// the suite's other clusters and the unit tests, once needed more for KubeRay's (large) CRDs.
	const crdWait = 2 * time.Minute
	env := &envtest.Environment{BinaryAssetsDirectory: bin, CRDDirectoryPaths: []string{filepath.Join(root, "charts", "fairway", "crds")},
		ErrorIfCRDPathMissing: true, CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: crdWait}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	scheme := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := fairwayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	inf, err := cache.New(cs, cl, cache.NewQueue(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	f, err := podgroups.NewFollower(cl, dyn, mapper, inf, registry.GangShapers(registry.All()),
		podgroups.FollowerOptions{KindPollInterval: 200 * time.Millisecond, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = inf.Start(runCtx) }()
	go func() { _ = f.Start(runCtx) }()

	ns := "ray-team"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The PodGroups the runtime made from the pods of two RayClusters, before KubeRay's CRDs
	// are even known to the follower; the second is a user's.
	managed := &fairwayv1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: adapters.GroupName("ray", "rc"), Labels: map[string]string{fairwayv1.ManagedByLabel: fairwayv1.ManagedByValue}},
		Spec: fairwayv1.PodGroupSpec{MinMember: 7, Queue: "ray-team", SubGroups: []fairwayv1.SubGroup{
			{Name: kuberay.HeadGroup, MinMember: 1},
			{Name: "workers", MinMember: 6, TopologyConstraint: &fairwayv1.TopologyConstraint{RequiredLevel: "fairway.dev/rack"}},
		}},
	}
	users := &fairwayv1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: adapters.GroupName("ray", "theirs")},
		Spec:       fairwayv1.PodGroupSpec{MinMember: 2},
	}
	for _, pg := range []*fairwayv1.PodGroup{managed, users} {
		if err := cl.Create(ctx, pg); err != nil {
			t.Fatal(err)
		}
	}

	kuberayMod, err := cluster.ModuleDir(ctx, "kuberay", cluster.KubeRayModule)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(kuberayMod, "config", "crd", "bases")}, ErrorIfPathMissing: true, MaxTime: crdWait}); err != nil {
		t.Fatalf("installing KubeRay's CRDs: %v", err)
	}
	rc := rayClusterObject(ns, "rc", 6)
	theirs := rayClusterObject(ns, "theirs", 6)
	for _, o := range []*unstructured.Unstructured{rc, theirs} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	workers := func(n int32) []fairwayv1.SubGroup {
		return []fairwayv1.SubGroup{{Name: kuberay.HeadGroup, MinMember: 1},
			{Name: "workers", MinMember: n, TopologyConstraint: &fairwayv1.TopologyConstraint{RequiredLevel: "fairway.dev/rack"}}}
	}
	expect := func(what string, minMember int32, subs []fairwayv1.SubGroup) {
		t.Helper()
		eventually(t, 20*time.Second, what, func(ctx context.Context) (bool, error) {
			var pg fairwayv1.PodGroup
			if err := cl.Get(ctx, client.ObjectKeyFromObject(managed), &pg); err != nil {
				return false, err
			}
			if d := cmp.Diff(subs, pg.Spec.SubGroups); pg.Spec.MinMember != minMember || d != "" {
				return false, fmt.Errorf("minMember %d, sub-groups (-want +got):\n%s", pg.Spec.MinMember, d)
			}
			return true, nil
		})
	}
	scale := func(edit func(spec map[string]any, group map[string]any)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), rc); err != nil {
				return err
			}
			spec := rc.Object["spec"].(map[string]any)
			groups := spec["workerGroupSpecs"].([]any)
			edit(spec, groups[0].(map[string]any))
			return cl.Update(ctx, rc)
		}); err != nil {
			t.Fatal(err)
		}
	}

	expect("the gang as created (6 workers)", 7, workers(6))
	scale(func(_, g map[string]any) { g["replicas"] = int64(3) })
	expect("scaled to 3 workers", 4, workers(3))
	scale(func(_, g map[string]any) { g["replicas"] = int64(6) })
	expect("scaled back to 6 workers", 7, workers(6))
	scale(func(spec, g map[string]any) {
		spec["enableInTreeAutoscaling"] = true
		g["minReplicas"] = int64(1)
	})
	expect("autoscaled from minReplicas 1", 2, workers(1))
	scale(func(_, g map[string]any) { g["replicas"] = int64(9) })
	expect("the autoscaler's replicas leave the minimum alone", 2, workers(1))
	scale(func(_, g map[string]any) { g["minReplicas"] = int64(0) })
	expect("a worker group of minimum 0 is no sub-group", 1, []fairwayv1.SubGroup{{Name: kuberay.HeadGroup, MinMember: 1}})

	var got fairwayv1.PodGroup
	if err := cl.Get(ctx, client.ObjectKeyFromObject(users), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.MinMember != 2 || len(got.Spec.SubGroups) != 0 {
		t.Errorf("the user's PodGroup was changed: %+v", got.Spec)
	}
}

// rayClusterObject is a RayCluster of one worker group "workers" of the given replicas.
func rayClusterObject(ns, name string, replicas int64) *unstructured.Unstructured {
	container := map[string]any{"name": "ray", "image": "rayproject/ray:2.46.0"}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"headGroupSpec": map[string]any{"rayStartParams": map[string]any{},
				"template": map[string]any{"spec": map[string]any{"containers": []any{container}}}},
			"workerGroupSpecs": []any{map[string]any{
				"groupName": "workers", "replicas": replicas, "minReplicas": int64(0), "maxReplicas": int64(10), "rayStartParams": map[string]any{},
				"template": map[string]any{"spec": map[string]any{"containers": []any{container}}},
			}},
		},
	}}
}
