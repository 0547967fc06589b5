package pipelines

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/pipelinerun"
	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Stages (v1alpha1.PipelineAdmissionStages): the run runs from its creation, and the scheduler
// holds capacity for each of its GPU stages shortly before it.
//
// A run's stages are its profile's (pipelinerun.Stage: steps that come after the same longest
// chain of steps). The next GPU stage is the first one with GPU steps of which no pod exists
// yet. It is held when every step before it (KFP's drivers and importers aside, which take
// seconds) has finished, or runs and is about to finish: each of its running pods is within
// Options.StageLead of its expected end, which is, in this order,
//
//   - declared: the pod's v1alpha1.ExpectedDurationAnnotation (from the template's metadata, a
//     KFP kubernetes.add_pod_annotation, or the Workflow's podMetadata);
//   - learnt: the median of the last durations of the same step (its path in the run) in earlier
//     runs of the same pipeline (the Workflow's WorkflowTemplate or CronWorkflow, else its
//     generateName, which KFP sets to the pipeline's name), kept by the scheduler in memory;
//   - unknown: the steps are about to finish only once they have finished.
//
// A step that has not started yet is not about to finish. Argo's activeDeadlineSeconds is not
// read: it bounds a step, it does not say how long the step takes.
//
// The stage's hold is a pending gang of the stage's GPU pods as the profile has them (named
// v1alpha1.RunStagePodName), created as old as the run: within its queue it comes before work
// that arrived after the run, and the engine orders it, counts it in its queue's demand,
// reclaims and preempts for it like any gang. Once the engine places it, its bindings are
// dropped and the capacity stays taken in the snapshot. When a pod of the stage shows up, one
// of the stand-ins of its step gives it its place: the stand-in leaves the snapshot and its
// capacity becomes a hold (snapshot.Hold) of the pod's gang on the same node, for at most
// Options.StartGrace, which other gangs cannot use; the engine places the pod there in the
// cycle that sees it. A stand-in not placed yet stays, paired with the pod: it keeps the run's
// place in line, and passes the capacity on when the engine places it (settlePaired).
//
// Nothing is held for ever: a stage's hold is given up (v1alpha1.RunStageLapsed) when the steps
// before the stage run StageLead past their expected end (it is made again when they finish),
// or when the stage's pods do not come within StartGrace of the steps before it finishing; a
// stage above its queue's limit or the cluster is never held (v1alpha1.RunNeverFits). In
// every such case the stage's pods are scheduled as they come, as without pipeline admission.

// staged is a run of a Stages queue that the loop follows.
type staged struct {
	key     types.NamespacedName
	uid     types.UID
	queue   string
	family  string
	created time.Time
	prof    *pipelinerun.Profile
	// stepOf maps a step's path (without its entrypoint) to its index in prof.Steps.
	stepOf map[string]int
	// pods are the run's pods the loop has seen, by name.
	pods map[string]*stepPod
	// statusDone counts, per step, the pods (or skipped nodes) the Workflow's status says
	// ended; statusRunning are the starts of its running pod nodes.
	statusDone    []int64
	statusRunning [][]time.Time
	hold          *stageHold
	// givenUp are stages that are not held any more (lapsed after the steps before them
	// finished, or never fitting); onDone are stages to hold only when the steps before them
	// have finished (a hold lapsed while they overran).
	givenUp, onDone map[int]bool
	// reason and message are the last written.
	reason, message string
	writtenAt       time.Time
	durations       *durations
}

type stepPod struct {
	step     int
	phase    corev1.PodPhase
	started  time.Time
	expected time.Duration // declared on the pod; 0 when not
	handed   bool          // took a stand-in's place
}

type stageHold struct {
	stage   pipelinerun.Stage
	gang    snapshot.GangKey
	pods    []standIn
	created time.Time
	// expectedEnd is when the steps before the stage were expected to end; zero when held on
	// their completion.
	expectedEnd time.Time
	// beforeDone is when the steps before it were first seen finished.
	beforeDone time.Time
	placedAt   time.Time
	gpuMilli   int64
	maxPodGPU  int64
}

