package pipelines

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/argo/runprofile"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// stagedRun prepares on CPU (declared to take 10m), then trains on 4 GPUs. The webhook marked
// it Staged for queue team.
const stagedRun = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: %s
  generateName: vision-
  namespace: ns
  uid: 0b6f1c1e-0000-4000-8000-0000000000%02d
  creationTimestamp: "2026-01-01T00:00:00Z"
  annotations: {fairway.dev/run-admission: %s, fairway.dev/run-queue: team}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: prep, template: cpu}
      - {name: train, template: gpu, depends: prep}
  - name: cpu
    metadata: {annotations: {%s}}
    container: {image: x, resources: {requests: {cpu: "4"}}}
  - name: gpu
    container: {image: x, resources: {limits: {nvidia.com/gpu: "%d"}}}
`

var t0 = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC) // prep starts

type stagesFixture struct {
	t       *testing.T
	snap    *snapshot.Snapshot
	eng     *engine.Engine
	runs    *Runs
	indexer toolscache.Indexer
	now     time.Time
	n       int
}

func newStagesFixture(t *testing.T, queue *testutil.QueueWrapper) *stagesFixture {
	f := &stagesFixture{t: t, snap: snapshot.New(), eng: engine.New(engine.Options{}), now: t0}
	if err := f.snap.UpsertNode(testutil.MakeNode("n1").GPUs(4, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	// The queue stages runs, as it must for the scheduler to act on a Staged run.
	if err := f.snap.UpsertQueue(queue.Namespaces("ns").PipelineAdmission(v1alpha1.PipelineAdmissionStages).Obj()); err != nil {
		t.Fatal(err)
	}
	f.indexer = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	f.runs = New(nil, nil, cache.NewQueue(), Options{StageLead: time.Minute, Engine: runprofile.Pipelines{}})
	f.runs.lister = toolscache.NewGenericLister(f.indexer, schema.GroupResource{Group: "argoproj.io", Resource: "workflows"})
	return f
}

// addRun creates a run; state "" leaves it unmarked (a PerPod queue).
func (f *stagesFixture) addRun(name string, state v1alpha1.RunAdmissionState, prepAnnotations string, gpus int) types.NamespacedName {
	f.t.Helper()
	f.n++
	wf := &unstructured.Unstructured{}
	doc := fmt.Sprintf(stagedRun, name, f.n, state, prepAnnotations, gpus)
	if err := yaml.Unmarshal([]byte(doc), &wf.Object); err != nil {
		f.t.Fatal(err)
	}
	if err := f.indexer.Add(wf); err != nil {
		f.t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: name}
	f.runs.Apply(f.snap, key, f.now)
	return key
}

// pod puts a pod of a run's step (Argo's labels and node name) into the snapshot and tells Runs.
func (f *stagesFixture) pod(p *testutil.PodWrapper, run, step string) *corev1.Pod {
	f.t.Helper()
	if run != "" {
		p = p.Label(argo.WorkflowLabel, run).Annotation(argo.NodeNameAnnotation, run+"."+step)
	}
	obj := p.Queue("team").Obj()
	if err := f.snap.UpsertPod(obj); err != nil {
		f.t.Fatal(err)
	}
	f.runs.PodSeen(f.snap, obj, f.now)
	return obj
}

func (f *stagesFixture) cycle() engine.Result {
	f.t.Helper()
	res := f.eng.Schedule(f.snap, f.now)
	// As the loop does (runtime.Extension): the stand-ins' bindings go, then Decided reads.
	res.Bindings = slices.DeleteFunc(res.Bindings, func(b engine.Binding) bool { return f.runs.Owns(b.Pod) })
	before := len(res.Bindings)
	f.runs.Decided(f.snap, &res, f.now)
	if len(res.Bindings) != before {
		f.t.Errorf("Decided changed the result's bindings: %d, then %d", before, len(res.Bindings))
	}
	for _, b := range res.Bindings {
		if f.runs.Owns(b.Pod) {
			f.t.Errorf("binding of a stand-in %s left for the binder", b.Pod)
		}
	}
	return res
}

func (f *stagesFixture) lastWrite(key types.NamespacedName) (write, bool) {
	w, ok := f.runs.pending[key]
	delete(f.runs.pending, key)
	return w, ok
}

func bound(res engine.Result, names ...string) []string {
	var out []string
	for _, b := range res.Bindings {
		if slices.Contains(names, b.Pod.Name) {
			out = append(out, b.Pod.Name)
		}
	}
	return out
}

var burst = []string{"burst-0", "burst-1", "burst-2", "burst-3"}

// stagesScenario: prep runs from t0 and is declared to take 10m; 4 single-GPU pods of the same
// queue arrive at 9m40s, after the run; prep ends at 10m and train's pod comes 5s later. It
// returns the cycle's result when train's pod is there.
func stagesScenario(t *testing.T, state v1alpha1.RunAdmissionState) (*stagesFixture, types.NamespacedName, engine.Result) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	run := f.addRun("run1", state, "fairway.dev/expected-duration: 10m", 4)
	prep := testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0)
	f.pod(prep, "run1", "prep")
	stand := types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run1", 1, 0)}

	// Far from prep's end: nothing held: no stand-in in the snapshot.
	for _, at := range []time.Duration{time.Minute, 5 * time.Minute, 8*time.Minute + 50*time.Second} {
		f.now = t0.Add(at)
		f.cycle()
		if f.snap.Task(stand) != nil {
			t.Fatalf("at %s of a 10m step, train is already held", at)
		}
	}
	// Within the lead (1m) of its expected end: the stage is queued, then placed.
	f.now = t0.Add(9*time.Minute + 10*time.Second)
	f.cycle()
	f.now = f.now.Add(time.Second)
	f.cycle()
	if state == v1alpha1.RunStaged {
		if tk := f.snap.Task(stand); tk == nil || tk.NodeName != "n1" {
			t.Fatalf("train's stage is not held on n1 50s before prep's expected end: %+v", tk)
		}
		w, ok := f.lastWrite(run)
		if !ok || w.state != v1alpha1.RunStaged || w.reason != string(v1alpha1.RunStageHeld) || w.resume {
			t.Fatalf("write %+v (%v), want StageHeld", w, ok)
		}
		t.Logf("held: %s", w.message)
	} else if f.snap.Task(stand) != nil {
		t.Fatal("a run that is not Staged has a stage held")
	}

	// The burst arrives after the run, while prep still runs.
	f.now = t0.Add(9*time.Minute + 40*time.Second)
	for _, n := range burst {
		f.pod(testutil.MakePod("ns", n).GPU(1).Created(f.now), "", "")
	}
	res := f.cycle()
	burstBound := bound(res, burst...)
	// prep ends; train's driver runs (a KFP run) and train's pod comes.
	f.now = t0.Add(10 * time.Minute)
	prep = testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0).Phase(corev1.PodSucceeded)
	f.pod(prep, "run1", "prep")
	f.cycle()
	f.now = f.now.Add(5 * time.Second)
	f.pod(testutil.MakePod("ns", "run1-train").GPU(4).Created(f.now), "run1", "train")
	res = f.cycle()
	res.Bindings = append(res.Bindings, engineBindings(burstBound)...)
	return f, run, res
}

func engineBindings(names []string) []engine.Binding {
	out := make([]engine.Binding, len(names))
	for i, n := range names {
		out[i] = engine.Binding{Pod: types.NamespacedName{Namespace: "ns", Name: n}}
	}
	return out
}

// TestStagesTrainBindsBeforeALaterBurst: with Stages, train's 4 GPUs are held 50s before
// prep's declared end, a burst of single-GPU pods that came after the run waits, and train's
// pod binds in the cycle that sees it.
func TestStagesTrainBindsBeforeALaterBurst(t *testing.T) {
	f, run, res := stagesScenario(t, v1alpha1.RunStaged)
	if got := bound(res, "run1-train"); len(got) != 1 {
		t.Fatalf("train not bound in the cycle that saw it: bindings %v, waiting %v", res.Bindings, res.Unschedulable)
	}
	if got := bound(res, burst...); len(got) != 0 {
		t.Errorf("the later burst took GPUs: %v", got)
	}
	if n := len(f.runs.stagePods); n != 0 {
		t.Errorf("%d stand-ins left", n)
	}
	w, ok := f.lastWrite(run)
	if !ok || w.reason != string(v1alpha1.RunStagesAhead) {
		t.Errorf("write %+v (%v), want StagesAhead once train took its place", w, ok)
	}
	// Once train runs, the burst waits for GPUs like anything else.
	f.now = f.now.Add(time.Second)
	res = f.cycle()
	if got := bound(res, burst...); len(got) != 0 {
		t.Errorf("burst bound while train holds the GPUs: %v", got)
	}
	// What prep took is learnt for the next runs of the pipeline.
	if d := f.runs.durations.expected("ns/vision-\x00/prep"); d != 10*time.Minute {
		t.Errorf("learnt %s for prep, want 10m", d)
	}
}

// TestWithoutStagesTheBurstTakesTheGPUs is the same scenario in a PerPod queue: the burst binds
// at once and train waits behind it.
func TestWithoutStagesTheBurstTakesTheGPUs(t *testing.T) {
	_, _, res := stagesScenario(t, "")
	if got := bound(res, burst...); len(got) != 4 {
		t.Fatalf("burst bound %v, want all 4", got)
	}
	if got := bound(res, "run1-train"); len(got) != 0 {
		t.Fatalf("train bound beside the burst: %v", got)
	}
}

// TestStagesLearnsDurations: without a declared duration, the first run's train is held
// when prep ends; the next run of the same pipeline is held a lead before prep's learnt end.
func TestStagesLearnsDurations(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	f.addRun("run1", v1alpha1.RunStaged, "", 4)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0), "run1", "prep")
	stand1 := types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run1", 1, 0)}
	f.now = t0.Add(9*time.Minute + 30*time.Second)
	f.cycle()
	if f.snap.Task(stand1) != nil {
		t.Fatal("held with no expected duration before prep ended")
	}
	f.now = t0.Add(8 * time.Minute) // prep took 8m
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0).Phase(corev1.PodSucceeded), "run1", "prep")
	f.cycle()
	if f.snap.Task(stand1) == nil {
		t.Fatal("not held once prep ended")
	}
	// Its pods do not come: the hold is given up after StartGrace.
	f.now = f.now.Add(31 * time.Second)
	f.cycle()
	if f.snap.Task(stand1) != nil || len(f.runs.stagePods) != 0 {
		t.Fatal("a stage hold whose pods never come lasts past StartGrace")
	}
	if w, ok := f.lastWrite(types.NamespacedName{Namespace: "ns", Name: "run1"}); !ok || w.reason != string(v1alpha1.RunStageLapsed) {
		t.Errorf("write %+v (%v), want StageLapsed", w, ok)
	}

	t1 := t0.Add(time.Hour)
	f.now = t1
	f.addRun("run2", v1alpha1.RunStaged, "", 4)
	f.pod(testutil.MakePod("ns", "run2-prep").CPU("4").Created(t1).Node("n1").Started(t1), "run2", "prep")
	stand2 := types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run2", 1, 0)}
	f.now = t1.Add(6*time.Minute + 50*time.Second)
	f.cycle()
	if f.snap.Task(stand2) != nil {
		t.Fatal("held more than the lead before prep's learnt end")
	}
	f.now = t1.Add(7*time.Minute + 10*time.Second)
	f.cycle()
	if f.snap.Task(stand2) == nil {
		t.Fatal("not held within the lead of prep's learnt end (8m)")
	}
}

// TestStagesOverrun: prep runs well past its declared end; the hold is given up (the GPUs
// are not held for ever) and made again when prep ends.
func TestStagesOverrun(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	run := f.addRun("run1", v1alpha1.RunStaged, "fairway.dev/expected-duration: 10m", 4)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0), "run1", "prep")
	stand := types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run1", 1, 0)}
	f.now = t0.Add(9*time.Minute + 30*time.Second)
	f.cycle()
	f.now = f.now.Add(time.Second)
	f.cycle()
	if tk := f.snap.Task(stand); tk == nil || tk.NodeName == "" {
		t.Fatal("not held")
	}
	f.now = t0.Add(11*time.Minute + time.Second)
	f.cycle()
	if f.snap.Task(stand) != nil {
		t.Fatal("still held a lead past prep's expected end")
	}
	if w, _ := f.lastWrite(run); w.reason != string(v1alpha1.RunStageLapsed) || !strings.Contains(w.message, "held again") {
		t.Errorf("write %+v, want StageLapsed", w)
	}
	f.now = t0.Add(20 * time.Minute)
	f.cycle()
	if f.snap.Task(stand) != nil {
		t.Fatal("held again while prep overruns")
	}
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0).Phase(corev1.PodSucceeded), "run1", "prep")
	f.cycle()
	if f.snap.Task(stand) == nil {
		t.Fatal("not held again when prep ended")
	}
}

// TestStagesNeverFits: a stage above its queue's limit is never held; the run goes on pod by
// pod with the reason.
func TestStagesNeverFits(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, "3"))
	run := f.addRun("run1", v1alpha1.RunStaged, "", 4)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0).Phase(corev1.PodSucceeded), "run1", "prep")
	f.cycle()
	f.cycle()
	if len(f.runs.stagePods) != 0 {
		t.Fatal("a stage above the queue's limit is held")
	}
	if w, _ := f.lastWrite(run); w.reason != string(v1alpha1.RunNeverFits) || w.resume {
		t.Errorf("write %+v, want NeverFits", w)
	}
	f.now = f.now.Add(time.Minute)
	f.cycle()
	if len(f.runs.stagePods) != 0 {
		t.Fatal("held again after NeverFits")
	}
}

// TestStagesSkippedStep: a step the Workflow's status says was skipped (KFP's cached executor)
// counts as finished.
func TestStagesSkippedStep(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	key := f.addRun("run1", v1alpha1.RunStaged, "", 4)
	obj, _, _ := f.indexer.GetByKey("ns/run1")
	wf := obj.(*unstructured.Unstructured).DeepCopy()
	_ = unstructured.SetNestedMap(wf.Object, map[string]any{"run1-1": map[string]any{"name": "run1.prep", "type": "Skipped", "phase": "Skipped"}}, "status", "nodes")
	if err := f.indexer.Update(wf); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, key, f.now)
	f.cycle()
	if len(f.runs.stagePods) != 1 {
		t.Fatal("train not held after its only predecessor was skipped")
	}
	// The run ends: everything it held goes.
	_ = unstructured.SetNestedField(wf.Object, "Failed", "status", "phase")
	if err := f.indexer.Update(wf); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, key, f.now)
	if len(f.runs.stagePods) != 0 || len(f.runs.staged) != 0 || f.snap.Task(types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run1", 1, 0)}) != nil {
		t.Fatal("a finished run still holds its stage")
	}
}

func TestStepPath(t *testing.T) {
	for node, want := range map[string]string{
		"wf.root.train.executor":     "/root/train/executor",
		"wf[0].prep[1].sub":          "/prep/sub",
		"wf.loop(0:{\"a\":\"b.c\"})": "/loop",
		"wf.retry(1)":                "/retry",
		"wf.a.b(0:x).c":              "/a/b/c",
	} {
		if got, ok := stepPath("wf", node); !ok || got != want {
			t.Errorf("stepPath(%q) = %q, want %q", node, got, want)
		}
	}
	if _, ok := stepPath("other", "wf.a"); ok {
		t.Error("a node of another workflow is a step")
	}
}

// TestStagesKeepsTheRunsPlace: the GPUs are busy when train's stage is held, so the
// hold waits (with the engine's reason); the burst comes after the run, train's pod after
// prep ends. When the GPUs free up, the hold, as old as the run, is placed first and
// passes them to train's pod: the burst still waits.
func TestStagesKeepsTheRunsPlace(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	blocker := testutil.MakePod("ns", "blocker").GPU(4).Created(t0.Add(-time.Hour)).Node("n1").Preemptibility(v1alpha1.NonPreemptible)
	f.pod(blocker, "", "")
	run := f.addRun("run1", v1alpha1.RunStaged, "fairway.dev/expected-duration: 10m", 4)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0), "run1", "prep")
	f.now = t0.Add(9*time.Minute + 10*time.Second)
	f.cycle()
	f.now = f.now.Add(time.Second)
	f.cycle()
	w, ok := f.lastWrite(run)
	if !ok || !v1alpha1.UnschedulableReason(w.reason).Known() {
		t.Fatalf("write %+v (%v), want the engine's reason for the waiting hold", w, ok)
	}
	f.now = t0.Add(9*time.Minute + 40*time.Second)
	for _, n := range burst {
		f.pod(testutil.MakePod("ns", n).GPU(1).Created(f.now), "", "")
	}
	f.cycle()
	f.now = t0.Add(10 * time.Minute)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0).Phase(corev1.PodSucceeded), "run1", "prep")
	f.cycle()
	f.now = f.now.Add(5 * time.Second)
	f.pod(testutil.MakePod("ns", "run1-train").GPU(4).Created(f.now), "run1", "train")
	f.cycle()
	// Long after: the stand-in still waits with train's pod (nothing is held, nothing lapses).
	f.now = f.now.Add(5 * time.Minute)
	f.cycle()
	if len(f.runs.stagePods) != 1 {
		t.Fatalf("%d stand-ins, want the one waiting with train's pod", len(f.runs.stagePods))
	}
	f.snap.DeletePod(types.NamespacedName{Namespace: "ns", Name: "blocker"})
	f.now = f.now.Add(time.Second)
	res := f.cycle()
	if got := bound(res, burst...); len(got) != 0 {
		t.Fatalf("the burst took the GPUs before the run: %v", got)
	}
	f.now = f.now.Add(time.Second)
	res = f.cycle()
	if got := bound(res, "run1-train"); len(got) != 1 {
		t.Fatalf("train not bound the cycle after its stand-in was placed: %v, waiting %v", res.Bindings, res.Unschedulable)
	}
	if got := bound(res, burst...); len(got) != 0 {
		t.Errorf("the burst took GPUs: %v", got)
	}
	if len(f.runs.stagePods) != 0 {
		t.Error("stand-ins left")
	}
}

// TestStagedRunOfADeletedQueueIsReleased: a Staged run whose stage is held, when its queue
// is deleted, gives the hold up in the next cycle and is no longer staged, with the reason
// on the Workflow; it is not resumed (it runs already, and its user may have suspended it).
func TestStagedRunOfADeletedQueueIsReleased(t *testing.T) {
	f, run, _ := stagesScenario(t, v1alpha1.RunStaged)
	f.lastWrite(run)
	f.snap.DeleteQueue("team")
	f.cycle()
	w, ok := f.lastWrite(run)
	if !ok || w.state != v1alpha1.RunPerPod || w.reason != string(v1alpha1.RunQueueUnavailable) || w.resume || !w.staged ||
		!strings.Contains(w.message, "queue team does not exist") {
		t.Fatalf("write %+v (%v), want the staged run released with reason %s", w, ok, v1alpha1.RunQueueUnavailable)
	}
	if len(f.runs.staged) != 0 || len(f.runs.stagePods) != 0 {
		t.Error("the run is still staged, or a stand-in of its stage stays")
	}
}

// TestForgedStagedRunIsNotStaged: a Workflow marked Staged in a queue that admits pipelines whole
// (Peak), not by stages, gets no hold.
func TestForgedStagedRunIsNotStaged(t *testing.T) {
	f := newStagesFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	if err := f.snap.UpsertQueue(testutil.MakeQueue("team").GPU("4", 1, "").Namespaces("ns").PipelineAdmission(v1alpha1.PipelineAdmissionPeak).Obj()); err != nil {
		t.Fatal(err)
	}
	run := f.addRun("run1", v1alpha1.RunStaged, "fairway.dev/expected-duration: 1m", 4)
	f.pod(testutil.MakePod("ns", "run1-prep").CPU("4").Created(t0).Node("n1").Started(t0), "run1", "prep")
	f.now = t0.Add(50 * time.Second)
	f.cycle()
	if w, ok := f.lastWrite(run); !ok || w.reason != string(v1alpha1.RunQueueUnavailable) {
		t.Fatalf("write %+v (%v), want the run released", w, ok)
	}
	f.now = t0.Add(55 * time.Second)
	f.cycle()
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: v1alpha1.RunStagePodName("run1", 1, 0)}) != nil {
		t.Error("a forged Staged run has its stage held")
	}
}
