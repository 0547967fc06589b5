package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// TestRequestsMatchPodRequests checks that the requests readRequest reads are those of
// component-helpers' resource.PodRequests, which kube-scheduler and the kubelet use, for random
// pods: several containers, quantities in every notation (milli, decimal and binary suffixes,
// exponents, fractions that round up), extended resources beyond the six the summing keeps
// without a map, and pods that take PodRequests' own path (init and sidecar containers,
// overhead, pod-level requests).
func TestRequestsMatchPodRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	amounts := map[corev1.ResourceName][]string{
		corev1.ResourceCPU:              {"1", "100m", "0.5", "250m", "2", "1500m", "0.0001", "1e-1", "3.3"},
		corev1.ResourceMemory:           {"1Gi", "1G", "1500Mi", "512M", "1e9", "123456789", "0.5Gi", "1k"},
		v1alpha1.ResourceGPU:            {"1", "2", "8"},
		corev1.ResourceEphemeralStorage: {"10Gi", "1G", "0.1G"},
		"hugepages-2Mi":                 {"2Mi", "4Mi"},
		"example.com/a":                 {"1", "3"},
		"example.com/b":                 {"2", "500m"},
		"example.com/c":                 {"7"},
	}
	names := make([]corev1.ResourceName, 0, len(amounts))
	for n := range amounts {
		names = append(names, n)
	}
	slices.Sort(names)
	randomList := func() corev1.ResourceList {
		l := corev1.ResourceList{}
		for _, n := range names {
			if rng.IntN(2) == 0 {
				vs := amounts[n]
				l[n] = resource.MustParse(vs[rng.IntN(len(vs))])
			}
		}
		return l
	}
	always := corev1.ContainerRestartPolicyAlways
	for i := range 3000 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("p%d", i)}}
		for c := range 1 + rng.IntN(4) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
				Name: fmt.Sprintf("c%d", c), Resources: corev1.ResourceRequirements{Requests: randomList()},
			})
		}
		switch rng.IntN(8) {
		case 0:
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: randomList()}}}
		case 1:
			pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: randomList()}}}
		case 2:
			pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")}
		case 3:
			pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
		}
		// The oracle: what readRequest did before it summed containers itself.
		var want, got Request
		for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
			want.setAmount(name, &q)
		}
		want.sortScalars()
		got.readAmounts(pod)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pod %d (%d containers, %d init, overhead %v, pod-level %v):\nread %+v\nwant %+v (resource.PodRequests)",
				i, len(pod.Spec.Containers), len(pod.Spec.InitContainers), pod.Spec.Overhead != nil, pod.Spec.Resources != nil, got, want)
		}
	}
}

// TestShareTicketIsNotAScalar: fairway.dev/gpu-share, the kubelet's ticket for a fractional pod's
// device, is neither a pod's extended-resource request nor a node's capacity to the scheduler,
// which accounts the share by its size: counting it too would count the share twice, and a
// node whose device plugin has not registered yet would look full.
func TestShareTicketIsNotAScalar(t *testing.T) {
	ticket := corev1.ResourceList{v1alpha1.ResourceGPUShare: resource.MustParse("1"), "example.com/a": resource.MustParse("1")}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: ticket, Limits: ticket}}}}}
	var r Request
	r.readAmounts(pod)
	if len(r.Scalars) != 1 || r.Scalars[0].Name != "example.com/a" {
		t.Errorf("scalars %v, want example.com/a alone", r.Scalars)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		v1alpha1.ResourceGPU: resource.MustParse("8"), v1alpha1.ResourceGPUShare: resource.MustParse("880")}}}
	info, err := NodeInfoFromNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Allocatable.Scalars) != 0 || len(info.GPUs) != 8 {
		t.Errorf("allocatable scalars %v, GPUs %d; want none and 8", info.Allocatable.Scalars, len(info.GPUs))
	}
}