type standIn struct {
	key  types.NamespacedName
	step int
	// pod is the stage's pod that came for it while it was not placed yet.
	pod types.NamespacedName
}

// ---- Following runs --------------------------------------------------------------------------

func isStaged(wf *unstructured.Unstructured) bool {
	return wf != nil && wf.GetAnnotations()[v1alpha1.RunAdmissionAnnotation] == string(v1alpha1.RunStaged) && wf.GetDeletionTimestamp() == nil
}

// workflowFinished: Argo has ended the run.
func workflowFinished(wf *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
	switch phase {
	case "Succeeded", "Failed", "Error":
		return true
	}
	return false
}

// applyStaged brings a Staged run up to date: starts following it, reads its status, forgets
// it when it ended.
func (r *Runs) applyStaged(snap *snapshot.Snapshot, key types.NamespacedName, wf *unstructured.Unstructured, now time.Time) {
	sr := r.staged[key]
	if sr != nil && (wf == nil || wf.GetUID() != sr.uid || !isStaged(wf) || workflowFinished(wf)) {
		r.forgetStaged(snap, sr)
		sr = nil
	}
	if !isStaged(wf) || workflowFinished(wf) {
		return
	}
	if sr == nil {
		sr = r.followStaged(wf, now)
		if sr == nil {
			return
		}
	}
	sr.readStatus(wf)
}

func (r *Runs) followStaged(wf *unstructured.Unstructured, now time.Time) *staged {
	key := types.NamespacedName{Namespace: wf.GetNamespace(), Name: wf.GetName()}
	queue := v1alpha1.RunAdmissionOf(wf.GetAnnotations()).Queue
	prof, err := r.opts.Engine.Profile(wf)
	if err != nil || queue == "" || len(prof.GPUStages()) == 0 {
		if err != nil {
			r.opts.Log.V(1).Info("A Staged run cannot be profiled; its stages are not held", "workflow", key.String(), "err", err.Error())
		}
		return nil
	}
	entry, _, _ := unstructured.NestedString(wf.Object, "spec", "entrypoint")
	sr := &staged{key: key, uid: wf.GetUID(), queue: queue, family: runFamily(wf), created: wf.GetCreationTimestamp().Time, prof: prof,
		stepOf: make(map[string]int, len(prof.Steps)), pods: map[string]*stepPod{},
		statusDone: make([]int64, len(prof.Steps)), statusRunning: make([][]time.Time, len(prof.Steps)),
		givenUp: map[int]bool{}, onDone: map[int]bool{}, durations: &r.durations}
	if sr.created.IsZero() {
		sr.created = now
	}
	for i, s := range prof.Steps {
		sr.stepOf[strings.TrimPrefix(s.Path, entry)] = i
	}
	r.staged[key] = sr
	r.opts.Log.V(1).Info("Following a Staged run", "workflow", key.String(), "queue", queue, "profile", prof.String())
	return sr
}

// runFamily names the pipeline a run belongs to, for the durations of its steps.
func runFamily(wf *unstructured.Unstructured) string {
	ns := wf.GetNamespace() + "/"
	for _, l := range []string{"workflows.argoproj.io/workflow-template", "workflows.argoproj.io/cron-workflow"} {
		if v := wf.GetLabels()[l]; v != "" {
			return ns + l + "=" + v
		}
	}
	if g := wf.GetGenerateName(); g != "" {
		return ns + g
	}
	return ns + wf.GetName()
}

