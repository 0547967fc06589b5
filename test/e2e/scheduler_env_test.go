//go:build e2e

package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// This file holds what the scheduler's e2e tests share: running `fairway scheduler` as a real
// process against a local cluster, and building the pods, queues and workloads the scenarios
// submit, shaped as fairway's webhook leaves them.

// fairwayNS is fairway's own namespace in the scheduler tests.
const schedNamespace = fairwayproc.DefaultNamespace

// schedProc is one running `fairway scheduler`.
type schedProc = fairwayproc.Scheduler

// buildFairway builds the fairway binary of this tree (with cgo, for the agents too).
func buildFairway(t *testing.T) string {
	t.Helper()
	bin, err := gpuagents.BuildBinary(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startSched starts a scheduler replica named name and waits until it is ready (caches synced;
// when it is the leader, snapshot built) unless wait is false.
func startSched(t *testing.T, c *cluster.Cluster, bin, name string, wait bool, extra ...string) *schedProc {
	t.Helper()
	sp, err := fairwayproc.StartScheduler(t.Context(), c, fairwayproc.SchedulerOptions{
		Binary: bin, Name: name, Namespace: schedNamespace, Args: extra, NoWait: !wait,
	})
	if sp != nil && os.Getenv("FAIRWAY_E2E_KEEP_LOGS") != "" {
		t.Cleanup(func() { keepLog(t, sp.Process) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// ensureSchedFixtures creates fairway's namespace and its default priority classes.
func ensureSchedFixtures(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := fairwayproc.EnsureSystem(t.Context(), c, schedNamespace); err != nil {
		t.Fatal(err)
	}
}

// mustCreate creates obj, accepting that it exists already.
func mustCreate(t *testing.T, c *cluster.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client().Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// newNamespace creates a namespace for one scenario, with a default ServiceAccount ready.
func newNamespace(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	eventually(t, 2*time.Minute, "the default ServiceAccount of "+name, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset().CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// schedQueue creates a leaf queue serving namespaces, with a GPU quota ("" for none).
func schedQueue(t *testing.T, c *cluster.Cluster, name, gpuQuota string, namespaces ...string) {
	t.Helper()
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fairwayv1.QueueSpec{Namespaces: namespaces}}
	if gpuQuota != "" {
		v := resource.MustParse(gpuQuota)
		q.Spec.Resources.GPU = &fairwayv1.ResourceQuota{Quota: &v}
	}
	mustCreate(t, c, q)
}

// updateQueue changes the spec of queue name: the scheduler writes its status meanwhile, so the
// read and the write are retried until no status write raced them.
func updateQueue(t *testing.T, c *cluster.Cluster, name string, change func(*fairwayv1.QueueSpec)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var q fairwayv1.Queue
		if err := c.Client().Get(t.Context(), client.ObjectKey{Name: name}, &q); err != nil {
			return err
		}
		change(&q.Spec)
		return c.Client().Update(t.Context(), &q)
	}); err != nil {
		t.Fatalf("updating queue %s: %v", name, err)
	}
}

// podB builds a pod the way fairway's webhook leaves it.
type podB struct{ corev1.Pod }

func schedPod(namespace, name, queue string) *podB {
	p := &podB{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{fairwayv1.QueueLabel: queue, fairwayv1.ManagedLabel: "true"},
			Annotations: map[string]string{fairwayv1.WorkloadKindAnnotation: "pod"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 fairwayv1.SchedulerName,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			}}},
		},
	}}
	return p
}

func (p *podB) GPUs(n int) *podB {
	q := resource.MustParse(strconv.Itoa(n))
	c := &p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Requests[fairwayv1.ResourceGPU] = q
	c.Resources.Limits[fairwayv1.ResourceGPU] = q
	return p
}

// Fraction makes the pod a fractional one, with the fairway.dev/gpu-share ticket the webhook gives
// its GPU container.
func (p *podB) Fraction(f string) *podB {
	p.Annotations[fairwayv1.GPUFractionAnnotation] = f
	p.Annotations[fairwayv1.GPUContainerAnnotation] = "main"
	one := resource.MustParse("1")
	ctr := &p.Spec.Containers[0]
	if ctr.Resources.Limits == nil {
		ctr.Resources.Limits = corev1.ResourceList{}
	}
	if ctr.Resources.Requests == nil {
		ctr.Resources.Requests = corev1.ResourceList{}
	}
	ctr.Resources.Limits[fairwayv1.ResourceGPUShare], ctr.Resources.Requests[fairwayv1.ResourceGPUShare] = one, one
	return p
}

func (p *podB) Gang(group string, minMember int) *podB {
	p.Annotations[fairwayv1.PodGroupAnnotation] = group
	p.Annotations[fairwayv1.MinMemberAnnotation] = strconv.Itoa(minMember)
	return p
}

func (p *podB) Priority(class string) *podB { p.Spec.PriorityClassName = class; return p }

func (p *podB) OnNodes(names ...string) *podB {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}}}}}}}
	return p
}

