//go:build e2enodes

package e2enodes

import (
	"maps"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/api/nodepool"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// h100Labels are the labels the gpu-agent publishes on an 8-GPU H100 node (and the kwok tier's
// H100Pool carries), set by the test on real nodes that run no agent.
func h100Labels() map[string]string {
	return map[string]string{
		fairwayv1.GPUTypeLabel: "H100", fairwayv1.GPUProductLabel: "NVIDIA-H100-80GB-HBM3",
		fairwayv1.GPUCountLabel: "8", fairwayv1.GPUMemoryLabel: "81559",
		nodepool.NVIDIAGPUProductLabel: "NVIDIA-H100-80GB-HBM3", nodepool.NVIDIAGPUCountLabel: "8", nodepool.NVIDIAGPUMemoryLabel: "81559",
	}
}

// startScheduler runs `fairway scheduler` as a local process against the cluster, as the kwok
// tier does, with its reservation pods on the preloaded pause image.
func startScheduler(t *testing.T, c *cluster.Cluster, extra ...string) *fairwayproc.Scheduler {
	t.Helper()
	if err := fairwayproc.EnsureSystem(t.Context(), c, fairwayproc.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	bin, err := fairwayproc.Build(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := fairwayproc.StartScheduler(t.Context(), c, fairwayproc.SchedulerOptions{
		Binary: bin, Name: "fairway-scheduler", Namespace: fairwayproc.DefaultNamespace,
		Args: append([]string{"--reservation-image=" + pauseImage}, extra...),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// pauseImage is the sandbox image preloaded into the nodes' containerd.
const pauseImage = "fairway.local/pause:3.10"

// queue creates a leaf queue serving namespaces, with a GPU quota ("" for none).
func queue(t *testing.T, c *cluster.Cluster, name, gpuQuota string, namespaces ...string) {
	t.Helper()
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fairwayv1.QueueSpec{Namespaces: namespaces}}
	if gpuQuota != "" {
		v := resource.MustParse(gpuQuota)
		q.Spec.Resources.GPU = &fairwayv1.ResourceQuota{Quota: &v}
	}
	mustCreate(t, c, q)
}

// fairwayPod is a busybox pod running script, shaped as fairway's webhook leaves a bare pod of
// queue: fairway's scheduler name, queue label and workload kind.
func fairwayPod(namespace, name, queue, script string) *corev1.Pod {
	p := shPod(namespace, name, "", script)
	p.Labels = map[string]string{fairwayv1.QueueLabel: queue, fairwayv1.ManagedLabel: "true"}
	p.Annotations = map[string]string{fairwayv1.WorkloadKindAnnotation: "pod"}
	p.Spec.SchedulerName = fairwayv1.SchedulerName
	p.Spec.PriorityClassName = fairwayv1.PriorityClassTraining
	return p
}

// withGPUs asks for n whole GPUs in the pod's container.
func withGPUs(p *corev1.Pod, n int) *corev1.Pod {
	q := resource.MustParse(strconv.Itoa(n))
	c := &p.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: q}
	c.Resources.Requests[fairwayv1.ResourceGPU] = q
	return p
}

// onNode pins the pod to a node by affinity (the scheduler still places it).
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	return p
}

// replicaSetOf runs n copies of the pod template p under the pod's name.
func replicaSetOf(p *corev1.Pod, n int32) client.Object {
	sel := map[string]string{"app": p.Name}
	labels := maps.Clone(p.Labels)
	labels["app"] = p.Name
	spec := *p.Spec.DeepCopy()
	spec.RestartPolicy = corev1.RestartPolicyAlways
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(p.Annotations)}, Spec: spec}},
	}
}
