//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestPipelineAdmissionPeak runs examples/pipeline-admission/workflow.yaml, the Argo Workflow KFP
// submits for a run of pipeline.py, with its training step on 8 GPUs, through the real Argo
// workflow-controller, in queue vision (pipelineAdmission: Peak, 4 GPUs guaranteed) on one node
// of 8 GPUs, 4 of which another queue holds within its guarantee: vision can give 4. The run
// must not start: the webhook suspends it at creation, no pod of it is created, and the
// Workflow says why (the engine's reason in its fairway.dev/run-* annotations, an event). When
// the other queue's job ends, the scheduler resumes it; it runs (the test plays KFP's driver)
// and its training step gets its 8 GPUs.
func TestPipelineAdmissionPeak(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "kubeflow-user-alice"
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 8,
		GPUMemoryMiB: 81559, CPU: "64", Memory: "512Gi"}
	vision := exampleQueue("vision", ns, "4")
	vision.Spec.PipelineAdmission = fairwayv1.PipelineAdmissionPeak
	// A second team's queue with pipeline admission, deleted while its run is held.
	const nsGone = "kubeflow-user-bob"
	gone := exampleQueue("vision-gone", nsGone, "4")
	gone.Spec.PipelineAdmission = fairwayv1.PipelineAdmissionPeak
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, KubeScheduler: true},
		[]client.Object{vision, exampleQueue("research", "research", "4"), gone}, stack.Options{})
	for _, n := range []string{ns, nsGone} {
		mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-runner", Namespace: n}})
	}
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}

	// The other queue's job: 4 GPUs within its guarantee, which nothing reclaims.
	blocker := schedPod("research", "blocker", "research").GPUs(4)
	mustCreate(t, c, &blocker.Pod)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		return c.Client().Get(ctx, client.ObjectKeyFromObject(&blocker.Pod), &p) == nil && p.Spec.NodeName != "", nil
	}); err != nil {
		t.Fatalf("the other queue's job was not bound: %v", err)
	}

	wf := exampleObject(t, ns, "pipeline-admission", "workflow.yaml")
	trainOn(t, wf, "8")
	kwokCompletes(t, wf, time.Second, nil)
	mustCreate(t, c, wf)
	sel := map[string]string{argo.WorkflowLabel: wf.GetName()}
	t.Logf("run %s submitted", wf.GetName())

	// Held at creation, before its first pod.
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
		t.Fatal(err)
	}
	ann := wf.GetAnnotations()
	suspended, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend")
	if !suspended || ann[fairwayv1.RunAdmissionAnnotation] != string(fairwayv1.RunHeld) || ann[fairwayv1.RunQueueAnnotation] != "vision" ||
		!strings.HasPrefix(ann[fairwayv1.RunPeakAnnotation], "gpu=8,") {
		t.Fatalf("run not held at creation: suspend %v, annotations %v", suspended, ann)
	}
	// The scheduler writes why it waits: the engine's reason for its peak.
	reason := waitUnstructured(t, c, wf, 30*time.Second, func(u *unstructured.Unstructured) (string, bool) {
		r := u.GetAnnotations()[fairwayv1.RunReasonAnnotation]
		return r + ": " + u.GetAnnotations()[fairwayv1.RunMessageAnnotation], fairwayv1.UnschedulableReason(r).Known()
	})
	t.Logf("held: %s", reason)
	// No pod of the run for as long as it is held.
	heldFor := 10 * time.Second
	deadline := time.Now().Add(heldFor)
	for time.Now().Before(deadline) {
		if pods := podsIn(t, c, ctx, ns, sel); len(pods) > 0 {
			t.Fatalf("the held run has pods: %s", describePods(pods))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend"); !s || wf.GetAnnotations()[fairwayv1.RunAdmissionAnnotation] != string(fairwayv1.RunHeld) {
		t.Fatalf("the run was started while its peak cannot fit: %v", wf.GetAnnotations())
	}
	var events eventsv1.EventList
	if err := c.Client().List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	held := false
	for _, e := range events.Items {
		held = held || (e.Regarding.Name == wf.GetName() && e.Regarding.Kind == "Workflow" && e.Reason == fairwayv1.EventRunHeld)
	}
	if !held {
		t.Errorf("no %s event on the Workflow", fairwayv1.EventRunHeld)
	}
	t.Logf("no pod for %s while held", heldFor)

	// A run held under Peak whose queue is then deleted is not left suspended for ever: the
	// scheduler releases it within a cycle (it runs pod by pod, as in a queue without pipeline
	// admission) and says why.
	wfGone := exampleObject(t, nsGone, "pipeline-admission", "workflow.yaml")
	trainOn(t, wfGone, "8")
	mustCreate(t, c, wfGone)
	waitUnstructured(t, c, wfGone, 30*time.Second, func(u *unstructured.Unstructured) (string, bool) {
		return u.GetAnnotations()[fairwayv1.RunAdmissionAnnotation], u.GetAnnotations()[fairwayv1.RunAdmissionAnnotation] == string(fairwayv1.RunHeld)
	})
	if err := c.Client().Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	released := waitUnstructured(t, c, wfGone, 10*time.Second, func(u *unstructured.Unstructured) (string, bool) {
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		a := u.GetAnnotations()
		return a[fairwayv1.RunAdmissionAnnotation] + "/" + a[fairwayv1.RunReasonAnnotation] + ": " + a[fairwayv1.RunMessageAnnotation],
			!s && a[fairwayv1.RunReasonAnnotation] == string(fairwayv1.RunQueueUnavailable)
	})
	t.Logf("a held run whose queue was deleted was released %v after the deletion: %s", time.Since(deleted).Round(time.Millisecond), released)
	if err := c.Client().Delete(ctx, wfGone); err != nil {
		t.Fatal(err)
	}

	// Room appears: the other job ends. The run starts, and its training step gets 8 GPUs.
	if err := c.Client().Delete(ctx, &blocker.Pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	driverCtx, stopDriver := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { playKFPDriver(driverCtx, t, c, ns, sel) })
	defer wg.Wait()
	defer stopDriver()
	waitUnstructured(t, c, wf, 30*time.Second, func(u *unstructured.Unstructured) (string, bool) {
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[fairwayv1.RunAdmissionAnnotation], !s
	})
	t.Logf("run resumed %s after the room appeared", time.Since(freed).Round(time.Millisecond))
	if a := wf.GetAnnotations(); a[fairwayv1.RunAdmissionAnnotation] != string(fairwayv1.RunAdmitted) || a[fairwayv1.RunReasonAnnotation] != string(fairwayv1.RunPeakFits) {
		t.Errorf("resumed run annotations %v, want Admitted/PeakFits", a)
	}
	phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone)
	pods := podsIn(t, c, ctx, ns, sel)
	if phase != "Succeeded" {
		t.Fatalf("run ended %s; pods: %s; nodes: %s", phase, describePods(pods), workflowNodes(wf))
	}
	trained := false
	for i := range pods {
		p := &pods[i]
		if kfp.PodRole(p) == kfp.RoleExecutor && gpusOf(p) == 8 {
			trained = p.Spec.NodeName != ""
		}
	}
	if !trained {
		t.Errorf("no executor ran with 8 GPUs: %s", describePods(pods))
	}
	t.Logf("run %s Succeeded after %s", wf.GetName(), time.Since(freed).Round(time.Millisecond))
}

// trainOn makes the run's train component ask for n GPUs (its set_accelerator_limit).
func trainOn(t *testing.T, wf *unstructured.Unstructured, n string) {
	t.Helper()
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	changed := 0
	for _, p := range params {
		m := p.(map[string]any)
		v, _ := m["value"].(string)
		if strings.HasPrefix(m["name"].(string), "implementations-") && strings.Contains(v, `"accelerator":{"count":"4","resourceCount":"4"`) {
			m["value"] = strings.Replace(v, `"accelerator":{"count":"4","resourceCount":"4"`, `"accelerator":{"count":"`+n+`","resourceCount":"`+n+`"`, 1)
			changed++
		}
	}
	if changed != 1 {
		t.Fatalf("found %d components on 4 GPUs, want train", changed)
	}
	if err := unstructured.SetNestedSlice(wf.Object, params, "spec", "arguments", "parameters"); err != nil {
		t.Fatal(err)
	}
}
