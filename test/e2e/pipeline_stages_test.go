//go:build e2e

package e2e

import (
	"context"
	"fmt"
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

// Timing of TestPipelineAdmissionStages: preprocess runs prepFor (kwok) and declares as much
// (fairway.dev/expected-duration, the example's add_pod_annotation); the scheduler holds the
// next GPU stage stageLead before that.
const (
	prepFor   = 25 * time.Second
	stageLead = 10 * time.Second
)

// TestPipelineAdmissionStages runs examples/pipeline-admission/workflow.yaml (the Argo Workflow
// KFP submits for pipeline.py: preprocess on CPU, train on 4 GPUs, evaluate on half a GPU)
// through the real Argo workflow-controller, in queue vision on one node of 4 GPUs, twice; the
// test plays KFP's driver. Each time, while preprocess runs, a burst of 4 single-GPU pods of the
// same queue and priority arrives, after the run.
//
//   - PerPod (the control): the burst takes the 4 GPUs at once, and train's pod, which comes
//     after it, waits behind it.
//   - Stages: the run starts at once (GPUs stay free: a probe pod binds during preprocess); 10s
//     (--pipeline-stage-lead) before preprocess's declared end, and not before, train's 4 GPUs
//     are held (the Workflow says StageHeld); the burst that arrives then waits, and
//     train's pod binds within a cycle of its creation, before any pod of the burst; the run
//     Succeeds.
func TestPipelineAdmissionStages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "kubeflow-user-alice"
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 4,
		GPUMemoryMiB: 81559, CPU: "64", Memory: "512Gi"}
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, KubeScheduler: true},
		[]client.Object{exampleQueue("vision", ns, "4")}, stack.Options{SchedulerArgs: []string{"--pipeline-stage-lead=" + stageLead.String()}})
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-runner", Namespace: ns}})
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}

	t.Run("PerPod", func(t *testing.T) {
		r := startStagesRun(t, c, ns, "")
		defer r.stop()
		prepStart := r.waitPreprocessRunning()
		r.sleepUntil(prepStart.Add(prepFor - stageLead + 2*time.Second))
		burst := r.createBurst("perpod")
		// The burst binds at once: nothing holds the GPUs.
		r.poll(15*time.Second, "the burst to bind", func(pods []corev1.Pod) bool {
			return countBound(pods, burst) == len(burst)
		})
		train := r.waitTrainCreated()
		t.Logf("train %s created %s after preprocess started; the burst holds the GPUs", train.Name, train.CreationTimestamp.Sub(prepStart).Round(time.Second))
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			p := r.pod(train.Name)
			if p != nil && p.Spec.NodeName != "" {
				t.Fatalf("train bound while the burst that came after its run holds the GPUs: the control shows nothing")
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("without Stages, train waited 8s behind the later burst (the burst runs 60s)")
		r.cleanup(burst)
	})

	// Switch the queue to Stages; the webhook's cache follows within moments.
	updateQueue(t, c, "vision", func(q *fairwayv1.QueueSpec) { q.PipelineAdmission = fairwayv1.PipelineAdmissionStages })
	time.Sleep(2 * time.Second)

	t.Run("Stages", func(t *testing.T) {
		r := startStagesRun(t, c, ns, fairwayv1.RunStaged)
		defer r.stop()
		prepStart := r.waitPreprocessRunning()
		// The GPUs are not held from the start: a probe pod binds during preprocess.
		probe := schedPod(ns, "probe", "vision").GPUs(1).Priority(fairwayv1.PriorityClassTraining).CompleteAfter(time.Second)
		mustCreate(t, c, &probe.Pod)
		r.poll(10*time.Second, "the probe to bind", func(pods []corev1.Pod) bool { return countBound(pods, []string{"probe"}) == 1 })
		t.Logf("probe bound %s after preprocess started: GPUs are free while preprocess is far from its end", time.Since(prepStart).Round(100*time.Millisecond))

		reason := waitUnstructured(t, c, r.wf, prepFor+10*time.Second, func(u *unstructured.Unstructured) (string, bool) {
			a := u.GetAnnotations()
			return a[fairwayv1.RunReasonAnnotation] + ": " + a[fairwayv1.RunMessageAnnotation], a[fairwayv1.RunReasonAnnotation] == string(fairwayv1.RunStageHeld)
		})
		heldAfter := time.Since(prepStart)
		t.Logf("held %s after preprocess started (declared %s, lead %s): %s", heldAfter.Round(100*time.Millisecond), prepFor, stageLead, reason)
		if heldAfter < prepFor-stageLead-2*time.Second {
			t.Errorf("train held %s after preprocess started, before its lead (%s before %s)", heldAfter, stageLead, prepFor)
		}
		if p := r.preprocess(); p == nil || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("preprocess is not running any more when train is held: %v", p)
		}
		if a := r.wf.GetAnnotations(); a[fairwayv1.RunAdmissionAnnotation] != string(fairwayv1.RunStaged) {
			t.Errorf("run state %q, want Staged", a[fairwayv1.RunAdmissionAnnotation])
		}

		burst := r.createBurst("stages")
		burstAt := time.Now()
		var prepDone, trainSeen, trainBound time.Time
		var trainName string
		r.poll(prepFor+30*time.Second, "train to bind", func(pods []corev1.Pod) bool {
			now := time.Now()
			for i := range pods {
				p := &pods[i]
				switch {
				case isStep(p, "preprocess") && p.Status.Phase == corev1.PodSucceeded && prepDone.IsZero():
					prepDone = now
				case isStep(p, "train"):
					if trainSeen.IsZero() {
						trainSeen, trainName = now, p.Name
					}
					if p.Spec.NodeName != "" && trainBound.IsZero() {
						trainBound = now
					}
				}
			}
			if n := countBound(pods, burst); n > 0 {
				t.Fatalf("%d pods of the burst that came after the run bound before train: %s", n, describePods(pods))
			}
			return !trainBound.IsZero()
		})
		created := time.Time{}
		if p := r.pod(trainName); p != nil {
			created = p.CreationTimestamp.Time // whole seconds
		}
		t.Logf("burst of 4 created %s before preprocess's end; none bound; train %s first seen %s after preprocess ended, bound when first seen +%s (<%s after its creationTimestamp, a whole second); %s after preprocess ended",
			prepDone.Sub(burstAt).Round(100*time.Millisecond), trainName, trainSeen.Sub(prepDone).Round(100*time.Millisecond),
			trainBound.Sub(trainSeen).Round(100*time.Millisecond), trainBound.Sub(created).Round(100*time.Millisecond), trainBound.Sub(prepDone).Round(100*time.Millisecond))
		// One cycle: the scheduler's cycle period is 1s; the poll sees the pod up to 100ms late.
		if d := trainBound.Sub(trainSeen); d > 1500*time.Millisecond {
			t.Errorf("train bound %s after its pod was created, more than a cycle", d)
		}
		if pods := r.pods(); countBound(pods, burst) != 0 {
			t.Errorf("the burst took GPUs beside train: %s", describePods(pods))
		}
		// The burst waits for train's GPUs like anything else; the run goes on and Succeeds
		// (evaluate's half GPU is held the same way).
		r.cleanup(burst)
		phase := waitUnstructured(t, c, r.wf, 90*time.Second, workflowDone)
		if phase != "Succeeded" {
			t.Fatalf("run ended %s; pods: %s; nodes: %s", phase, describePods(r.pods()), workflowNodes(r.wf))
		}
		// Both GPU stages were held (evaluate's half GPU when train ended: train declares no
		// duration and the pipeline has no history), none lapsed.
		var events eventsv1.EventList
		if err := c.Client().List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var held []string
		for _, e := range events.Items {
			if e.Regarding.Name != r.wf.GetName() {
				continue
			}
			switch e.Reason {
			case fairwayv1.EventRunStageHeld:
				held = append(held, e.Note)
			case fairwayv1.EventRunStageLapsed:
				t.Errorf("a stage's hold lapsed: %s", e.Note)
			}
		}
		if len(held) != 2 || !strings.Contains(strings.Join(held, "\n"), "root/evaluate/executor") {
			t.Errorf("holds %q, want train's and evaluate's", held)
		}
		t.Logf("run Succeeded; stages held: %s", strings.Join(held, "; "))
	})
}