// stepPath turns an Argo node name into a step's path without the entrypoint: "wf.root.train"
// is "/root/train"; step groups ("[0]") and loop items or retries ("(0:a.b)") are left out.
func stepPath(workflow, node string) (string, bool) {
	rest, ok := strings.CutPrefix(node, workflow)
	if !ok {
		return "", false
	}
	var b strings.Builder
	depth := 0
	for _, c := range rest {
		switch {
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth = max(depth-1, 0)
		case depth > 0:
		case c == '.':
			b.WriteByte('/')
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), true
}

// readStatus takes from the Workflow's status which steps ended (pods that finished, nodes
// skipped or omitted) and when its running pods started: what a new leader knows of pods that
// no longer change.
func (sr *staged) readStatus(wf *unstructured.Unstructured) {
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	clear(sr.statusDone)
	for i := range sr.statusRunning {
		sr.statusRunning[i] = sr.statusRunning[i][:0]
	}
	for _, raw := range nodes {
		n, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		name, _ := n["name"].(string)
		typ, _ := n["type"].(string)
		phase, _ := n["phase"].(string)
		if typ != "Pod" && typ != "Skipped" {
			continue
		}
		path, ok := stepPath(sr.key.Name, name)
		if !ok {
			continue
		}
		i, ok := sr.stepOf[path]
		if !ok {
			continue
		}
		switch phase {
		case "Succeeded", "Failed", "Error", "Skipped", "Omitted":
			sr.statusDone[i]++
		case "Running":
			if s, _ := n["startedAt"].(string); s != "" {
				if t, err := time.Parse(time.RFC3339, s); err == nil {
					sr.statusRunning[i] = append(sr.statusRunning[i], t)
				}
			}
		}
	}
}

// seePod records a pod of the run, and hands a stand-in's place to a pod of the held stage.
func (r *Runs) seePod(snap *snapshot.Snapshot, sr *staged, pod *corev1.Pod, now time.Time) {
	path, ok := stepPath(sr.key.Name, r.opts.Engine.NodeOf(pod))
	if !ok {
		return
	}
	step, ok := sr.stepOf[path]
	if !ok || sr.prof.Steps[step].System {
		return
	}
	sp := sr.pods[pod.Name]
	if sp == nil {
		sp = &stepPod{step: step}
		sr.pods[pod.Name] = sp
	}
	was := sp.phase
	sp.phase = pod.Status.Phase
	if pod.DeletionTimestamp != nil && !terminal(sp.phase) {
		sp.phase = corev1.PodFailed
	}
	if pod.Status.StartTime != nil {
		sp.started = pod.Status.StartTime.Time
	}
	sp.expected = declared(pod.Annotations)
	if sp.phase == corev1.PodSucceeded && was != corev1.PodSucceeded && !sp.started.IsZero() && was != "" {
		r.durations.record(sr.family+"\x00"+path, now.Sub(sp.started))
	}
	hold := sr.hold
	if hold == nil || sp.handed || pod.Spec.NodeName != "" || terminal(sp.phase) || sr.prof.Steps[step].Stage != hold.stage.Index {
		return
	}
	i := slices.IndexFunc(hold.pods, func(s standIn) bool { return s.step == step && s.pod.Name == "" })
	if i < 0 {
		return
	}
	sp.handed = true
	hold.pods[i].pod = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if t := snap.Task(hold.pods[i].key); t != nil && t.NodeName != "" {
		r.handOff(snap, sr, hold.pods[i], hold.pods[i].pod, now)
		r.dropStandIn(sr, i, now)
	}
	// Not placed yet: the stand-in keeps the run's place in line for the pod, and gives it the
	// capacity when the engine places it (settlePaired).
}

// settlePaired runs after each cycle for the stand-ins whose pod came before the engine placed
// them: a stand-in placed now gives its capacity to its pod; one whose pod was placed anyway,
// or is gone, leaves.
func (r *Runs) settlePaired(snap *snapshot.Snapshot, sr *staged, now time.Time) {
	hold := sr.hold
	for i := 0; sr.hold == hold && i < len(hold.pods); {
		in := hold.pods[i]
		if in.pod.Name == "" {
			i++
			continue
		}
		real := snap.Task(in.pod)
		switch t := snap.Task(in.key); {
		case real == nil || real.State != snapshot.TaskPending:
			snap.DeletePod(in.key)
		case t != nil && t.NodeName != "":
			r.handOff(snap, sr, in, in.pod, now)
		default:
			i++
			continue
		}
		r.dropStandIn(sr, i, now)
	}
}

// paired reports whether a stand-in of the hold waits with its pod.
func (hold *stageHold) paired() bool {
	return slices.ContainsFunc(hold.pods, func(s standIn) bool { return s.pod.Name != "" })
}

// dropStandIn forgets the hold's i-th stand-in (out of the snapshot already); the last one
// ends the hold: the stage has started.
func (r *Runs) dropStandIn(sr *staged, i int, now time.Time) {
	hold := sr.hold
	delete(r.stagePods, hold.pods[i].key)
	hold.pods = slices.Delete(hold.pods, i, i+1)
	if len(hold.pods) > 0 {
		return
	}
	sr.hold = nil
	msg := fmt.Sprintf("stage %d (%s) started on the capacity held for it", hold.stage.Index, stageSteps(sr.prof, hold.stage))
	r.writeStaged(sr, string(v1alpha1.RunStagesAhead), msg, now, true)
	r.opts.Log.V(1).Info("A Staged run's GPU stage took its held capacity", "workflow", sr.key.String(), "stage", hold.stage.Index)
}

func terminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// declared is the expected duration a pod declares, 0 when none (or not a positive duration).
func declared(ann map[string]string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(ann[v1alpha1.ExpectedDurationAnnotation]))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// handOff gives a placed stand-in's capacity to a pod of its step: a hold of the pod's gang on
// the stand-in's node, which other gangs cannot take and the engine drops once it places the
// pod (or at its expiry).
func (r *Runs) handOff(snap *snapshot.Snapshot, sr *staged, in standIn, pod types.NamespacedName, now time.Time) {
	st := snap.Task(in.key)
	real := snap.Task(pod)
	if st == nil || st.Node == nil || real == nil || real.Gang == nil || real.State != snapshot.TaskPending {
		snap.DeletePod(in.key)
		return
	}
	node, req := st.Node, st.Req
	whole := req.WholeGPUs
	if req.Shared() {
		whole = 1
	}
	snap.DeletePod(in.key) // its capacity first, then the hold on it
	snap.AddHold(real.Gang, snapshot.Hold{Node: node, MilliCPU: req.MilliCPU, Memory: req.Memory, Pods: 1,
		WholeGPUs: whole, MilliGPU: real.PendingGPU(), Expires: now.Add(r.opts.StartGrace)})
	r.opts.Log.V(1).Info("A stage's pod takes its held capacity", "workflow", sr.key.String(), "pod", pod.String(), "node", node.Name)
}

// ---- Deciding --------------------------------------------------------------------------------

// decideStaged runs after each cycle: it notes the stage holds the engine placed, gives up
// those held too long, and holds the next GPU stage of runs whose steps before it are about
// to finish.
func (r *Runs) decideStaged(snap *snapshot.Snapshot, res *engine.Result, now time.Time) {
	var reasons map[snapshot.GangKey]*engine.GangReason
	var capacity *clusterGPUs
	for _, sr := range r.staged {
		if sr.hold != nil {
			r.settlePaired(snap, sr, now)
		}
		if hold := sr.hold; hold != nil {
			before := sr.before(hold.stage.Index, now)
			if before.done && hold.beforeDone.IsZero() {
				hold.beforeDone = now
			}
			if capacity == nil {
				capacity = gpusOf(snap)
			}
			if why := neverFits(snap, sr.queue, hold.gpuMilli, hold.maxPodGPU, capacity, now.Sub(hold.created) >= r.opts.NeverFitsAfter); why != "" {
				sr.givenUp[hold.stage.Index] = true
				r.dropHold(snap, sr)
				msg := fmt.Sprintf("stage %d (%s) is not held: %s; its pods are scheduled as they come", hold.stage.Index, stageSteps(sr.prof, hold.stage), why)
				r.writeStaged(sr, string(v1alpha1.RunNeverFits), msg, now, true)
				r.event(sr.key, corev1.EventTypeWarning, v1alpha1.EventRunStageLapsed, "Hold", msg)
				continue
			}
			lapsed := ""
			switch {
			case hold.paired():
				// The stage's pods are here and wait in the run's place: nothing is held.
			case !hold.beforeDone.IsZero() && now.Sub(hold.beforeDone) >= r.opts.StartGrace:
				sr.givenUp[hold.stage.Index] = true
				lapsed = fmt.Sprintf("its pods did not come within %s of the steps before it finishing", r.opts.StartGrace)
			case hold.beforeDone.IsZero() && !hold.expectedEnd.IsZero() && now.After(hold.expectedEnd.Add(r.opts.StageLead)):
				sr.onDone[hold.stage.Index] = true
				lapsed = fmt.Sprintf("the steps before it run more than %s past their expected end (%s); it is held again when they finish",
					r.opts.StageLead, hold.expectedEnd.UTC().Format(time.RFC3339))
			}
			if lapsed != "" {
				r.dropHold(snap, sr)
				msg := fmt.Sprintf("the hold of stage %d (%s) is given up: %s", hold.stage.Index, stageSteps(sr.prof, hold.stage), lapsed)
				r.writeStaged(sr, string(v1alpha1.RunStageLapsed), msg, now, true)
				r.event(sr.key, corev1.EventTypeNormal, v1alpha1.EventRunStageLapsed, "Hold", msg)
				continue
			}
			if hold.placedAt.IsZero() && r.holdPlaced(snap, hold) {
				hold.placedAt = now
				msg := fmt.Sprintf("stage %d (%s, %s) is held on %s: %s", hold.stage.Index, stageSteps(sr.prof, hold.stage),
					hold.stage.Demand, r.holdNodes(snap, hold), r.why(hold, now))
				r.writeStaged(sr, string(v1alpha1.RunStageHeld), msg, now, true)
				r.event(sr.key, corev1.EventTypeNormal, v1alpha1.EventRunStageHeld, "Hold", "The run's next GPU stage is held: "+msg)
				r.opts.Log.V(1).Info("A Staged run's next GPU stage is held", "workflow", sr.key.String(), "stage", hold.stage.Index)
				continue
			}
			if hold.placedAt.IsZero() {
				if reasons == nil {
					reasons = make(map[snapshot.GangKey]*engine.GangReason)
					for i := range res.Unschedulable {
						if g := &res.Unschedulable[i]; g.Gang.PodGroup {
							reasons[g.Gang] = g
						}
					}
				}
				if g := reasons[hold.gang]; g != nil {
					msg := fmt.Sprintf("stage %d (%s) waits for its hold: %s", hold.stage.Index, stageSteps(sr.prof, hold.stage), g.Message)
					r.writeStaged(sr, string(g.Code), msg, now, false)
				}
			}
			continue
		}
		st, ok := sr.nextStage()
		if !ok {
			continue
		}
		before := sr.before(st.Index, now)
		switch {
		case before.done:
		case before.ending && !sr.onDone[st.Index] && now.After(before.end.Add(-r.opts.StageLead)):
		default:
			continue
		}
		r.holdStage(snap, sr, st, before, now)
	}
}

// beforeStage is where the steps before a stage stand.
type beforeStage struct {
	// done: every one has finished. ending: every one that has not runs, with an expected end;
	// end is the latest of them.
	done, ending bool
	end          time.Time
}

// before says where the steps before stage index stand (KFP's drivers and importers aside).
func (sr *staged) before(index int, now time.Time) beforeStage {
	b := beforeStage{done: true, ending: true}
	for i, s := range sr.prof.Steps {
		if s.System || s.Stage >= index {
			continue
		}
		var ended, running int64
		var starts []time.Time
		var expected time.Duration
		for _, p := range sr.pods {
			if p.step != i {
				continue
			}
			switch {
			case terminal(p.phase):
				ended++
			case p.phase == corev1.PodRunning && !p.started.IsZero():
				running++
				starts = append(starts, p.started)
				if p.expected > 0 {
					expected = p.expected
				}
			default:
				running++ // pending: not started, so not ending
				starts = append(starts, time.Time{})
			}
		}
		ended = max(ended, sr.statusDone[i])
		if ended >= s.Count {
			continue
		}
		b.done = false
		if running == 0 {
			starts = sr.statusRunning[i]
			running = int64(len(starts))
		}
		if ended+running < s.Count || running == 0 {
			b.ending = false // pods still to come
			continue
		}
		if expected == 0 {
			expected = declared(s.Pod.Annotations)
		}
		if expected == 0 {
			expected = sr.learnt(i)
		}
		if expected == 0 {
			b.ending = false
			continue
		}
		for _, t := range starts {
			if t.IsZero() {
				b.ending = false
				break
			}
			b.end = maxTime(b.end, t.Add(expected))
		}
	}
	if b.done {
		b.ending = false
	}
	_ = now
	return b
}

// learnt is set by Runs for the run's steps (durations of earlier runs); nil-safe.
func (sr *staged) learnt(step int) time.Duration {
	if sr.durations == nil {
		return 0
	}
	return sr.durations.expected(sr.family + "\x00" + strings.TrimPrefix(sr.prof.Steps[step].Path, sr.entry()))
}

func (sr *staged) entry() string {
	p := sr.prof.Steps[0].Path
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// nextStage is the first GPU stage none of whose steps has started, and not given up.
func (sr *staged) nextStage() (pipelinerun.Stage, bool) {
	for _, st := range sr.prof.GPUStages() {
		if sr.givenUp[st.Index] || sr.started(st) {
			continue
		}
		return st, true
	}
	return pipelinerun.Stage{}, false
}

func (sr *staged) started(st pipelinerun.Stage) bool {
	for _, i := range st.Steps {
		if sr.statusDone[i] > 0 || len(sr.statusRunning[i]) > 0 {
			return true
		}
	}
	for _, p := range sr.pods {
		if slices.Contains(st.Steps, p.step) {
			return true
		}
	}
	return false
}

// holdStage puts the stage's GPU pods into the snapshot as a pending gang, as old as the run.
func (r *Runs) holdStage(snap *snapshot.Snapshot, sr *staged, st pipelinerun.Stage, before beforeStage, now time.Time) {
	var set []pipelinerun.PodCount
	for _, i := range st.Steps {
		if s := sr.prof.Steps[i]; !s.System && s.Demand.HasGPU() && s.Pod != nil {
			set = append(set, pipelinerun.PodCount{Step: i, Count: s.Count})
		}
	}
	gang := v1alpha1.RunStageGangName(sr.key.Name, st.Index)
	wf := r.get(sr.key)
	if wf == nil {
		return
	}
	pods := r.standInPods(wf, sr.prof, set, sr.queue, gang, func(i int) string { return v1alpha1.RunStagePodName(sr.key.Name, st.Index, i) })
	hold := &stageHold{stage: st, gang: snapshot.GangKey{Namespace: sr.key.Namespace, Name: gang, PodGroup: true}, created: now,
		gpuMilli: st.Demand.GPUMilli}
	if !before.done {
		hold.expectedEnd = before.end
	} else {
		hold.beforeDone = now
	}
	k := 0
	for _, pc := range set {
		for range pc.Count {
			p := pods[k]
			k++
			hold.maxPodGPU = max(hold.maxPodGPU, podGPUs(p))
			if err := snap.UpsertStandIn(p); err != nil {
				r.opts.Log.Error(err, "Stage pod not taken into the snapshot", "pod", p.Name)
				continue
			}
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			hold.pods = append(hold.pods, standIn{key: key, step: pc.Step})
			r.stagePods[key] = sr
		}
	}
	if len(hold.pods) == 0 {
		return
	}
	sr.hold = hold
	r.opts.Log.V(1).Info("Holding a Staged run's next GPU stage", "workflow", sr.key.String(), "stage", st.Index, "demand", st.Demand.String(),
		"why", r.why(hold, now))
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceName(v1alpha1.ResourceGPU)]; ok {
			n = max(n, q.Value())
		}
		if q, ok := c.Resources.Limits[corev1.ResourceName(v1alpha1.ResourceGPU)]; ok {
			n = max(n, q.Value())
		}
	}
	return n
}

