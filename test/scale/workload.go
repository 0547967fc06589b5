package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// The suite's queues (KAI: parent, sanity, no-quota, reclaim-single, reclaim-distributed). Each
// leaf serves the namespace of its own name, as KAI connects a namespace to each queue.
const (
	queueParent      = "scale-parent"
	queueSanity      = "scale-sanity"
	queueNoQuota     = "scale-no-quota"
	queueReclaim     = "scale-reclaim-single"
	queueReclaimDist = "scale-reclaim-distributed"
)

var leafQueues = []string{queueSanity, queueNoQuota, queueReclaim, queueReclaimDist}

// gpuQuota is a queue's GPU terms; nil fields are left out (no guarantee, weight 1, no limit).
type gpuQuota struct {
	quota, limit *int64
	weight       *int32
}

func (q gpuQuota) spec() *fairwayv1.ResourceQuota {
	r := &fairwayv1.ResourceQuota{OverQuotaWeight: q.weight}
	if q.quota != nil {
		r.Quota = resource.NewQuantity(*q.quota, resource.DecimalSI)
	}
	if q.limit != nil {
		r.Limit = resource.NewQuantity(*q.limit, resource.DecimalSI)
	}
	return r
}

// setupQueues creates the namespaces and queues: the parent (KAI's "parent", quota -1), the
// sanity queue (quota -1: no guarantee, weight 1 here) and the no-quota queue (quota 0, weight
// 0, limit 0: its jobs never run), and the two reclaim queues.
func (e *env) setupQueues(ctx context.Context) error {
	if err := e.cl.Create(ctx, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: queueParent}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating queue %s: %w", queueParent, err)
	}
	for _, name := range leafQueues {
		if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: fairwayv1.QueueSpec{Parent: queueParent, Namespaces: []string{name}}}
		if name == queueNoQuota {
			q.Spec.Resources.GPU = gpuQuota{quota: ptr.To[int64](0), weight: ptr.To[int32](0), limit: ptr.To[int64](0)}.spec()
		}
		if err := e.cl.Create(ctx, q); err != nil {
			return fmt.Errorf("creating queue %s: %w", name, err)
		}
	}
	for _, name := range leafQueues {
		if err := poll(ctx, 100*time.Millisecond, 2*time.Minute, "the default ServiceAccount of "+name, func() (bool, error) {
			_, err := e.cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// setGPU sets a queue's GPU terms (KAI patches its Queue's spec.resources.gpu).
func (e *env) setGPU(ctx context.Context, queue string, q gpuQuota) error {
	patch := map[string]any{"spec": map[string]any{"resources": map[string]any{"gpu": q.spec()}}}
	// A merge patch replaces the gpu object whole, so fields left nil are removed.
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: queue}}
	if err := e.cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("setting the GPU terms of queue %s: %w", queue, err)
	}
	return nil
}

// podSpec is KAI's CreatePodObject with addKWOKTaintsAndAffinity: one container asking for gpus
// whole GPUs by limit only, grace period 0, the GPU and kwok tolerations and a required node
// affinity to type=kwok, and fairway's scheduler.
func podSpec(gpus int) corev1.PodSpec {
	return corev1.PodSpec{
		SchedulerName:                 fairwayv1.SchedulerName,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "ubuntu-container", Image: "ubuntu", Args: []string{"sleep", "infinity"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				fairwayv1.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}},
		}},
		Tolerations: []corev1.Toleration{
			{Key: fairwayv1.ResourceGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule},
		},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}}},
			}}},
		}},
	}
}

func podLabels(queue string) map[string]string {
	return map[string]string{appLabel: appValue, fairwayv1.QueueLabel: queue}
}

// podAnnotations keep the suite's pods running, as KAI's "sleep infinity" pods do: the local
// cluster's kwok finishes a Job's pod a second or two after it starts (a short batch task)
// unless its delay annotation says otherwise.
func podAnnotations() map[string]string {
	return map[string]string{cluster.CompleteDelayAnnotation: "87600h"}
}

// seq numbers the suite's objects so that names never repeat within a play.
var seq atomic.Int64

// createJobs creates n batch Jobs of one pod of gpus GPUs each in queue (KAI's
// createJobObjectForKwok, restartPolicy Never), from 32 workers.
func (e *env) createJobs(ctx context.Context, queue string, n, gpus int) error {
	round := seq.Add(1)
	return parallel(n, 32, func(i int) error {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d-%05d", round, i), Namespace: queue,
				Labels: map[string]string{appLabel: appValue}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(queue), Annotations: podAnnotations()},
				Spec:       podSpec(gpus),
			}},
		}
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		_, err := e.cs.BatchV1().Jobs(queue).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
}

// gang is one of KAI's distributed jobs: a PodGroup, then its pods, each a bare pod that names
// the PodGroup.
type gang struct {
	name    string
	queue   string
	created time.Time // the PodGroup's creation, as the harness's clock saw it
}