// stagesRun is one run of the example for TestPipelineAdmissionStages.
type stagesRun struct {
	t          *testing.T
	c          *cluster.Cluster
	ns         string
	wf         *unstructured.Unstructured
	sel        map[string]string
	stopDriver context.CancelFunc
	wg         sync.WaitGroup
}

// startStagesRun submits the example's run with preprocess taking prepFor (kwok) and declaring
// as much, train on 4 GPUs, and plays its driver; want is the run state the webhook must write
// ("" for none).
func startStagesRun(t *testing.T, c *cluster.Cluster, ns string, want fairwayv1.RunAdmissionState) *stagesRun {
	t.Helper()
	wf := exampleObject(t, ns, "pipeline-admission", "workflow.yaml")
	// preprocess and evaluate run metadata-1-0-system-container-impl (their one pod annotation);
	// kwok finishes them after prepFor, every other pod after 1s.
	kwokCompletes(t, wf, time.Second, map[string]time.Duration{"metadata-1-0-system-container-impl": prepFor})
	declareDuration(t, wf, prepFor)
	mustCreate(t, c, wf)
	if got := wf.GetAnnotations()[fairwayv1.RunAdmissionAnnotation]; got != string(want) {
		t.Fatalf("run state %q at creation, want %q: %v", got, want, wf.GetAnnotations())
	}
	if s, _, _ := unstructured.NestedBool(wf.Object, "spec", "suspend"); s {
		t.Fatal("the run is suspended")
	}
	r := &stagesRun{t: t, c: c, ns: ns, wf: wf, sel: map[string]string{argo.WorkflowLabel: wf.GetName()}}
	var ctx context.Context
	ctx, r.stopDriver = context.WithCancel(t.Context())
	r.wg.Go(func() { playKFPDriver(ctx, t, c, ns, r.sel) })
	t.Logf("run %s submitted", wf.GetName())
	return r
}