func (r *Runs) why(hold *stageHold, now time.Time) string {
	if hold.expectedEnd.IsZero() {
		return "the steps before it have finished"
	}
	return fmt.Sprintf("the steps before it are expected to end at %s (in %s)", hold.expectedEnd.UTC().Format(time.RFC3339),
		max(hold.expectedEnd.Sub(now), 0).Round(time.Second))
}

func (r *Runs) holdPlaced(snap *snapshot.Snapshot, hold *stageHold) bool {
	for _, in := range hold.pods {
		if t := snap.Task(in.key); t == nil || t.NodeName == "" {
			return false
		}
	}
	return len(hold.pods) > 0
}

func (r *Runs) holdNodes(snap *snapshot.Snapshot, hold *stageHold) string {
	var nodes []string
	for _, in := range hold.pods {
		if t := snap.Task(in.key); t != nil && t.NodeName != "" && !slices.Contains(nodes, t.NodeName) {
			nodes = append(nodes, t.NodeName)
		}
	}
	slices.Sort(nodes)
	return strings.Join(nodes, ",")
}

func (r *Runs) dropHold(snap *snapshot.Snapshot, sr *staged) {
	if sr.hold == nil {
		return
	}
	for _, in := range sr.hold.pods {
		snap.DeletePod(in.key)
		delete(r.stagePods, in.key)
	}
	sr.hold = nil
}