// createGang creates a PodGroup of minMember pods, then the pods (in parallel, as KAI's
// createDistributedJobForKwok does), each of gpus GPUs; preferred, when set, is the topology
// level the gang prefers to stay within (KAI's PreferredTopologyLevel).
func (e *env) createGang(ctx context.Context, queue string, pods, gpus int, preferred string) (gang, error) {
	g := gang{name: fmt.Sprintf("distributed-job-%d", seq.Add(1)), queue: queue}
	pg := &fairwayv1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: queue, Labels: map[string]string{appLabel: appValue}},
		Spec:       fairwayv1.PodGroupSpec{MinMember: int32(pods), Queue: queue},
	}
	if preferred != "" {
		pg.Spec.TopologyConstraint = &fairwayv1.TopologyConstraint{PreferredLevel: preferred}
	}
	g.created = time.Now()
	if err := e.cl.Create(ctx, pg); err != nil {
		return g, fmt.Errorf("creating PodGroup %s/%s: %w", queue, g.name, err)
	}
	err := parallel(pods, pods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%d", g.name, i), Namespace: queue, Labels: podLabels(queue),
				Annotations: podAnnotations()},
			Spec: podSpec(gpus),
		}
		p.Annotations[fairwayv1.PodGroupAnnotation] = g.name
		p.Annotations[fairwayv1.MinMemberAnnotation] = strconv.Itoa(pods)
		if preferred != "" {
			p.Annotations[fairwayv1.TopologyPreferredAnnotation] = preferred
		}
		_, err := e.cs.CoreV1().Pods(queue).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	return g, err
}

// deleteGang deletes a gang's pods and PodGroup (KAI, after each impossible sample).
func (e *env) deleteGang(ctx context.Context, g gang) error {
	pods := e.watch.pods(g.queue)
	err := parallel(len(pods), 32, func(i int) error {
		if pods[i].Annotations[fairwayv1.PodGroupAnnotation] != g.name {
			return nil
		}
		return ignoreNotFound(e.cs.CoreV1().Pods(g.queue).Delete(ctx, pods[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	})
	if err != nil {
		return err
	}
	return ignoreNotFound(e.cl.Delete(ctx, &fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: g.queue}}))
}

// cleanup deletes every Job, PodGroup and pod of the queues and waits until their pods are gone
// (KAI's cleanupTestQueue). Pods are deleted one call each, 32 at a time, besides the Jobs'
// cascading deletion: the garbage collector alone takes minutes for thousands of pods.
func (e *env) cleanup(ctx context.Context, queues ...string) error {
	for _, ns := range queues {
		bg := metav1.DeletePropagationBackground
		if err := retryTransient(ctx, func() error {
			return e.cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		}); err != nil {
			return fmt.Errorf("deleting the Jobs of %s: %w", ns, err)
		}
		if err := retryTransient(ctx, func() error {
			return e.cl.DeleteAllOf(ctx, &fairwayv1.PodGroup{}, client.InNamespace(ns))
		}); err != nil {
			return fmt.Errorf("deleting the PodGroups of %s: %w", ns, err)
		}
		pods := e.watch.pods(ns)
		if err := parallel(len(pods), 32, func(i int) error {
			return ignoreNotFound(e.cs.CoreV1().Pods(ns).Delete(ctx, pods[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		}); err != nil {
			return err
		}
	}
	return poll(ctx, 200*time.Millisecond, 10*time.Minute, fmt.Sprintf("the pods of %v to be gone", queues), func() (bool, error) {
		return !e.watch.any(queues...), nil
	})
}

// addNodes creates the pools' nodes and waits until all are Ready.
func (e *env) addNodes(ctx context.Context, pools ...cluster.NodePool) error {
	if _, err := e.c.AddNodes(ctx, pools...); err != nil {
		return err
	}
	return e.c.WaitNodesReady(ctx)
}

// deleteNodes deletes every node (KAI scales its node pools to zero) and waits until none is left.
func (e *env) deleteNodes(ctx context.Context) error {
	list, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := parallel(len(list.Items), 32, func(i int) error {
		return ignoreNotFound(e.cs.CoreV1().Nodes().Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{}))
	}); err != nil {
		return err
	}
	return poll(ctx, 500*time.Millisecond, 5*time.Minute, "the nodes to be deleted", func() (bool, error) {
		l, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
}

// parallel calls f(0..n-1) from workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	work := make(chan int)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range work {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// retryTransient calls f until it succeeds, for at most five tries over about a minute, while
// the failure is one a loaded API server gives and a retry can cure: a collection delete of
// hundreds of Jobs can outlast the server's request timeout ("may still be processing the
// request") or lose its HTTP/2 stream (CI, 2 cores shared by four clusters, once failed
// TestScaleOutcomes so). A refusal (invalid, forbidden) is returned at once.
func retryTransient(ctx context.Context, f func() error) error {
	backoff := wait.Backoff{Duration: 2 * time.Second, Factor: 2, Steps: 5, Cap: 30 * time.Second}
	return retry.OnError(backoff, func(err error) bool {
		if ctx.Err() != nil {
			return false
		}
		return !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) &&
			!apierrors.IsUnauthorized(err) && !apierrors.IsMethodNotSupported(err)
	}, f)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
