//go:build e2e

package e2e

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// fairwayNamespace is where the webhook keeps its certificate Secret; its pods are never touched.
const fairwayNamespace = "fairway-system"

var (
	buildOnce   sync.Once
	fairwayPath string
	buildErr    error
)

// fairwayBinary builds cmd/fairway from this tree once per test binary, into a temporary
// directory: bin/ is shared by every worktree, and the test must run the code it tests.
func fairwayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fairway-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		fairwayPath, buildErr = fairwayproc.Build(context.Background(), dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return fairwayPath
}

// createNamespace creates a namespace and waits for its default ServiceAccount, without which
// the API server refuses pods there.
func createNamespace(t *testing.T, c *cluster.Cluster, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Client().Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client().Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s has no default ServiceAccount: %v", name, err)
	}
}

// createQueue creates a leaf queue serving namespaces.
func createQueue(t *testing.T, c *cluster.Cluster, name string, namespaces ...string) {
	t.Helper()
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fairwayv1.QueueSpec{Namespaces: namespaces}}
	if err := c.Client().Create(t.Context(), q); err != nil {
		t.Fatalf("creating queue %s: %v", name, err)
	}
}

// createPriorityClasses installs fairway's priority classes, as the Helm chart does.
func createPriorityClasses(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for name, value := range map[string]int32{
		fairwayv1.PriorityClassTraining:    50,
		fairwayv1.PriorityClassInteractive: fairwayv1.NonPreemptiblePriority,
		fairwayv1.PriorityClassInference:   125,
	} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if err := c.Client().Create(t.Context(), pc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating priority class %s: %v", name, err)
		}
	}
}

// startWebhook runs `fairway webhook` against the cluster (see fairwayproc.StartWebhook).
func startWebhook(t *testing.T, c *cluster.Cluster, probeNamespace string, extraArgs ...string) *fairwayproc.Webhook {
	t.Helper()
	begin := time.Now()
	wh, err := fairwayproc.StartWebhook(t.Context(), c, fairwayproc.WebhookOptions{
		Binary: fairwayBinary(t), Namespace: fairwayNamespace, ProbeNamespace: probeNamespace,
		Args: append([]string{"--v=2"}, extraArgs...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fairway webhook serving the API server after %v", time.Since(begin).Round(time.Millisecond))
	return wh
}

// plainPod is a minimal pod of one container.
func plainPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Command: []string{"sleep", "3600"},
		}}},
	}
}

// webhookConfiguration reads fairway's MutatingWebhookConfiguration.
func webhookConfiguration(t *testing.T, c *cluster.Cluster) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client().Get(t.Context(), client.ObjectKey{Name: "fairway-webhook"}, mwc); err != nil {
		t.Fatalf("reading the webhook configuration: %v", err)
	}
	return mwc
}

// startScheduler starts fairway's scheduler and the gpu-agents of the GPU nodes (shared GPUs need
// the node's gpu-agent: it reports the device the kubelet gave the GPU's reservation pod).
func startScheduler(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	nodes, err := gpuagents.GPUNodes(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Nodes: nodes, Binary: fairwayBinary(t)})
	if err != nil {
		t.Fatalf("starting the gpu-agents: %v", err)
	}
	t.Cleanup(fleet.Stop)
	if _, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-scheduler", Path: fairwayBinary(t),
		Args: []string{"scheduler", "--kubeconfig=" + c.Kubeconfig()}}); err != nil {
		t.Fatalf("starting fairway scheduler: %v", err)
	}
}

// podsOf lists the pods in namespace with the given labels.
func podsOf(t *testing.T, c *cluster.Cluster, namespace string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.Client().List(t.Context(), &pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	return pods.Items
}

// waitPods waits until at least n pods match and returns them.
func waitPods(t *testing.T, c *cluster.Cluster, namespace string, labels map[string]string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		pods = podsOf(t, c, namespace, labels)
		return len(pods) >= n, nil
	})
	if err != nil {
		t.Fatalf("want %d pods with labels %v in %s, got %d: %s", n, labels, namespace, len(pods), describePods(pods))
	}
	return pods
}

// expectPod is what a pod handed to fairway must carry.
type expectPod struct {
	queue, framework, kind, podGroup, subGroup, priorityClass string
	minMember                                                 int
	priority                                                  *int32
	gpuFraction, gpuContainer                                 string // "" for no share
}

// checkPod compares a pod the API server stored with what the webhook must have written.
func checkPod(t *testing.T, pod *corev1.Pod, want expectPod) {
	t.Helper()
	name := pod.Name
	errorf := func(format string, args ...any) { t.Errorf("pod %s: "+format, append([]any{name}, args...)...) }
	if pod.Spec.SchedulerName != fairwayv1.SchedulerName {
		errorf("schedulerName %q, want %q", pod.Spec.SchedulerName, fairwayv1.SchedulerName)
	}
	for k, v := range map[string]string{
		fairwayv1.QueueLabel: want.queue, fairwayv1.FrameworkLabel: want.framework, fairwayv1.ManagedLabel: "true",
	} {
		if pod.Labels[k] != v {
			errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	ann := map[string]string{
		fairwayv1.WorkloadKindAnnotation: want.kind,
		fairwayv1.MinMemberAnnotation:    strconv.Itoa(want.minMember),
		fairwayv1.SubGroupAnnotation:     want.subGroup,
		fairwayv1.GPUFractionAnnotation:  want.gpuFraction,
		fairwayv1.GPUContainerAnnotation: want.gpuContainer,
	}
	if want.podGroup != "" {
		ann[fairwayv1.PodGroupAnnotation] = want.podGroup
	}
	for k, v := range ann {
		if pod.Annotations[k] != v {
			errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	if pod.Spec.PriorityClassName != want.priorityClass {
		errorf("priorityClassName %q, want %q", pod.Spec.PriorityClassName, want.priorityClass)
	}
	if want.priority != nil && (pod.Spec.Priority == nil || *pod.Spec.Priority != *want.priority) {
		errorf("priority %v, want %d (resolved by the API server from the class the webhook set)", ptr.Deref(pod.Spec.Priority, -1), *want.priority)
	}
	if want.gpuFraction == "" {
		if n := fairwayv1.ShareRequest(pod); n != 0 {
			errorf("asks for %d %s but for no GPU share", n, fairwayv1.ResourceGPUShare)
		}
		return
	}
	if err := shareTicketOnly(pod); err != nil {
		errorf("%v", err)
	}
	for _, ctr := range pod.Spec.Containers {
		_, found := ctr.Resources.Limits[fairwayv1.ResourceGPUShare]
		if found != (ctr.Name == want.gpuContainer) {
			errorf("container %s: %s = %v, want it only on %s", ctr.Name, fairwayv1.ResourceGPUShare, found, want.gpuContainer)
		}
	}
}