func (r *Runs) forgetStaged(snap *snapshot.Snapshot, sr *staged) {
	r.dropHold(snap, sr)
	delete(r.staged, sr.key)
}

// stageSteps names a stage's GPU steps for people ("root/train/executor").
func stageSteps(p *pipelinerun.Profile, st pipelinerun.Stage) string {
	var names []string
	for _, i := range st.Steps {
		if s := p.Steps[i]; !s.System && s.Demand.HasGPU() {
			name := s.Path
			if j := strings.IndexByte(name, '/'); j >= 0 {
				name = name[j+1:]
			}
			if s.Count > 1 {
				name += " x" + strconv.FormatInt(s.Count, 10)
			}
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// writeStaged records a Staged run's state on its Workflow; a message of the same reason is
// written again at most every 30s unless force.
func (r *Runs) writeStaged(sr *staged, reason, msg string, now time.Time, force bool) {
	if reason == sr.reason && (msg == sr.message || (!force && now.Sub(sr.writtenAt) < 30*time.Second)) {
		return
	}
	sr.reason, sr.message, sr.writtenAt = reason, msg, now
	r.enqueue(sr.key, write{state: v1alpha1.RunStaged, reason: reason, message: msg, at: now})
}

// ---- Durations of earlier runs ---------------------------------------------------------------

// durations keeps the last durations of steps, by pipeline and step path, in memory: a
// restarted scheduler learns them again.
type durations struct {
	by map[string][]time.Duration
}

const (
	durationsKept = 5
	durationsMax  = 4096
)

func (d *durations) record(key string, v time.Duration) {
	if v <= 0 {
		return
	}
	if d.by == nil {
		d.by = map[string][]time.Duration{}
	}
	if _, ok := d.by[key]; !ok && len(d.by) >= durationsMax {
		for k := range d.by { // any one: the map stays bounded
			delete(d.by, k)
			break
		}
	}
	l := append(d.by[key], v)
	if len(l) > durationsKept {
		l = l[len(l)-durationsKept:]
	}
	d.by[key] = l
}

// expected is the median of the kept durations, 0 when none.
func (d *durations) expected(key string) time.Duration {
	l := slices.Clone(d.by[key])
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[len(l)/2]
}
