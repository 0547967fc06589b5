//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/usergang"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// workloadAPIFlags serve Kubernetes' Workload API (scheduling.k8s.io/v1beta1 Workload and
// PodGroup, and the pods' spec.schedulingGroup): in Kubernetes 1.37 it is beta and off by default.
// WorkloadWithJob (alpha) lets the Job controller make a Workload and a PodGroup for an Indexed
// Job whose parallelism is its completions and point the Job's pods at the PodGroup; the API
// server needs it too, for the job-controller's RBAC role to allow it.
var (
	workloadAPIFlags = []string{"--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true,WorkloadWithJob=true"}
	workloadJobFlags = []string{"--feature-gates=GenericWorkload=true,WorkloadWithJob=true"}
)

// TestExampleGangs runs examples/gangs/indexed-job.yaml, an Indexed Job of 4 workers of a GPU
// each whose pod template carries fairway.dev/gang: "true", on a node of 3 GPUs: no worker is
// bound, since the gang needs 4 (the PodGroup says so); when a node of one more GPU joins, all 4
// are bound together. A sampler checks every 100 ms that the Job never runs partly.
//
// On the same cluster, whose API server serves Kubernetes' Workload API, the other conventions
// of user-made gangs reach the scheduler as gangs of their size: a Kueue plain pod group (label
// and total-count annotation), pods that name a scheduling.k8s.io/v1beta1 PodGroup with a gang
// policy in spec.schedulingGroup, and an Indexed Job that asks for a gang in its own
// spec.scheduling (feature gate WorkloadWithJob, alpha), for which the Job controller makes that
// PodGroup itself. The example Job gets one too, of the basic policy (no gang); its
// fairway.dev/gang annotation wins.
func TestExampleGangs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "ml-team"
	three := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 3,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{three}, APIServerFlags: workloadAPIFlags, ControllerManagerFlags: workloadJobFlags},
		[]client.Object{exampleQueue("ml-team", ns, "")}, stack.Options{NoAgents: true, ProbeNamespace: ns})

	job := exampleObject(t, ns, "gangs", "indexed-job.yaml")
	sel := map[string]string{"batch.kubernetes.io/job-name": job.GetName()}
	group := adapters.GroupName("job", job.GetName())

	// Binding a gang is one API call per pod, so a sample may fall between two of them: the Job
	// seen partly bound twice in a row, 100 ms apart, ran partly.
	var mu sync.Mutex
	var partial []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		wasPartial := false
		for watchCtx.Err() == nil {
			var list corev1.PodList
			if err := c.Client().List(watchCtx, &list, client.InNamespace(ns), client.MatchingLabels(sel)); err == nil {
				b := len(bound(list.Items))
				isPartial := b > 0 && b < 4
				if isPartial && wasPartial {
					mu.Lock()
					partial = append(partial, fmt.Sprintf("%d of 4 bound at %s: %s", b, time.Now().Format("15:04:05.000"), describePods(list.Items)))
					mu.Unlock()
				}
				wasPartial = isPartial
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		stopWatch()
		watching.Wait()
		for _, p := range partial {
			t.Errorf("the Job ran partly: %s", p)
		}
	}()

	mustCreate(t, c, job)
	pods := waitPods(t, c, ns, sel, 4, 60*time.Second)
	for i := range pods {
		checkPod(t, &pods[i], expectPod{queue: ns, framework: usergang.Name, kind: string(adapters.KindTraining), podGroup: group,
			minMember: 4, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
		// Its podFailurePolicy ignores evictions: the Job controller makes an evicted worker again.
		if got := pods[i].Annotations[fairwayv1.RecreatableAnnotation]; got != "true" {
			t.Errorf("pod %s: %s %q, want \"true\"", pods[i].Name, fairwayv1.RecreatableAnnotation, got)
		}
	}

	// Three GPUs for a gang of four: it waits whole, with its reason.
	var pg fairwayv1.PodGroup
	eventually(t, 30*time.Second, "the Job's PodGroup unschedulable", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, &pg); err != nil {
			return false, err
		}
		why := conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable)
		return pg.Spec.MinMember == 4 && conditionStatus(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable) == metav1.ConditionTrue &&
			!strings.HasPrefix(why, "WaitingForPods"), fmt.Errorf("minMember %d, condition %q", pg.Spec.MinMember, why)
	})
	t.Logf("gang %s waits on 3 GPUs: %s", group, conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable))
	time.Sleep(3 * time.Second) // more scheduling cycles, watched by the sampler
	if b := bound(podsIn(t, c, ctx, ns, sel)); len(b) != 0 {
		t.Fatalf("%d workers bound with 3 GPUs free: %s", len(b), describePods(b))
	}

	// The fourth GPU arrives: all four are bound.
	one := cluster.NodePool{Name: "h100-one", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 1,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	if _, err := c.AddNodes(ctx, one); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	eventually(t, 60*time.Second, "the Job's 4 workers bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, sel))) == 4, nil
	})
	t.Logf("gang %s bound whole %v after the fourth GPU joined", group, time.Since(begin).Round(time.Millisecond))

	// A Kueue plain pod group of two CPU pods.
	for i := range 2 {
		p := plainPod(fmt.Sprintf("kueue-%d", i))
		p.Namespace = ns
		p.Labels = map[string]string{usergang.KueuePodGroupNameLabel: "sample-group"}
		p.Annotations = map[string]string{usergang.KueuePodGroupTotalCountAnnotation: "2"}
		mustCreate(t, c, p)
	}
	// Kubernetes' own PodGroup, gang of two, and two pods that name it.
	wpg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "training-worker-0", "namespace": ns},
		"spec":     map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}}},
	}}
	mustCreate(t, c, wpg)
	for i := range 2 {
		p := plainPod(fmt.Sprintf("k8s-gang-%d", i))
		p.Namespace = ns
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("training-worker-0")}
		mustCreate(t, c, p)
	}
	for _, tc := range []struct {
		prefix, group string
	}{{"kueue-", "gang-sample-group"}, {"k8s-gang-", "gang-training-worker-0"}} {
		var got []corev1.Pod
		for _, p := range podsIn(t, c, ctx, ns, nil) {
			if strings.HasPrefix(p.Name, tc.prefix) {
				got = append(got, p)
			}
		}
		if len(got) != 2 {
			t.Fatalf("%d pods named %s*, want 2", len(got), tc.prefix)
		}
		for i := range got {
			checkPod(t, &got[i], expectPod{queue: ns, framework: usergang.Name, kind: string(adapters.KindTraining), podGroup: tc.group,
				minMember: 2, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
		}
		if tc.prefix == "k8s-gang-" && (got[0].Spec.SchedulingGroup == nil || got[0].Spec.SchedulingGroup.PodGroupName == nil) {
			t.Errorf("the API server dropped spec.schedulingGroup: is the Workload API served?")
		}
	}
	eventually(t, 30*time.Second, "both pairs bound", func(ctx context.Context) (bool, error) {
		n := 0
		for _, p := range bound(podsIn(t, c, ctx, ns, nil)) {
			if strings.HasPrefix(p.Name, "kueue-") || strings.HasPrefix(p.Name, "k8s-gang-") {
				n++
			}
		}
		return n == 4, fmt.Errorf("%d of 4 bound", n)
	})

	// An Indexed Job of 2 that asks Kubernetes for a gang (spec.scheduling, WorkloadWithJob)
	// instead of fairway's annotation: the Job controller makes its PodGroup, gang of parallelism.
	k8sJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "k8s-indexed", Namespace: ns},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}}}},
		},
	}
	mustCreate(t, c, k8sJob)
	jobPods := waitPods(t, c, ns, map[string]string{"batch.kubernetes.io/job-name": k8sJob.Name}, 2, 60*time.Second)
	for i := range jobPods {
		p := &jobPods[i]
		if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
			t.Fatalf("the Job controller did not point pod %s at a PodGroup (WorkloadWithJob)", p.Name)
		}
		checkPod(t, p, expectPod{queue: ns, framework: usergang.Name, kind: string(adapters.KindTraining),
			podGroup: adapters.GroupName("gang", *p.Spec.SchedulingGroup.PodGroupName), minMember: 2,
			priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
	}
	t.Logf("Job %s: the Job controller's PodGroup %s, a gang of 2", k8sJob.Name, *jobPods[0].Spec.SchedulingGroup.PodGroupName)
	if p := podsIn(t, c, ctx, ns, sel); p[0].Spec.SchedulingGroup == nil {
		t.Logf("the example Job's pods name no PodGroup of the Job controller")
	} else {
		t.Logf("the example Job's pods also name PodGroup %s; fairway.dev/gang wins", *p[0].Spec.SchedulingGroup.PodGroupName)
	}
}
