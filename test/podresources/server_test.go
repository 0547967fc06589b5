package podresources

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func pod(name, node string, gpusPerContainer ...int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{NodeName: node}}
	for i, n := range gpusPerContainer {
		c := corev1.Container{Name: string(rune('a' + i))}
		if n > 0 {
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func TestStandInAllocatesLikeTheDeviceManager(t *testing.T) {
	s := NewServer("n1", []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Observe(pod("a", "n1", 1)))
	must(s.Observe(pod("b", "n1", 0, 2)))
	must(s.Observe(pod("cpu", "n1", 0)))
	must(s.Observe(pod("elsewhere", "n2", 4)))
	if got := s.Assigned("a"); !slices.Equal(got, []string{"GPU-0"}) {
		t.Errorf("a = %v", got)
	}
	if got := s.Assigned("b"); !slices.Equal(got, []string{"GPU-1", "GPU-2"}) {
		t.Errorf("b = %v", got)
	}
	// Stable: seeing the pod again changes nothing.
	must(s.Observe(pod("a", "n1", 1)))
	if got := s.Assigned("a"); !slices.Equal(got, []string{"GPU-0"}) {
		t.Errorf("a after re-observe = %v", got)
	}
	// Never two pods on one device.
	if err := s.Observe(pod("c", "n1", 2)); err == nil {
		t.Error("admitted 2 GPUs with 1 free")
	}
	// A finished pod frees its device.
	done := pod("a", "n1", 1)
	done.Status.Phase = corev1.PodSucceeded
	must(s.Observe(done))
	must(s.Observe(pod("c", "n1", 2)))
	if got := s.Assigned("c"); !slices.Equal(got, []string{"GPU-0", "GPU-3"}) {
		t.Errorf("c = %v", got)
	}

	ctx := context.Background()
	list, _ := s.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	var names []string
	for _, pr := range list.PodResources {
		names = append(names, pr.Name)
	}
	if !slices.Equal(names, []string{"b", "c", "cpu"}) {
		t.Errorf("List pods = %v", names)
	}
	got, err := s.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "b"})
	if err != nil || got.PodResources.Containers[1].Devices[0].DeviceIds[1] != "GPU-2" {
		t.Errorf("Get b = %v, %v", got, err)
	}
	if _, err := s.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "nope"}); err == nil {
		t.Error("Get of an unknown pod succeeded")
	}
	alloc, _ := s.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if len(alloc.Devices[0].DeviceIds) != 4 {
		t.Errorf("allocatable = %v", alloc)
	}
}
