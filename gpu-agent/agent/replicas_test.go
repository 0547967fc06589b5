//go:build cgo

package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/gpu-agent/discovery"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/mps"
	"github.com/fairway-sched/fairway/gpu-agent/mpsvolume"
	"github.com/fairway-sched/fairway/gpu-agent/publish"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/test/podresources"
)

// TestAgentPublishesTimeSlicingReplicas runs the agent's discovery pass on a DGX H100 mock node
// (8 GPUs from go-nvml's mock server) whose device plugin time-slices every GPU 4 ways: the
// kubelet (the PodResources stand-in, over its unix socket) lists each UUID 4 times and the node
// advertises 32 nvidia.com/gpu. The published inventory says replicas 4, and the scheduler's
// snapshot reads the node as its 8 physical GPUs. When the kubelet stops answering and the node
// cannot be read, the count stays; when the plugin stops sharing, it goes.
func TestAgentPublishesTimeSlicingReplicas(t *testing.T) {
	const name, gpus, replicas = "ts-node", 8, 4
	opts := Options{NodeName: name, NVML: "mock:dgxh100", RefreshInterval: 30 * time.Second}
	lib, err := OpenLibrary(&opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range gpus {
		for r := range replicas {
			ids = append(ids, fmt.Sprintf("%s::%d", fakegpu.DeviceUUID(name, i), r))
		}
	}
	kubelet := podresources.NewServer(name, ids)
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	stop, err := kubelet.Serve(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop() }() // the server started last
	lister, err := assign.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer lister.Close()

	advertised := *resource.NewQuantity(gpus*replicas, resource.DecimalSI)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{fairwayv1alpha1.ResourceGPU: advertised},
		Allocatable: corev1.ResourceList{fairwayv1alpha1.ResourceGPU: advertised},
	}}
	c := fake.NewClientBuilder().WithObjects(node).WithStatusSubresource(node).Build()
	ctx := context.Background()
	a := &Agent{opts: opts, lib: lib, log: testr.New(t), kick: make(chan struct{}, 1),
		mps: mpsvolume.New(mpsvolume.Options{NodeName: name, MPS: mps.Options{Enabled: false}})}
	nodeOK, kubeletOK := true, true
	a.node = func(ctx context.Context) (*corev1.Node, error) {
		if !nodeOK {
			return nil, errors.New("cache not synced")
		}
		var n corev1.Node
		err := c.Get(ctx, client.ObjectKey{Name: name}, &n)
		return &n, err
	}
	a.allocatable = func(ctx context.Context) ([]string, error) {
		if !kubeletOK {
			return nil, errors.New("kubelet unavailable")
		}
		return lister.Allocatable(ctx, fairwayv1alpha1.ResourceGPU)
	}
	p := publish.New(c, publish.Options{NodeName: name, Refresh: opts.RefreshInterval, OwnedLabels: discovery.OwnedLabels, Log: testr.New(t)})
	published := func() (*corev1.Node, *fairwayv1alpha1.GPUInventory) {
		t.Helper()
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		inv, err := publish.Parse(n.Annotations[fairwayv1alpha1.GPUInventoryAnnotation])
		if err != nil || inv == nil {
			t.Fatalf("published inventory: %v, %v", inv, err)
		}
		return &n, inv
	}

	a.discoverAndPublish(ctx, p)
	n, inv := published()
	if inv.Replicas != replicas || len(inv.GPUs) != gpus {
		t.Fatalf("published %d GPUs with replicas %d, want %d with %d", len(inv.GPUs), inv.Replicas, gpus, replicas)
	}
	if got := n.Labels[fairwayv1alpha1.GPUCountLabel]; got != fmt.Sprint(gpus) {
		t.Errorf("%s = %s, want %d", fairwayv1alpha1.GPUCountLabel, got, gpus)
	}
	info, err := snapshot.NodeInfoFromNode(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.GPUs) != gpus {
		t.Errorf("the snapshot reads %d GPUs on a node of %d GPUs advertised %d times", len(info.GPUs), gpus, replicas)
	}
	for i, g := range info.GPUs {
		if g.Index != i || g.UUID != fakegpu.DeviceUUID(name, i) {
			t.Errorf("slot %d = GPU %d %s, want GPU %d %s", i, g.Index, g.UUID, i, fakegpu.DeviceUUID(name, i))
		}
	}

	// Neither source answers: a transient failure keeps the count rather than dropping it.
	nodeOK, kubeletOK = false, false
	a.discoverAndPublish(ctx, p)
	if _, inv := published(); inv.Replicas != replicas {
		t.Errorf("replicas = %d after a failed read, want %d kept", inv.Replicas, replicas)
	}

	// The kubelet alone still tells.
	kubeletOK = true
	a.discoverAndPublish(ctx, p)
	if _, inv := published(); inv.Replicas != replicas {
		t.Errorf("replicas = %d from the kubelet alone, want %d", inv.Replicas, replicas)
	}

	// The device plugin stops time-slicing: each GPU once, and the node says so.
	nodeOK = true
	var once []string
	for i := range gpus {
		once = append(once, fakegpu.DeviceUUID(name, i))
	}
	stop()
	kubelet = podresources.NewServer(name, once)
	if stop, err = kubelet.Serve(socket); err != nil {
		t.Fatal(err)
	}
	n.Status.Capacity[fairwayv1alpha1.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	n.Status.Allocatable[fairwayv1alpha1.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	a.discoverAndPublish(ctx, p)
	if _, inv := published(); inv.Replicas != 0 {
		t.Errorf("replicas = %d once each GPU is advertised once, want 0", inv.Replicas)
	}
}
