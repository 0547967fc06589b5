package assign_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/test/podresources"
)

var inventory = &fairwayv1alpha1.GPUInventory{GPUs: []fairwayv1alpha1.GPUDevice{
	{Index: 0, UUID: "GPU-aaaa", Healthy: true},
	{Index: 1, UUID: "GPU-bbbb", Healthy: true},
	{Index: 2, UUID: "GPU-cccc", Healthy: true},
}}

func gpuPod(name string, gpus int64, reservation bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fairway-system", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
			Name:      "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fairwayv1alpha1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}},
		}}},
	}
	if reservation {
		p.Labels[fairwayv1alpha1.ReservationLabel] = "true"
	}
	return p
}

// The assignment path end to end, over a real unix socket: the PodResources stand-in plays the
// kubelet, the Assigner reads it with the gRPC client and annotates the reservation pods.
func TestAssignFromPodResources(t *testing.T) {
	kubelet := podresources.NewServer("n1", []string{"GPU-aaaa", "GPU-bbbb", "GPU-cccc"})
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	stop, err := kubelet.Serve(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	r1, w1, r2 := gpuPod("reservation-1", 1, true), gpuPod("whole", 2, false), gpuPod("reservation-2", 1, true)
	for _, p := range []*corev1.Pod{r1, w1} {
		if err := kubelet.Observe(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := kubelet.Observe(r2); err == nil {
		t.Fatal("the stand-in admitted a fourth GPU on a three-GPU node")
	}

	patches := 0
	c := fake.NewClientBuilder().WithObjects(r1, w1, r2).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	lister, err := assign.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer lister.Close()
	a := assign.New(lister, c, assign.Options{
		Pods: func(ctx context.Context) ([]corev1.Pod, error) {
			var l corev1.PodList
			err := c.List(ctx, &l)
			return l.Items, err
		},
		Inventory: func() *fairwayv1alpha1.GPUInventory { return inventory },
		Log:       testr.New(t),
	})
	ctx := context.Background()
	annotations := func(p *corev1.Pod) (string, string) {
		t.Helper()
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		return got.Annotations[fairwayv1alpha1.GPUUUIDAnnotation], got.Annotations[fairwayv1alpha1.GPUIndexAnnotation]
	}

	pending, err := a.Sync(ctx)
	if err != nil || pending != 1 {
		t.Fatalf("Sync = %d pending, %v; want 1 (reservation-2 not admitted)", pending, err)
	}
	want := kubelet.Assigned(r1.UID)
	if uuid, idx := annotations(r1); len(want) != 1 || uuid != want[0] || idx != "0" {
		t.Errorf("reservation-1 annotated %s/%s, the kubelet gave it %v", uuid, idx, want)
	}
	if uuid, _ := annotations(w1); uuid != "" {
		t.Error("a pod that is not a reservation was annotated")
	}
	if got := a.PodGPUs(w1); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("PodGPUs(whole) = %v, want [1 2]", got)
	}

	if _, err := a.Sync(ctx); err != nil || patches != 1 {
		t.Errorf("an unchanged pass patched again (%d patches, err %v)", patches, err)
	}

	// The whole-GPU pod ends; the kubelet admits reservation-2 on a freed GPU.
	kubelet.Forget(w1.UID)
	if err := kubelet.Observe(r2); err != nil {
		t.Fatal(err)
	}
	if pending, err := a.Sync(ctx); err != nil || pending != 0 {
		t.Fatalf("Sync = %d pending, %v", pending, err)
	}
	if uuid, idx := annotations(r2); uuid != kubelet.Assigned(r2.UID)[0] || idx != "1" {
		t.Errorf("reservation-2 annotated %s/%s, the kubelet gave it %v", uuid, idx, kubelet.Assigned(r2.UID))
	}
}

func TestResolve(t *testing.T) {
	cases := map[string]struct {
		index int
		ok    bool
	}{
		"GPU-bbbb":    {1, true},
		"GPU-cccc::3": {2, true}, // time-slicing replica
		"2":           {2, true}, // --device-id-strategy=index
		"0::1":        {0, true},
		"MIG-1234":    {0, false},
		"GPU-zzzz":    {0, false},
		"7":           {0, false},
	}
	for id, tc := range cases {
		idx, _, ok := assign.Resolve(inventory, id)
		if idx != tc.index || ok != tc.ok {
			t.Errorf("Resolve(%q) = %d, %v; want %d, %v", id, idx, ok, tc.index, tc.ok)
		}
	}
	if _, _, ok := assign.Resolve(nil, "GPU-aaaa"); ok {
		t.Error("resolved without an inventory")
	}
}

// Allocatable reads what a time-slicing device plugin advertises: each GPU once per replica.
func TestAllocatableListsReplicas(t *testing.T) {
	ids := []string{"GPU-aaaa::0", "GPU-aaaa::1", "GPU-bbbb::0", "GPU-bbbb::1"}
	kubelet := podresources.NewServer("n1", ids)
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	stop, err := kubelet.Serve(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	lister, err := assign.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer lister.Close()
	got, err := lister.Allocatable(context.Background(), fairwayv1alpha1.ResourceGPU)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Errorf("Allocatable = %v, want %v", got, ids)
	}
	if other, err := lister.Allocatable(context.Background(), "example.com/fpga"); err != nil || len(other) != 0 {
		t.Errorf("Allocatable(other resource) = %v, %v; want none", other, err)
	}
}