// declareDuration sets the value of preprocess's fairway.dev/expected-duration (the example
// declares 45m).
func declareDuration(t *testing.T, wf *unstructured.Unstructured, d time.Duration) {
	t.Helper()
	params, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	changed := 0
	for _, p := range params {
		m := p.(map[string]any)
		if m["name"] == "kubernetes-comp-preprocess" {
			m["value"] = strings.Replace(m["value"].(string), `"45m"`, `"`+d.String()+`"`, 1)
			changed++
		}
	}
	if err := unstructured.SetNestedSlice(wf.Object, params, "spec", "arguments", "parameters"); err != nil {
		t.Fatal(err)
	}
	templates, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	for _, tmpl := range templates {
		dag, ok, _ := unstructured.NestedSlice(tmpl.(map[string]any), "dag", "tasks")
		if !ok {
			continue
		}
		for _, task := range dag {
			if task.(map[string]any)["name"] != "preprocess" {
				continue
			}
			args, _, _ := unstructured.NestedSlice(task.(map[string]any), "arguments", "parameters")
			for _, a := range args {
				if m := a.(map[string]any); m["name"] == "pod-metadata-annotation-val" && m["value"] == "45m" {
					m["value"] = d.String()
					changed++
				}
			}
			_ = unstructured.SetNestedSlice(task.(map[string]any), args, "arguments", "parameters")
		}
		_ = unstructured.SetNestedSlice(tmpl.(map[string]any), dag, "dag", "tasks")
	}
	if err := unstructured.SetNestedSlice(wf.Object, templates, "spec", "templates"); err != nil {
		t.Fatal(err)
	}
	if changed != 2 {
		t.Fatalf("preprocess's expected duration set in %d places, want its kubernetes config and its executor's annotation", changed)
	}
}

func (r *stagesRun) stop() {
	r.stopDriver()
	r.wg.Wait()
}

// pods are the run's pods and the test's own (probe, burst) in the namespace.
func (r *stagesRun) pods() []corev1.Pod {
	var list corev1.PodList
	if err := r.c.Client().List(r.t.Context(), &list, client.InNamespace(r.ns)); err != nil {
		r.t.Fatal(err)
	}
	return list.Items
}

