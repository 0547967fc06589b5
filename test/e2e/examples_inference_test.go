//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/modelserver"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleInference runs examples/inference/triton.yaml, a Triton Deployment that names no
// priority class, in queue serving (6 GPUs guaranteed) next to training, on two nodes of four
// GPUs; queue research has 2 GPUs guaranteed and borrows the rest.
//
//  1. The two replicas are inference: fairway-inference (125), non-preemptible.
//  2. Training fills the cluster: research's sweep borrows, serving's own fine-tuning reclaims
//     part of that; one more serving training pod finds no room and waits. Training never takes
//     an inference replica.
//  3. The Deployment is scaled from 2 to 6 replicas, as its HPA would: there is no metrics
//     pipeline in the test cluster, so the test writes spec.replicas itself, and the HPA of the
//     example is not applied (its controller, without metrics, must not fight the test). The
//     new replicas run within serving's guarantee, taking the GPUs research borrowed (Reclaim)
//     and those of serving's own training (Preempt); research keeps its guarantee.
//  4. Scaled back to 2: the four GPUs go to the waiting training at once.
func TestExampleInference(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "h100", Count: 2, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 4,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	c := startExample(t, []cluster.NodePool{gpu}, []client.Object{
		exampleQueue("serving", "serving", "6"), exampleQueue("research", "research", "2"),
	}, stack.Options{})

	// 1. The example's Deployment and Service (not its HPA, see above).
	var deploy *appsv1.Deployment
	for _, obj := range exampleObjects(t, "inference", "triton.yaml") {
		switch obj.GetKind() {
		case "HorizontalPodAutoscaler":
			continue
		case "Deployment":
			if _, ok, _ := unstructuredNested(obj.Object, "spec", "template", "spec", "priorityClassName"); ok {
				t.Fatal("the example names a priority class; it must not")
			}
		}
		mustCreate(t, c, obj)
	}
	serve := map[string]string{"app": "triton"}
	replicas := func(ctx context.Context, n int) ([]corev1.Pod, error) {
		pods := podsIn(t, c, ctx, "serving", serve)
		b := bound(pods)
		if len(b) != n || len(pendingPods(pods)) != 0 {
			return nil, fmt.Errorf("%d replicas bound, %d waiting", len(b), len(pendingPods(pods)))
		}
		return b, nil
	}
	var inference []corev1.Pod
	eventually(t, 60*time.Second, "two Triton replicas running", func(ctx context.Context) (bool, error) {
		var err error
		inference, err = replicas(ctx, 2)
		return err == nil, err
	})
	uids := map[string]bool{}
	checkReplicas := func(pods []corev1.Pod) {
		t.Helper()
		for _, p := range pods {
			checkPod(t, &p, expectPod{queue: "serving", framework: modelserver.Triton.Name, kind: string(fairwayv1.KindInference), minMember: 1,
				priorityClass: fairwayv1.PriorityClassInference, priority: ptr.To[int32](125)})
			if p.Labels[fairwayv1.PreemptibilityLabel] != string(fairwayv1.NonPreemptible) {
				t.Errorf("replica %s: preemptibility %q, want non-preemptible", p.Name, p.Labels[fairwayv1.PreemptibilityLabel])
			}
			if fairwayv1.IsInteractive(&p) {
				t.Errorf("replica %s is interactive: its GPU would be lent", p.Name)
			}
		}
	}
	checkReplicas(inference)
	for _, p := range inference {
		uids[string(p.UID)] = true
	}
	untouched := func(ctx context.Context) error {
		for _, p := range podsIn(t, c, ctx, "serving", serve) {
			if why := disrupted(&p); why != "" && uids[string(p.UID)] {
				return fmt.Errorf("inference replica %s disrupted: %s", p.Name, why)
			}
		}
		return nil
	}

	// 2. Training fills the cluster. Research's sweep of six borrows four GPUs beyond its two.
	mustCreate(t, c, training("research", "sweep", 6))
	eventually(t, 60*time.Second, "the sweep on six GPUs", func(ctx context.Context) (bool, error) {
		n := len(bound(podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})))
		return n == 6, fmt.Errorf("%d sweep pods bound", n)
	})
	// Serving's own fine-tuning of two reclaims two of them: serving is below its guarantee.
	mustCreate(t, c, training("serving", "finetune", 2))
	eventually(t, 60*time.Second, "fine-tuning on two GPUs, the sweep on four", func(ctx context.Context) (bool, error) {
		ft := len(bound(podsIn(t, c, ctx, "serving", map[string]string{"app": "finetune"})))
		sw := len(bound(podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})))
		return ft == 2 && sw == 4, fmt.Errorf("finetune %d, sweep %d bound", ft, sw)
	})
	for _, p := range podsIn(t, c, ctx, "serving", map[string]string{"app": "finetune"}) {
		if fairwayv1.KindOf(&p) != fairwayv1.KindTraining || p.Spec.PriorityClassName != fairwayv1.PriorityClassTraining {
			t.Errorf("training pod %s: kind %s, class %q; want training at fairway-training from its workload-kind label", p.Name, fairwayv1.KindOf(&p), p.Spec.PriorityClassName)
		}
	}
	// One more training pod of serving: the cluster is full, serving is at 4 of its 6; it may
	// reclaim the two GPUs research still borrows, and never an inference replica.
	mustCreate(t, c, training("serving", "eval", 3))
	eventually(t, 60*time.Second, "eval takes research's borrowed GPUs and then waits", func(ctx context.Context) (bool, error) {
		if err := untouched(ctx); err != nil {
			return false, err
		}
		pods := podsIn(t, c, ctx, "serving", map[string]string{"app": "eval"})
		waiting := pendingPods(pods)
		sw := len(bound(podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})))
		return len(bound(pods)) == 2 && len(waiting) == 1 && reasonOf(&waiting[0]) != "" && sw == 2,
			fmt.Errorf("eval %d bound %d waiting, sweep %d", len(bound(pods)), len(waiting), sw)
	})
	// Nothing moves the replicas while training waits.
	time.Sleep(3 * time.Second)
	if err := untouched(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := replicas(ctx, 2); err != nil {
		t.Fatalf("inference while training waits: %v", err)
	}
	t.Logf("training waits, the two inference replicas are untouched: %s", shortReasons(pendingPods(podsIn(t, c, ctx, "serving", map[string]string{"app": "eval"}))))
	// eval is done with: delete it, so that serving's training is the fine-tuning of two again
	// and research borrows again.
	if err := c.Client().Delete(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "eval", Namespace: "serving"}},
		client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "research borrowing the GPUs eval held", func(ctx context.Context) (bool, error) {
		sw := len(bound(podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})))
		ev := len(podsIn(t, c, ctx, "serving", map[string]string{"app": "eval"}))
		return sw == 4 && ev == 0, fmt.Errorf("sweep %d bound, %d eval pods left", sw, ev)
	})
	preempts0 := len(eventsFor(t, c, ctx, "serving", "Preempt"))
	reclaims0 := len(eventsFor(t, c, ctx, "research", "Reclaim"))

	// 3. The HPA's scale-up, from 2 to 6 replicas, in a full cluster: serving holds 2 + 2 of its
	// 6, research 4 (2 borrowed).
	scale := func(n int32) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			deploy = &appsv1.Deployment{}
			if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "serving", Name: "triton"}, deploy); err != nil {
				return err
			}
			deploy.Spec.Replicas = ptr.To(n)
			return c.Client().Update(ctx, deploy)
		})
		if err != nil {
			t.Fatalf("scaling triton to %d: %v", n, err)
		}
	}
	begin := time.Now()
	scale(6)
	eventually(t, 90*time.Second, "six Triton replicas running", func(ctx context.Context) (bool, error) {
		var err error
		inference, err = replicas(ctx, 6)
		return err == nil, err
	})
	t.Logf("6 replicas running %v after the scale-up", time.Since(begin).Round(time.Millisecond))
	checkReplicas(inference)
	if err := untouched(ctx); err != nil {
		t.Error(err)
	}
	preempts := eventsAtLeast(t, c, ctx, "serving", "Preempt", preempts0+2, 30*time.Second)[preempts0:]
	reclaims := eventsAtLeast(t, c, ctx, "research", "Reclaim", reclaims0+2, 30*time.Second)[reclaims0:]
	if len(preempts) != 2 || len(reclaims) != 2 {
		t.Errorf("scale-up evicted %d of serving's training (Preempt) and %d of research's (Reclaim), want 2 and 2:\n%s\n%s",
			len(preempts), len(reclaims), strings.Join(preempts, "\n"), strings.Join(reclaims, "\n"))
	}
	eventually(t, 60*time.Second, "research on its guaranteed two, serving's training waiting", func(ctx context.Context) (bool, error) {
		sw := podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})
		ft := podsIn(t, c, ctx, "serving", map[string]string{"app": "finetune"})
		return len(bound(sw)) == 2 && len(pendingPods(sw)) == 4 && len(bound(ft)) == 0 && len(pendingPods(ft)) == 2,
			fmt.Errorf("sweep %d bound %d waiting; finetune %d bound %d waiting", len(bound(sw)), len(pendingPods(sw)), len(bound(ft)), len(pendingPods(ft)))
	})
	if q, err := queueStatus(ctx, c, "serving"); err == nil {
		if got := amount(q.Status.Allocated, "nvidia.com/gpu"); got > 6 {
			t.Errorf("serving holds %v GPUs, above its guarantee of 6", got)
		}
	}

	// 4. The HPA's scale-down to 2: four GPUs free; the waiting training takes them at once,
	// serving's fine-tuning first (serving is below its guarantee), research borrowing the rest.
	begin = time.Now()
	scale(2)
	eventually(t, 60*time.Second, "the waiting training on the freed GPUs", func(ctx context.Context) (bool, error) {
		sw := len(bound(podsIn(t, c, ctx, "research", map[string]string{"app": "sweep"})))
		ft := len(bound(podsIn(t, c, ctx, "serving", map[string]string{"app": "finetune"})))
		inf := len(podsIn(t, c, ctx, "serving", serve))
		return sw == 4 && ft == 2 && inf == 2, fmt.Errorf("sweep %d, finetune %d bound; %d replicas left", sw, ft, inf)
	})
	t.Logf("training back on the four freed GPUs %v after the scale-down", time.Since(begin).Round(time.Millisecond))
}

// training is preemptible training of n one-GPU pods that kwok keeps running: a ReplicaSet, so
// that evicted pods come back at once (a Job would back off exponentially after each eviction,
// or, with a podFailurePolicy, wait for a terminal phase no kubelet reports under kwok). The
// fairway.dev/workload-kind label makes its pods training, which gives them fairway-training.
func training(namespace, name string, n int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name, fairwayv1.WorkloadKindLabel: string(fairwayv1.KindTraining)}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "train", Image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
						Limits:   corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")},
					}}},
				},
			},
		},
	}
}

func shortReasons(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		r := reasonOf(&p)
		if len(r) > 120 {
			r = r[:120] + "..."
		}
		out = append(out, p.Name+": "+r)
	}
	return strings.Join(out, "; ")
}

func unstructuredNested(obj map[string]any, fields ...string) (any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[f]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}
