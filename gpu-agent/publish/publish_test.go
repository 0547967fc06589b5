package publish

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

var owned = []string{fairwayv1alpha1.GPUCountLabel, fairwayv1alpha1.GPUTypeLabel, fairwayv1alpha1.NVLinkDomainLabel}

func inventory(healthy bool) fairwayv1alpha1.GPUInventory {
	return fairwayv1alpha1.GPUInventory{
		RefreshSeconds: 30,
		Driver:         "550.54.15",
		GPUs: []fairwayv1alpha1.GPUDevice{
			{Index: 0, UUID: "GPU-aaaa", MemoryMiB: 81920, Healthy: true},
			{Index: 1, UUID: "GPU-bbbb", MemoryMiB: 81920, Healthy: healthy},
		},
	}
}

func TestPublishOnlyOnChange(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		"kubernetes.io/hostname":          "n1",
		fairwayv1alpha1.NVLinkDomainLabel: "stale-domain",
	}}}
	patches := 0
	c := fake.NewClientBuilder().WithObjects(node).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC))
	p := New(c, Options{NodeName: "n1", Refresh: 30 * time.Second, OwnedLabels: owned, Clock: clock, Log: testr.New(t)})
	ctx := context.Background()
	labels := map[string]string{fairwayv1alpha1.GPUCountLabel: "2", fairwayv1alpha1.GPUTypeLabel: "H100"}

	get := func() (*corev1.Node, *fairwayv1alpha1.GPUInventory) {
		t.Helper()
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &n); err != nil {
			t.Fatal(err)
		}
		inv, err := Parse(n.Annotations[fairwayv1alpha1.GPUInventoryAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		return &n, inv
	}

	// 1. First publish: labels set, the stale owned label removed, foreign labels kept.
	res, err := p.Publish(ctx, labels, inventory(true))
	if err != nil || !res.Patched {
		t.Fatalf("first Publish = %+v, %v", res, err)
	}
	n, inv := get()
	wantLabels := map[string]string{"kubernetes.io/hostname": "n1", fairwayv1alpha1.GPUCountLabel: "2", fairwayv1alpha1.GPUTypeLabel: "H100"}
	if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if !inv.ObservedAt.Time.Equal(clock.Now()) || len(inv.GPUs) != 2 {
		t.Errorf("inventory = %+v", inv)
	}

	// 2. Nothing changed, within the refresh period: no write.
	clock.SetTime(clock.Now().Add(10 * time.Second))
	if res, _ := p.Publish(ctx, labels, inventory(true)); res.Patched || patches != 1 {
		t.Errorf("unchanged Publish patched (%d patches)", patches)
	}

	// 3. A refresh period later: the inventory is re-confirmed, nothing else is written.
	clock.SetTime(clock.Now().Add(20 * time.Second))
	res, _ = p.Publish(ctx, labels, inventory(true))
	if !res.Patched || len(res.Changed) != 0 {
		t.Errorf("confirmation = %+v", res)
	}
	if _, inv := get(); !inv.ObservedAt.Time.Equal(clock.Now()) {
		t.Errorf("ObservedAt = %v, want %v", inv.ObservedAt, clock.Now())
	}

	// 4. A GPU turns unhealthy: written at once, well within the period.
	clock.SetTime(clock.Now().Add(time.Second))
	labels[fairwayv1alpha1.GPUCountLabel] = "1"
	res, _ = p.Publish(ctx, labels, inventory(false))
	if diff := cmp.Diff([]string{fairwayv1alpha1.GPUCountLabel, "inventory"}, res.Changed); !res.Patched || diff != "" {
		t.Errorf("change = %+v (-want +got changed):\n%s", res, diff)
	}
	if n, inv := get(); n.Labels[fairwayv1alpha1.GPUCountLabel] != "1" || inv.GPUs[1].Healthy {
		t.Errorf("after change: labels %v, inventory %+v", n.Labels, inv.GPUs)
	}
	if patches != 3 {
		t.Errorf("%d patches, want 3", patches)
	}
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	inv := &fairwayv1alpha1.GPUInventory{RefreshSeconds: 30, ObservedAt: metav1.NewTime(now.Add(-time.Minute))}
	if Stale(inv, now) {
		t.Error("an inventory two periods old is not stale yet")
	}
	inv.ObservedAt = metav1.NewTime(now.Add(-2 * time.Minute))
	if !Stale(inv, now) {
		t.Error("an inventory four periods old is stale")
	}
	if !Stale(nil, now) {
		t.Error("no inventory counts as stale")
	}
}