func (p *podB) Label(k, v string) *podB { p.Labels[k] = v; return p }

func (p *podB) Annotate(k, v string) *podB { p.Annotations[k] = v; return p }

// CompleteAfter has kwok finish the pod that long after it started.
func (p *podB) CompleteAfter(d time.Duration) *podB {
	p.Annotations[cluster.CompleteDelayAnnotation] = d.String()
	return p
}

func (p *podB) Obj() *corev1.Pod { return p.Pod.DeepCopy() }

// replicaSet runs n copies of the pod template p (its name is the ReplicaSet's), so that evicted
// pods are re-created by the ReplicaSet controller.
func replicaSet(p *podB, n int32) client.Object {
	sel := map[string]string{"app": p.Name}
	tmpl := p.Obj()
	labels := maps.Clone(tmpl.Labels)
	labels["app"] = p.Name
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(tmpl.Annotations)}, Spec: tmpl.Spec}},
	}
}

// podsIn lists the pods of a namespace with a label selector ("" for all).
func podsIn(t *testing.T, c *cluster.Cluster, ctx context.Context, namespace string, labels map[string]string) []corev1.Pod {
	t.Helper()
	pods, err := listPods(ctx, c, namespace, labels)
	if err != nil && ctx.Err() != nil && t.Context().Err() == nil {
		// The context of an eventually's attempt ran out while listing: its condition did not
		// hold within the wait, which is what the message must say, not the list's error.
		t.Fatalf("listing pods of %q: the wait ran out while listing (%v); the condition being waited for did not hold in time", namespace, err)
	}
	if err != nil {
		t.Fatalf("listing pods of %q: %v", namespace, err)
	}
	return pods
}

// listPods lists the pods in namespace with the given labels, sorted by name. A list of
// hundreds of pods can outlast the client's timeout when the suite's clusters and the unit tests
// share two cores (CI once failed TestSchedulerCrashSafety so): a read is tried three times.
func listPods(ctx context.Context, c *cluster.Cluster, namespace string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	var err error
	for try := range 3 {
		if err = c.Client().List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(labels)); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try+1) * time.Second)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

func bound(pods []corev1.Pod) (out []corev1.Pod) {
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func pendingPods(pods []corev1.Pod) (out []corev1.Pod) {
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// claimantAndBorrower makes the two projects of a reclaim test, each a namespace with its queue:
// claimant, guaranteed gpus GPUs, and borrower, with no guarantee. The caller defers what it
// returns, which deletes both (a defer, not t.Cleanup: deleteNamespace waits with t's context,
// which has ended when cleanups run).
func claimantAndBorrower(t *testing.T, c *cluster.Cluster, claimant, gpus, borrower string) (deleteBoth func()) {
	t.Helper()
	for _, q := range []struct{ name, gpus string }{{claimant, gpus}, {borrower, ""}} {
		newNamespace(t, c, q.name)
		schedQueue(t, c, q.name, q.gpus, q.name)
	}
	return func() {
		deleteNamespace(t, c, borrower, borrower)
		deleteNamespace(t, c, claimant, claimant)
	}
}

// deleteNamespace removes a scenario's namespace and waits for its pods to be gone, so that the
// next scenario starts on an empty cluster.
func deleteNamespace(t *testing.T, c *cluster.Cluster, name string, queues ...string) {
	t.Helper()
	ctx := context.Background()
	_ = c.Client().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	for _, q := range queues {
		_ = c.Client().Delete(ctx, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q}})
	}
	eventually(t, 60*time.Second, "the pods of "+name+" to be gone", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.Client().List(ctx, &list, client.InNamespace(name)); err != nil {
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
}

// reasonOf returns the PodScheduled condition's message of a waiting pod.
func reasonOf(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// keepLog copies a process's log into the test's artifacts directory (FAIRWAY_E2E_KEEP_LOGS=1
// keeps the scheduler's logs of passing tests too).
func keepLog(t *testing.T, p *cluster.Process) {
	dir, err := cluster.ArtifactsDir(t)
	if err != nil {
		return
	}
	data, err := os.ReadFile(p.LogPath())
	if err != nil {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, p.Name()+".log"), data, 0o644)
}
