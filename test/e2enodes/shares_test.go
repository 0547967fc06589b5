//go:build e2enodes

package e2enodes

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
	"github.com/fairway-sched/fairway/test/nodes"
)

// withFraction makes the pod a fractional one, with the ConfigMap-fed GPU environment the
// webhook wires into its GPU container (as the kwok tier's pods have it).
func withFraction(p *corev1.Pod, f string) *corev1.Pod {
	cm := "fairway-gpu-" + p.Name
	p.Annotations[fairwayv1.GPUFractionAnnotation] = f
	p.Annotations[fairwayv1.GPUContainerAnnotation] = "main"
	p.Annotations[fairwayv1.GPUConfigMapAnnotation] = cm
	ref := func(key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key, Optional: ptr.To(optional)}}}
	}
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, ref("NVIDIA_VISIBLE_DEVICES", false),
		ref("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", true), ref("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", true))
	return p
}

// shareScript prints the GPU the container was given, leaves a mark in /dev/shm, and keeps
// listing /dev/shm.
const shareScript = `echo "visible=$NVIDIA_VISIBLE_DEVICES"
echo "$POD_NAMESPACE" >/dev/shm/mark-$POD_NAMESPACE
while :; do echo "shm: $(ls /dev/shm | tr '\n' ' ')"; sleep 1; done`

// TestGPUShares: two half-GPU pods of two namespaces on one real node. fairway holds the GPU
// with a reservation pod, to which the real kubelet allocates a device from the device plugin;
// the gpu-agent (on go-nvml's mock, reading that kubelet's PodResources API) reports its UUID;
// and each share's container starts with NVIDIA_VISIBLE_DEVICES set to exactly that UUID. Their
// /dev/shm are their own: neither sees the other's mark. The kwok tier's kubelet is a
// PodResources stand-in that fairway's own test code feeds, its containers never start, so
// neither the device the kubelet chose, nor the environment a container really gets, nor its
// IPC namespace is observed there.
func TestGPUShares(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{})
	ns := nodes.StartT(t, c, nodes.Config{Count: 1, Labels: h100Labels()})
	node := ns.Nodes[0]
	bin, err := fairwayproc.Build(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	agents, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Binary: bin, Nodes: []gpuagents.Node{{
		Name: node.Name, System: "dgxh100", GPUs: 8, PodResourcesSocket: node.PodResourcesSocket}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agents.Stop)
	startScheduler(t, c)

	spaces := []string{"share-a", "share-b"}
	for _, n := range spaces {
		newNamespace(t, c, n)
		// Interactive pods are never preempted, so they only run within their queue's quota.
		queue(t, c, n, "1", n)
		p := onNode(withFraction(fairwayPod(n, "half", n, shareScript), "0.5"), node.Name)
		p.Spec.PriorityClassName = fairwayv1.PriorityClassInteractive
		p.Annotations[fairwayv1.WorkloadKindAnnotation] = "notebook"
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "POD_NAMESPACE",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
		mustCreate(t, c, p)
	}

	pr, err := assign.Dial(node.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, n := range spaces {
		pod := waitPhase(t, c, n, "half", corev1.PodRunning, 3*time.Minute)
		uuid := pod.Annotations[fairwayv1.GPUUUIDAnnotation]
		logs := waitLog(t, c, n, "half", "visible=", 30*time.Second)
		visible := strings.TrimPrefix(strings.SplitN(logs, "\n", 2)[0], "visible=")
		if visible == "" || visible != uuid {
			t.Errorf("%s/half: NVIDIA_VISIBLE_DEVICES=%q, the pod's %s is %q", n, visible, fairwayv1.GPUUUIDAnnotation, uuid)
		}
		// The kubelet's own record: the device it allocated to a reservation pod of fairway's.
		all, err := pr.List(t.Context(), fairwayv1.ResourceGPU)
		if err != nil {
			t.Fatal(err)
		}
		var holders []string
		for pod, ids := range all {
			if slices.Contains(ids, visible) {
				holders = append(holders, pod.String())
			}
		}
		if len(holders) != 1 || !strings.HasPrefix(holders[0], fairwayproc.DefaultNamespace+"/") {
			t.Errorf("%s/half sees GPU %s; the kubelet allocated it to %v, want one reservation pod in %s", n, visible, holders, fairwayproc.DefaultNamespace)
		}
		t.Logf("%s/half: NVIDIA_VISIBLE_DEVICES=%s, held by %v", n, visible, holders)
	}

	a, _ := getPod(t.Context(), c, "share-a", "half")
	b, _ := getPod(t.Context(), c, "share-b", "half")
	if a.Annotations[fairwayv1.GPUUUIDAnnotation] != b.Annotations[fairwayv1.GPUUUIDAnnotation] {
		t.Logf("the two shares are on different GPUs (%s, %s): /dev/shm is still checked", a.Annotations[fairwayv1.GPUUUIDAnnotation], b.Annotations[fairwayv1.GPUUUIDAnnotation])
	}
	for _, n := range spaces {
		var last string
		eventually(t, 30*time.Second, n+"/half listing /dev/shm", func(ctx context.Context) (bool, error) {
			logs, err := podLogs(ctx, c, n, "half")
			if err != nil {
				return false, nil
			}
			lines := strings.Split(logs, "\n")
			last = lines[len(lines)-1]
			return strings.HasPrefix(last, "shm: ") && strings.Contains(last, "mark-"+n), nil
		})
		if got := strings.Fields(strings.TrimPrefix(last, "shm: ")); !slices.Equal(got, []string{"mark-" + n}) {
			t.Errorf("%s/half's /dev/shm holds %v; want only its own mark", n, got)
		}
	}
}