func (r *stagesRun) pod(name string) *corev1.Pod {
	var p corev1.Pod
	if err := r.c.Client().Get(r.t.Context(), client.ObjectKey{Namespace: r.ns, Name: name}, &p); err != nil {
		return nil
	}
	return &p
}

func (r *stagesRun) poll(timeout time.Duration, what string, done func([]corev1.Pod) bool) {
	r.t.Helper()
	if err := wait.PollUntilContextTimeout(r.t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return done(r.pods()), nil
	}); err != nil {
		r.t.Fatalf("waiting for %s: %v; pods: %s; nodes: %s", what, err, describePods(r.pods()), workflowNodes(r.wf))
	}
}

func (r *stagesRun) sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// isStep reports whether p is the executor of the KFP task of that name.
func isStep(p *corev1.Pod, task string) bool {
	return kfp.PodRole(p) == kfp.RoleExecutor && strings.Contains(p.Annotations[kfp.NodeNameAnnotation], ".root."+task+".")
}

func (r *stagesRun) preprocess() *corev1.Pod {
	for _, p := range r.pods() {
		if p.Labels[argo.WorkflowLabel] == r.wf.GetName() && isStep(&p, "preprocess") {
			return &p
		}
	}
	return nil
}

// waitPreprocessRunning returns when preprocess's pod started.
func (r *stagesRun) waitPreprocessRunning() time.Time {
	r.t.Helper()
	var start time.Time
	r.poll(60*time.Second, "preprocess to run", func([]corev1.Pod) bool {
		p := r.preprocess()
		if p == nil || p.Status.Phase != corev1.PodRunning || p.Status.StartTime == nil {
			return false
		}
		start = p.Status.StartTime.Time
		return true
	})
	r.t.Logf("preprocess runs since %s", start.Format("15:04:05"))
	return start
}

func (r *stagesRun) waitTrainCreated() *corev1.Pod {
	r.t.Helper()
	var train *corev1.Pod
	r.poll(prepFor+30*time.Second, "train's pod", func(pods []corev1.Pod) bool {
		for i := range pods {
			if pods[i].Labels[argo.WorkflowLabel] == r.wf.GetName() && isStep(&pods[i], "train") {
				train = &pods[i]
				return true
			}
		}
		return false
	})
	return train
}

// createBurst creates 4 single-GPU pods of the queue, of the pipeline's priority, that run 60s.
func (r *stagesRun) createBurst(prefix string) []string {
	var names []string
	for i := range 4 {
		name := fmt.Sprintf("%s-burst-%d", prefix, i)
		p := schedPod(r.ns, name, "vision").GPUs(1).Priority(fairwayv1.PriorityClassTraining).CompleteAfter(60 * time.Second)
		mustCreate(r.t, r.c, &p.Pod)
		names = append(names, name)
	}
	return names
}

// cleanup deletes the burst and, for the control, the run and its pods.
func (r *stagesRun) cleanup(burst []string) {
	ctx := r.t.Context()
	for _, n := range burst {
		_ = r.c.Client().Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: n}}, client.GracePeriodSeconds(0))
	}
	if r.wf.GetAnnotations()[fairwayv1.RunAdmissionAnnotation] == string(fairwayv1.RunStaged) {
		return
	}
	r.stop()
	if err := r.c.Client().Delete(ctx, r.wf); err != nil {
		r.t.Fatal(err)
	}
	_ = r.c.Client().DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(r.ns), client.MatchingLabels(r.sel), client.GracePeriodSeconds(0))
	r.poll(30*time.Second, "the control run's pods to go", func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Labels[argo.WorkflowLabel] == r.wf.GetName() || strings.Contains(p.Name, "-burst-") {
				return false
			}
		}
		return true
	})
}

func countBound(pods []corev1.Pod, names []string) int {
	n := 0
	for _, p := range pods {
		for _, name := range names {
			if p.Name == name && p.Spec.NodeName != "" {
				n++
			}
		}
	}
	return n
}
