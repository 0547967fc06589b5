package pipelines

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters/argo/runprofile"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// heldRun trains on two pods of 4 GPUs at once after a CPU step: its peak is 8 GPUs. The
// webhook held it (v1alpha1.RunHeld, spec.suspend) for queue team.
const heldRun = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: run1
  namespace: ns
  uid: 0b6f1c1e-0000-4000-8000-000000000001
  creationTimestamp: "2026-01-01T00:00:00Z"
  annotations: {fairway.dev/run-admission: Held, fairway.dev/run-queue: team}
spec:
  suspend: true
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: prep, template: cpu}
      - {name: a, template: gpu4, depends: prep}
      - {name: b, template: gpu4, depends: prep}
  - name: cpu
    container: {image: x, resources: {requests: {cpu: "4"}}}
  - name: gpu4
    container: {image: x, resources: {limits: {nvidia.com/gpu: "4"}}}
`

type fixture struct {
	t       *testing.T
	snap    *snapshot.Snapshot
	eng     *engine.Engine
	runs    *Runs
	indexer toolscache.Indexer
	events  *events.FakeRecorder
	now     time.Time
}

func newFixture(t *testing.T, queue *testutil.QueueWrapper) *fixture {
	f := &fixture{t: t, snap: snapshot.New(), eng: engine.New(engine.Options{}), now: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)}
	// As the chart runs the scheduler: pods from the API server need the webhook's seal; the
	// stand-ins for a run's peak are the runtime's own and need none.
	f.snap.SetAdmissionKey(v1alpha1.AdmissionKey(strings.Repeat("k", v1alpha1.MinAdmissionKeyBytes)))
	if err := f.snap.UpsertNode(testutil.MakeNode("n1").GPUs(8, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	// The queue admits pipelines whole, as it must for the scheduler to hold a run.
	if err := f.snap.UpsertQueue(queue.Namespaces("ns").PipelineAdmission(v1alpha1.PipelineAdmissionPeak).Obj()); err != nil {
		t.Fatal(err)
	}
	f.indexer = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	f.events = events.NewFakeRecorder(16)
	f.runs = New(nil, nil, cache.NewQueue(), Options{Engine: runprofile.Pipelines{}, Events: f.events})
	f.runs.lister = toolscache.NewGenericLister(f.indexer, schema.GroupResource{Group: "argoproj.io", Resource: "workflows"})
	wf := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(heldRun), &wf.Object); err != nil {
		t.Fatal(err)
	}
	if err := f.indexer.Add(wf); err != nil {
		t.Fatal(err)
	}
	return f
}

var runKey = types.NamespacedName{Namespace: "ns", Name: "run1"}

// cycle runs the engine and Decided, and returns the write pending for the run.
func (f *fixture) cycle() (engine.Result, write, bool) {
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
			f.t.Errorf("binding of a peak pod %s left for the binder", b.Pod)
		}
	}
	w, ok := f.runs.pending[runKey]
	delete(f.runs.pending, runKey)
	return res, w, ok
}

// TestHeldRunStartsWhenItsPeakFits: a run whose 8-GPU peak does not fit beside a 6-GPU job
// waits with the engine's reason, counted in its queue's demand; once the job is gone, the
// engine places its peak and the run is resumed, not bound; its own first pod gives the
// capacity back.
func TestHeldRunStartsWhenItsPeakFits(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("8", 1, ""))
	blocker := testutil.MakePod("ns", "blocker").Queue("team").GPU(6).Node("n1").Preemptibility(v1alpha1.NonPreemptible).Obj()
	if err := f.snap.UpsertPod(blocker); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, runKey, f.now)
	peak := []types.NamespacedName{{Namespace: "ns", Name: "run1.peak-0"}, {Namespace: "ns", Name: "run1.peak-1"}}
	for _, k := range peak {
		if f.snap.Task(k) == nil {
			t.Fatalf("peak pod %s not in the snapshot", k)
		}
	}
	if d := f.snap.Queue("team").Demand(snapshot.DimGPU); d != 14000 {
		t.Errorf("queue demand %d milli-GPU, want the job's 6 and the run's 8", d)
	}

	_, w, ok := f.cycle()
	if !ok || w.state != v1alpha1.RunHeld || w.resume || w.reason == "" {
		t.Fatalf("write %+v (%v), want the held run's reason", w, ok)
	}
	if !v1alpha1.UnschedulableReason(w.reason).Known() {
		t.Errorf("reason %q is not one of the engine's", w.reason)
	}
	if _, _, again := f.cycle(); again {
		t.Error("the same reason written again")
	}

	f.snap.DeletePod(types.NamespacedName{Namespace: "ns", Name: "blocker"})
	_, w, ok = f.cycle()
	if !ok || w.state != v1alpha1.RunAdmitted || !w.resume || w.reason != string(v1alpha1.RunPeakFits) {
		t.Fatalf("write %+v (%v), want the run resumed", w, ok)
	}
	for _, k := range peak {
		if tk := f.snap.Task(k); tk == nil || tk.NodeName != "n1" {
			t.Errorf("peak pod %s: want it kept on n1 until the run's pods come", k)
		}
	}
	f.runs.PodSeen(f.snap, testutil.MakePod("ns", "run1-cpu-123").Label("workflows.argoproj.io/workflow", "run1").Obj(), f.now)
	f.cycle()
	for _, k := range peak {
		if f.snap.Task(k) != nil {
			t.Errorf("peak pod %s still in the snapshot after the run's first pod", k)
		}
	}
	if len(f.runs.runs) != 0 {
		t.Error("the run is still tracked")
	}
}

// TestHeldRunNeverFits: a run whose peak is above its queue's limit is not held for ever.
func TestHeldRunNeverFits(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("4", 1, "6"))
	f.runs.Apply(f.snap, runKey, f.now)
	_, w, ok := f.cycle()
	if !ok || w.state != v1alpha1.RunPerPod || !w.resume || w.reason != string(v1alpha1.RunNeverFits) {
		t.Fatalf("write %+v (%v), want the run resumed pod by pod", w, ok)
	}
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) != nil {
		t.Error("the peak pods stay in the snapshot")
	}
}

// TestHeldRunTooLargeForTheCluster: a peak above every node, once held for NeverFitsAfter.
func TestHeldRunTooLargeForTheCluster(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("16", 1, ""))
	f.snap.DeleteNode("n1")
	if err := f.snap.UpsertNode(testutil.MakeNode("n2").GPUs(4, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, runKey, f.now)
	f.now = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC) // held for 30s: nodes may still join
	if _, w, _ := f.cycle(); w.state == v1alpha1.RunPerPod {
		t.Fatalf("released after 30s: %+v", w)
	}
	f.now = time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	_, w, ok := f.cycle()
	if !ok || w.state != v1alpha1.RunPerPod || w.reason != string(v1alpha1.RunNeverFits) {
		t.Fatalf("write %+v (%v), want the run resumed pod by pod", w, ok)
	}
}

// TestResumedElsewhere: a run its user resumed is no longer held.
func TestResumedElsewhere(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	f.runs.Apply(f.snap, runKey, f.now)
	obj, _, _ := f.indexer.GetByKey("ns/run1")
	wf := obj.(*unstructured.Unstructured).DeepCopy()
	unstructured.RemoveNestedField(wf.Object, "spec", "suspend")
	if err := f.indexer.Update(wf); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, runKey, f.now)
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) != nil || len(f.runs.runs) != 0 {
		t.Error("a run resumed by its user is still held")
	}
}

// TestRebuildFindsHeldRuns: a new leader (or a restarted scheduler) rebuilds its snapshot with the
// runs held when it starts. The lister's List needs a selector: with nil it dereferenced it and
// crashed the scheduler at start wherever Argo was installed first (the e2e TestDemo).
func TestRebuildFindsHeldRuns(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("8", 1, ""))
	f.runs.Rebuild(f.snap, f.now)
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) == nil {
		t.Fatal("the held run is not in the rebuilt snapshot")
	}
}

// released checks that the cycle's write releases the run pod by pod because its queue cannot
// hold it, naming why, with a warning event, and that nothing of its peak stays in the snapshot.
func (f *fixture) released(w write, ok bool, why string) {
	f.t.Helper()
	if !ok || w.state != v1alpha1.RunPerPod || !w.resume || w.reason != string(v1alpha1.RunQueueUnavailable) || !strings.Contains(w.message, why) {
		f.t.Fatalf("write %+v (%v), want the run resumed pod by pod with reason %s naming %q", w, ok, v1alpha1.RunQueueUnavailable, why)
	}
	select {
	case e := <-f.events.Events:
		if !strings.Contains(e, v1alpha1.EventRunPerPod) || !strings.Contains(e, why) {
			f.t.Errorf("event %q, want %s naming %q", e, v1alpha1.EventRunPerPod, why)
		}
	default:
		f.t.Error("no event on the Workflow")
	}
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) != nil || len(f.runs.runs) != 0 {
		f.t.Error("the released run's peak stays in the snapshot")
	}
}

// holdBehindBlocker holds the run behind a non-preemptible 6-GPU job on its 8-GPU node, and
// forgets the events so far.
func (f *fixture) holdBehindBlocker() {
	f.t.Helper()
	blocker := testutil.MakePod("ns", "blocker").Queue("team").GPU(6).Node("n1").Preemptibility(v1alpha1.NonPreemptible).Obj()
	if err := f.snap.UpsertPod(blocker); err != nil {
		f.t.Fatal(err)
	}
	f.runs.Apply(f.snap, runKey, f.now)
	if _, w, ok := f.cycle(); !ok || w.state != v1alpha1.RunHeld {
		f.t.Fatalf("write %+v (%v): want the run held first", w, ok)
	}
	f.drainEvents()
}

// drainEvents forgets the events recorded so far.
func (f *fixture) drainEvents() {
	for {
		select {
		case <-f.events.Events:
		default:
			return
		}
	}
}

// TestHeldRunOfADeletedQueueIsReleased: a run held under Peak whose queue is deleted is released
// in the first cycle after, with the reason on the Workflow and in an event: it is never left
// suspended with no pod and no reason.
func TestHeldRunOfADeletedQueueIsReleased(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	f.holdBehindBlocker()
	f.snap.DeleteQueue("team")
	_, w, ok := f.cycle()
	f.released(w, ok, "queue team does not exist")
}

// TestHeldRunOfAQueueThatStopsServingIsReleased: the same when the queue stops serving the
// run's namespace, and when its pipeline admission is turned off.
func TestHeldRunOfAQueueThatStopsServingIsReleased(t *testing.T) {
	for name, tc := range map[string]struct {
		queue *testutil.QueueWrapper
		why   string
	}{
		"namespace moved": {testutil.MakeQueue("team").GPU("4", 1, "").Namespaces("other").PipelineAdmission(v1alpha1.PipelineAdmissionPeak),
			"queue team does not serve namespace ns"},
		"per pod": {testutil.MakeQueue("team").GPU("4", 1, "").Namespaces("ns").PipelineAdmission(v1alpha1.PipelineAdmissionPerPod),
			"queue team admits pipelines PerPod, not Peak"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
			f.holdBehindBlocker()
			if err := f.snap.UpsertQueue(tc.queue.Obj()); err != nil {
				t.Fatal(err)
			}
			_, w, ok := f.cycle()
			f.released(w, ok, tc.why)
		})
	}
}

// TestForgedHeldRunIsNotHeld: a Workflow marked held for a queue that does not admit pipelines
// whole (keys its user wrote past the webhook) gets no stand-in in the snapshot, so no capacity,
// and is released in its first cycle.
func TestForgedHeldRunIsNotHeld(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("8", 1, ""))
	if err := f.snap.UpsertQueue(testutil.MakeQueue("team").GPU("8", 1, "").Namespaces("ns").Obj()); err != nil {
		t.Fatal(err)
	}
	f.runs.Apply(f.snap, runKey, f.now)
	if f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) != nil {
		t.Fatal("a run of a PerPod queue stands in the snapshot")
	}
	res, w, ok := f.cycle()
	f.released(w, ok, "queue team admits pipelines PerPod, not Peak")
	if len(res.Bindings) != 0 {
		t.Errorf("bindings %v", res.Bindings)
	}
}

// TestHeldRunWaitsForItsQueueInTheSameCycle: a run taken up before the Queue event of the same
// cycle is held, not released: the check waits until every change of the cycle is applied.
func TestHeldRunWaitsForItsQueueInTheSameCycle(t *testing.T) {
	f := newFixture(t, testutil.MakeQueue("team").GPU("4", 1, ""))
	f.snap.DeleteQueue("team")
	f.runs.Apply(f.snap, runKey, f.now) // the run's event first
	if err := f.snap.UpsertQueue(testutil.MakeQueue("team").GPU("4", 1, "").Namespaces("ns").PipelineAdmission(v1alpha1.PipelineAdmissionPeak).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, w, ok := f.cycle(); ok {
		t.Fatalf("write %+v: the run is released though its queue came in the same cycle", w)
	}
	if len(f.runs.runs) != 1 || f.snap.Task(types.NamespacedName{Namespace: "ns", Name: "run1.peak-0"}) == nil {
		t.Fatal("the run is not held once its queue is known")
	}
}
