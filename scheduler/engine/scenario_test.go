package engine_test

// Scenario files: scheduler/testdata/scenarios/*.yaml, one t.Run each.
//
// A scenario describes nodes, queues and jobs (sets of pods; a job of several replicas is a gang
// unless it says otherwise), then steps. Each step advances the clock, applies events (jobs
// finish or arrive, nodes change), runs one cycle and checks the step's expectations. Between
// steps the harness plays the runtime: it binds what the engine bound, evicts what it evicted
// (deleting the pod after evictionDelay cycles, and recreating it pending when its job does) and
// feeds the objects back to the snapshot. Every cycle is also checked for the engine's
// invariants (capacity, GPU shares, all-or-nothing gangs, non-preemptible pods never evicted,
// limits, snapshot bookkeeping).
//
// Expectations are written by hand in the YAML. In addition, the full transcript of every cycle
// (decisions, reasons, queue shares) is compared with <name>.golden; run with -update to rewrite
// the golden files after a deliberate change, and review the diff.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
	"github.com/fairway-sched/fairway/scheduler/usage"
)

var update = flag.Bool("update", false, "rewrite the scenarios' golden transcripts")

type scenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Covers      []string `json:"covers"`
	Options     struct {
		Placement            string   `json:"placement"`
		StarvationThreshold  duration `json:"starvationThreshold"`
		StaleGangGracePeriod duration `json:"staleGangGracePeriod"`
		EvictionGracePeriod  duration `json:"evictionGracePeriod"`
		HoldTTL              duration `json:"holdTTL"`
		// UsageHalfLife turns on fair share over time: the harness keeps the queues' usage
		// history (package usage) around each cycle, as the runtime does.
		UsageHalfLife duration `json:"usageHalfLife"`
	} `json:"options"`
	// EvictionDelay is how many extra cycles an evicted pod keeps terminating.
	EvictionDelay int         `json:"evictionDelay"`
	Nodes         []nodeSpec  `json:"nodes"`
	Queues        []queueSpec `json:"queues"`
	Jobs          []jobSpec   `json:"jobs"`
	// Budgets are PodDisruptionBudgets; the harness plays the API server's eviction (refusing
	// one the budget does not allow) and the disruption controller (allowed disruptions).
	Budgets []budgetSpec `json:"budgets"`
	Steps   []stepSpec   `json:"steps"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	d.Duration, err = time.ParseDuration(s)
	return err
}

type nodeSpec struct {
	Name string `json:"name"`
	// Count > 1 makes nodes name-1 .. name-count.
	Count         int               `json:"count"`
	GPUs          int               `json:"gpus"`
	GPUType       string            `json:"gpuType"`
	GPUMemoryMiB  int64             `json:"gpuMemoryMiB"`
	Inventory     bool              `json:"inventory"`
	CPU           string            `json:"cpu"`
	Memory        string            `json:"memory"`
	Pods          string            `json:"pods"`
	Extended      map[string]string `json:"extended"`
	Labels        map[string]string `json:"labels"`
	Taints        []string          `json:"taints"`
	Unschedulable bool              `json:"unschedulable"`
	// Replicas > 1 time-slices the node's GPUs: its device plugin advertises gpus × replicas
	// nvidia.com/gpu, and its inventory (published whatever Inventory says) has the replicas.
	Replicas int `json:"replicas"`
}

// budgetSpec is a PodDisruptionBudget with maxUnavailable over the pods of some jobs (a job's
// pods carry the label fairway-test/job: <job name>).
type budgetSpec struct {
	Name           string   `json:"name"`
	Namespace      string   `json:"namespace"`
	MaxUnavailable int32    `json:"maxUnavailable"`
	Jobs           []string `json:"jobs"`
}

type termsSpec struct {
	Quota  *resource.Quantity `json:"quota"`
	Weight *int32             `json:"weight"`
	Limit  *resource.Quantity `json:"limit"`
}

type queueSpec struct {
	Name     string     `json:"name"`
	Parent   string     `json:"parent"`
	Priority int32      `json:"priority"`
	GPU      *termsSpec `json:"gpu"`
	CPU      *termsSpec `json:"cpu"`
	Memory   *termsSpec `json:"memory"`
	GPUTypes []struct {
		Name string `json:"name"`
		termsSpec
	} `json:"gpuTypes"`
	ReclaimMinRuntime duration `json:"reclaimMinRuntime"`
	PreemptMinRuntime duration `json:"preemptMinRuntime"`
	// MaxEvictionGracePeriod is spec.maxEvictionGracePeriod ("" leaves it out).
	MaxEvictionGracePeriod *duration `json:"maxEvictionGracePeriod"`
	// IdleLending is the Queue's spec.idleLending as written.
	IdleLending *v1alpha1.IdleLending `json:"idleLending"`
	// Policy is the Queue's spec.policy as written.
	Policy *v1alpha1.QueuePolicy `json:"policy"`
	// Namespaces the queue serves; when absent, the namespace of its own name.
	Namespaces []string `json:"namespaces"`
}

// idleSpec makes running interactive pods idle (the gpu-agent's GPUIdle condition).
type idleSpec struct {
	// Pod is a job name or ns/pod (events only).
	Pod string `json:"pod"`
	// Ago is how long they have been idle (default 0: they go idle now).
	Ago duration `json:"ago"`
	// MemoryMiB is the GPU memory kept in use (fairway.dev/idle-gpu-memory-used); left out, the
	// annotation is not written.
	MemoryMiB *int64 `json:"memoryMiB"`
	// Swap is the gpu-agent's fairway.dev/gpu-swap; left out, not written.
	Swap *v1alpha1.GPUSwap `json:"swap"`
}

type jobSpec struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Replicas  int    `json:"replicas"`
	// Gang defaults to true for more than one replica.
	Gang              *bool               `json:"gang"`
	MinMember         int                 `json:"minMember"`
	GPU               int                 `json:"gpu"`
	Fraction          string              `json:"fraction"`
	GPUMemory         int64               `json:"gpuMemory"`
	CPU               string              `json:"cpu"`
	Memory            string              `json:"memory"`
	Extended          map[string]string   `json:"extended"`
	Priority          *int32              `json:"priority"`
	Preemptibility    string              `json:"preemptibility"`
	NodeSelector      map[string]string   `json:"nodeSelector"`
	Tolerations       []string            `json:"tolerations"`
	AffinityIn        map[string][]string `json:"affinityIn"`
	AntiAffinity      bool                `json:"antiAffinity"`
	HostPort          int32               `json:"hostPort"`
	TopologyRequired  string              `json:"topologyRequired"`
	TopologyPreferred string              `json:"topologyPreferred"`
	// SubGroups assigns replicas to sub-groups in order: [head, worker, worker].
	SubGroups []string `json:"subGroups"`
	// PodGroup creates a PodGroup object for the job with these sub-group minimums and levels.
	PodGroup *struct {
		MinMember int32  `json:"minMember"`
		Queue     string `json:"queue"`
		Required  string `json:"topologyRequired"`
		SubGroups []struct {
			Name      string `json:"name"`
			MinMember int32  `json:"minMember"`
			Required  string `json:"topologyRequired"`
		} `json:"subGroups"`
	} `json:"podGroup"`
	Annotations map[string]string `json:"annotations"`
	// Joins names the job whose gang (PodGroup) these pods join: new members of a gang that
	// already exists, as a scaled-up RayCluster or elastic job makes them.
	Joins string `json:"joins"`
	// Running places replicas on nodes before the first step: one node name for all, or one per
	// replica ("" leaves a replica pending).
	Running  []string `json:"running"`
	GPUIndex [][]int  `json:"gpuIndex"`
	// StartedAgo is how long running replicas have run (default 1h).
	StartedAgo *duration `json:"startedAgo"`
	// CreatedAgo ages the job's pods (default 0).
	CreatedAgo duration `json:"createdAgo"`
	// Recreate (default true) makes evicted pods come back pending, as a controller would.
	Recreate *bool `json:"recreate"`
	// Gated pods carry a scheduling gate.
	Gated bool `json:"gated"`
	// Borrow sets fairway.dev/borrow-idle-gpu: "true".
	Borrow bool `json:"borrow"`
	// Idle makes the running replicas idle before the first step.
	Idle *idleSpec `json:"idle"`
	// Grace is the pods' terminationGracePeriodSeconds (left out: unset).
	Grace *duration `json:"grace"`
}

type stepSpec struct {
	Advance duration    `json:"advance"`
	Events  []eventSpec `json:"events"`
	Expect  expectSpec  `json:"expect"`
}

type eventSpec struct {
	// Finish and Delete take a job name (every pod) or ns/pod.
	Finish     string     `json:"finish"`
	Delete     string     `json:"delete"`
	Add        *jobSpec   `json:"add"`
	AddNode    *nodeSpec  `json:"addNode"`
	DeleteNode string     `json:"deleteNode"`
	Queue      *queueSpec `json:"queue"`
	// PodGroup changes a job's PodGroup: its owner was scaled (Job names it).
	PodGroup *podGroupEvent `json:"podGroup"`
	// Wake clears the GPUIdle condition of a job's pods (or ns/pod): the owner does GPU work.
	Wake string `json:"wake"`
	// Idle sets it.
	Idle *idleSpec `json:"idle"`
}

type podGroupEvent struct {
	Job       string `json:"job"`
	MinMember int32  `json:"minMember"`
	SubGroups []struct {
		Name      string `json:"name"`
		MinMember int32  `json:"minMember"`
		Required  string `json:"topologyRequired"`
	} `json:"subGroups"`
}

type expectSpec struct {
	// Bound is the exact set of bindings of the cycle: pod -> node, or node[gpu,...], or
	// node[gpu]@milli for a fraction. Nil skips the check; {} expects none.
	Bound map[string]string `json:"bound"`
	// BoundCount counts bindings per namespace.
	BoundCount map[string]int `json:"boundCount"`
	// Evicted is the exact set of evicted pods (nil skips, [] expects none).
	Evicted []string `json:"evicted"`
	// EvictedCount counts evictions per namespace.
	EvictedCount map[string]int `json:"evictedCount"`
	// EvictionReasons maps an evicted pod to its reason.
	EvictionReasons map[string]string `json:"evictionReasons"`
	// Grace maps an evicted pod to its grace period.
	Grace map[string]duration `json:"grace"`
	// Refused is the exact set of evictions the API server refused for a budget (nil skips).
	Refused []string `json:"refused"`
	// Nominated is the exact set of nominated gangs (nil skips).
	Nominated []string `json:"nominated"`
	// HeldNodes is the exact set of nodes held for a gang after the cycle (Result.HeldNodes), the
	// nodes the runtime puts the hold taint on: node -> gang (nil skips, {} expects none).
	HeldNodes map[string]string `json:"heldNodes"`
	// Pending maps a gang (ns/name for pod groups, ns/pod:name for lone pods) to its reason
	// code; Reasons to a substring of its message.
	Pending map[string]string `json:"pending"`
	Reasons map[string]string `json:"reasons"`
	// Running counts pods running after the cycle, per namespace.
	Running map[string]int `json:"running"`
	// RunningOn counts pods running after the cycle per node.
	RunningOn map[string]int `json:"runningOn"`
	// FairShareGPU is each queue's GPU fair share (decimal GPUs).
	FairShareGPU map[string]string `json:"fairShareGPU"`
	// RequestedGPU is each queue's GPU demand (QueueStatus.Requested, decimal GPUs) and
	// PendingPods its count of pods waiting for placement.
	RequestedGPU map[string]string `json:"requestedGPU"`
	PendingPods  map[string]int32  `json:"pendingPods"`
}

// scenarioFeatures are what a scenario's covers may name: the engine's behaviours and the product
// brief's stories, each with at least one scenario.
var scenarioFeatures = map[string]string{
	"fair-share":       "the queue tree and fair share per resource",
	"allocate":         "queues below their guarantee first, then by lowest share",
	"priority-classes": "preemptible training and pipelines; notebooks and inference not",
	"reclaim":          "a queue below its fair share takes back what others borrow",
	"guarantee":        "a guarantee arrives whatever shape the borrowers' work has",
	"preempt":          "within a queue, higher priority evicts lower",
	"protection":       "minimum runtime and budgets before an eviction",
	"fractional-gpus":  "shares of one GPU by fraction or memory",
	"fraction-packing": "shares fill shared GPUs before whole ones",
	"topology":         "gangs within a topology domain",
	"node-choice":      "bin-packing by default, spreading as an option",
	"consolidation":    "moving preemptible pods to make room for a gang",
	"stale-gangs":      "gangs below their minimum are evicted after a grace",
	"reasons":          "every waiting gang says why",
	"gangs":            "all-or-nothing placement of a gang",
	"lending":          "idle interactive GPUs lent and returned",
	"queue-policy":     "per-kind rules of a queue (borrowing, GPU types)",
	"volumes":          "pods whose volumes cannot be used yet wait with the claim named",
	"time-slicing":     "a time-sliced node counts as its physical GPUs, not its replicas",

	"story-reclaim-guarantee":           "product story: a team takes back its guarantee",
	"story-notebooks-share-a-gpu":       "product story: notebooks share one GPU",
	"story-notebooks-then-gang":         "product story: notebooks by day, a 32-GPU gang by night",
	"story-inference-preempts-training": "product story: an inference burst preempts training",
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("%d scenario files, want at least 40", len(files))
	}
	covered := map[string]bool{}
	ran := 0
	defer func() {
		if ran < len(files) {
			return // a -run filter chose some scenarios only
		}
		// Every feature has a scenario.
		for want := range scenarioFeatures {
			if !covered[want] {
				t.Errorf("no scenario covers %q", want)
			}
		}
	}()
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			ran++
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var sc scenario
			if err := yaml.UnmarshalStrict(raw, &sc); err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			if sc.Name != name {
				t.Errorf("scenario name %q does not match its file name", sc.Name)
			}
			for _, c := range sc.Covers {
				if _, ok := scenarioFeatures[c]; !ok {
					t.Errorf("covers %q: not a feature of scenarioFeatures (name the behaviour, not an issue)", c)
				}
				covered[c] = true
			}
			got := runScenario(t, &sc)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden transcript (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("transcript differs from %s (-want +got); rerun with -update if intended:\n%s", golden, diff)
			}
		})
	}
}

func runScenario(t *testing.T, sc *scenario) string {
	t.Helper()
	opts := engine.Options{
		Placement:            engine.Placement(sc.Options.Placement),
		StarvationThreshold:  sc.Options.StarvationThreshold.Duration,
		StaleGangGracePeriod: sc.Options.StaleGangGracePeriod.Duration,
		EvictionGracePeriod:  sc.Options.EvictionGracePeriod.Duration,
		HoldTTL:              sc.Options.HoldTTL.Duration,
	}
	start := testutil.Epoch.Add(24 * time.Hour)
	s := newSim(opts, start)
	s.evictionDelay = sc.EvictionDelay
	s.budgets = sc.Budgets
	s.hist = usage.New(sc.Options.UsageHalfLife.Duration)
	for _, ns := range sc.Nodes {
		for _, n := range buildNodes(ns) {
			if err := s.addNode(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, qs := range sc.Queues {
		if err := s.addQueue(buildQueue(qs)); err != nil {
			t.Fatal(err)
		}
	}
	jobs := map[string]*jobSpec{}
	for i := range sc.Jobs {
		addJob(t, s, &sc.Jobs[i], jobs)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# %s\n", sc.Name)
	for i, st := range sc.Steps {
		step := i + 1
		s.now = s.now.Add(st.Advance.Duration)
		for _, ev := range st.Events {
			applyEvent(t, s, ev, jobs)
		}
		res, err := s.cycle()
		if err != nil {
			t.Errorf("step %d: invariant broken:\n%v", step, err)
		}
		fmt.Fprintf(&out, "\n## step %d at +%s\n", step, s.now.Sub(start))
		transcript(&out, s, res)
		checkExpect(t, step, s, res, st.Expect)
	}
	return out.String()
}

func applyEvent(t *testing.T, s *sim, ev eventSpec, jobs map[string]*jobSpec) {
	t.Helper()
	switch {
	case ev.Finish != "":
		for _, k := range podsOf(s, ev.Finish, jobs) {
			if err := s.finishPod(k); err != nil {
				t.Fatal(err)
			}
		}
	case ev.Delete != "":
		for _, k := range podsOf(s, ev.Delete, jobs) {
			s.deletePod(k)
		}
	case ev.Add != nil:
		addJob(t, s, ev.Add, jobs)
	case ev.AddNode != nil:
		for _, n := range buildNodes(*ev.AddNode) {
			if err := s.addNode(n); err != nil {
				t.Fatal(err)
			}
		}
	case ev.DeleteNode != "":
		delete(s.nodes, ev.DeleteNode)
		s.snap.DeleteNode(ev.DeleteNode)
	case ev.Wake != "":
		for _, k := range podsOf(s, ev.Wake, jobs) {
			mustNoErr(t, s.setIdle(k, false, -1))
		}
	case ev.Idle != nil:
		mem := int64(-1)
		if ev.Idle.MemoryMiB != nil {
			mem = *ev.Idle.MemoryMiB
		}
		now := s.now
		s.now = now.Add(-ev.Idle.Ago.Duration)
		for _, k := range podsOf(s, ev.Idle.Pod, jobs) {
			mustNoErr(t, s.setIdle(k, true, mem))
			mustNoErr(t, s.setSwap(k, ev.Idle.Swap))
		}
		s.now = now
	case ev.PodGroup != nil:
		j := jobs[ev.PodGroup.Job]
		if j == nil {
			t.Fatalf("podGroup event: no job %q", ev.PodGroup.Job)
		}
		pg := testutil.MakePodGroup(j.Namespace, j.Name).MinMember(max(ev.PodGroup.MinMember, 1))
		if j.PodGroup != nil {
			pg.Queue(j.PodGroup.Queue)
		}
		for _, sg := range ev.PodGroup.SubGroups {
			pg.SubGroup(sg.Name, sg.MinMember, sg.Required)
		}
		if err := s.snap.UpsertPodGroup(pg.Obj()); err != nil {
			t.Fatal(err)
		}
		s.minMember[snapshot.GangKey{Namespace: j.Namespace, Name: j.Name, PodGroup: true}] = max(ev.PodGroup.MinMember, 1)
	case ev.Queue != nil:
		if err := s.addQueue(buildQueue(*ev.Queue)); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("empty event")
	}
}

func bindingText(b engine.Binding) string {
	s := b.Node
	switch {
	case b.Shared != nil:
		s += fmt.Sprintf("[%d]@%d", b.Shared.Index, b.Shared.MilliGPU)
		if b.Shared.Loan {
			s += " loan"
		}
	case len(b.GPUs) > 0:
		var idx []string
		for _, g := range b.GPUs {
			idx = append(idx, strconv.Itoa(g.Index))
		}
		s += "[" + strings.Join(idx, ",") + "]"
	}
	return s
}

func transcript(out *strings.Builder, s *sim, res engine.Result) {
	for _, b := range res.Bindings {
		fmt.Fprintf(out, "bind %s -> %s", b.Pod, bindingText(b))
		if b.Shared != nil && b.Shared.UUID != "" || len(b.GPUs) > 0 && b.GPUs[0].UUID != "" {
			if b.Shared != nil {
				fmt.Fprintf(out, " uuid=%s mem=%dMiB", b.Shared.UUID, b.Shared.MemoryMiB)
			} else {
				fmt.Fprintf(out, " uuid=%s", b.GPUs[0].UUID)
			}
		}
		out.WriteString("\n")
	}
	for _, n := range res.Nominations {
		fmt.Fprintf(out, "nominate %s: %s on %s\n", n.Gang, pods(n.Pods), strings.Join(n.Nodes, ","))
	}
	for _, e := range res.Evictions {
		ben := "-"
		if e.Beneficiary != nil {
			ben = e.Beneficiary.String()
		}
		fmt.Fprintf(out, "evict %s on %s: %s for %s, grace %s: %s\n", e.Pod, e.Node, e.Reason, ben, e.GracePeriod, e.Message)
	}
	for _, r := range res.SwapRequests {
		fmt.Fprintf(out, "swap-request %s (idle since %s)\n", r.Pod, r.IdleSince.Format(time.RFC3339))
	}
	for _, r := range s.refused {
		fmt.Fprintf(out, "refused eviction %s (429: PodDisruptionBudget %s allows no more disruptions)\n", r.pod, r.budget)
	}
	for _, r := range res.Unschedulable {
		fmt.Fprintf(out, "pending %s (%s) %s: %s\n", r.Gang, pods(r.PendingPods), r.Code, r.Message)
	}
	for _, q := range res.Queues {
		fmt.Fprintf(out, "queue %s: fair %s allocated %s", q.Name, amounts(q.FairShare), amounts(q.Allocated))
		if len(q.Loaned) > 0 {
			fmt.Fprintf(out, " loaned %s", amounts(q.Loaned))
		}
		if q.NotReady != "" {
			fmt.Fprintf(out, " not ready: %s", q.NotReady)
		}
		out.WriteString("\n")
	}
	running := map[string]int{}
	for _, p := range s.pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running[p.Spec.NodeName]++
		}
	}
	var nodes []string
	for n := range s.nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s=%d", n, running[n]))
	}
	fmt.Fprintf(out, "running pods per node: %s\n", strings.Join(parts, " "))
}

// pods counts pods in words, as the engine's own messages do: "1 pod", "4 pods".
func pods[N int | int32](n N) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func amounts(a engine.Amounts) string {
	var keys []string
	for k := range a {
		if k == "gpu" || strings.HasPrefix(k, "gpu/") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return "gpu=0"
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+snapshot.FormatAmount(snapshot.DimGPU, a[k]))
	}
	return strings.Join(parts, ",")
}

func checkExpect(t *testing.T, step int, s *sim, res engine.Result, ex expectSpec) {
	t.Helper()
	fail := func(format string, args ...any) { t.Errorf("step %d: "+format, append([]any{step}, args...)...) }
	if ex.Bound != nil {
		got := map[string]string{}
		for _, b := range res.Bindings {
			got[b.Pod.String()] = bindingText(b)
		}
		want := map[string]string{}
		for k, v := range ex.Bound {
			want[k] = v
			if !strings.Contains(v, "[") {
				if g, ok := got[k]; ok && strings.HasPrefix(g, v+"[") {
					want[k] = g // node given without GPUs: only the node is checked
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			fail("bindings (-want +got):\n%s", diff)
		}
	}
	if ex.BoundCount != nil {
		got := map[string]int{}
		for _, b := range res.Bindings {
			got[b.Pod.Namespace]++
		}
		if diff := cmp.Diff(ex.BoundCount, got); diff != "" {
			fail("bindings per namespace (-want +got):\n%s", diff)
		}
	}
	if ex.Evicted != nil {
		var got []string
		for _, e := range res.Evictions {
			got = append(got, e.Pod.String())
		}
		want := slices.Clone(ex.Evicted)
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
			fail("evictions (-want +got):\n%s", diff)
		}
	}
	if ex.EvictedCount != nil {
		got := map[string]int{}
		for _, e := range res.Evictions {
			got[e.Pod.Namespace]++
		}
		if diff := cmp.Diff(ex.EvictedCount, got, cmpEmpty); diff != "" {
			fail("evictions per namespace (-want +got):\n%s", diff)
		}
	}
	for pod, grace := range ex.Grace {
		found := false
		for _, e := range res.Evictions {
			if e.Pod.String() == pod {
				found = true
				if e.GracePeriod != grace.Duration {
					fail("eviction of %s: grace %s, want %s", pod, e.GracePeriod, grace.Duration)
				}
			}
		}
		if !found {
			fail("pod %s not evicted", pod)
		}
	}
	if ex.Refused != nil {
		var got []string
		for _, r := range s.refused {
			got = append(got, r.pod.String())
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(ex.Refused))
		if !slices.Equal(got, want) {
			fail("refused evictions %v, want %v", got, want)
		}
	}
	for pod, reason := range ex.EvictionReasons {
		found := false
		for _, e := range res.Evictions {
			if e.Pod.String() == pod {
				found = true
				if string(e.Reason) != reason {
					fail("eviction of %s: reason %s, want %s", pod, e.Reason, reason)
				}
			}
		}
		if !found {
			fail("pod %s not evicted", pod)
		}
	}
	if ex.Nominated != nil {
		var got []string
		for _, n := range res.Nominations {
			got = append(got, n.Gang.String())
		}
		want := slices.Clone(ex.Nominated)
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
			fail("nominations (-want +got):\n%s", diff)
		}
	}
	if ex.HeldNodes != nil {
		got := map[string]string{}
		for _, r := range res.HeldNodes {
			got[r.Node] = r.Gang.String()
		}
		if diff := cmp.Diff(ex.HeldNodes, got, cmpEmpty); diff != "" {
			fail("held nodes (-want +got):\n%s", diff)
		}
	}
	reasons := map[string]engine.GangReason{}
	for _, r := range res.Unschedulable {
		reasons[r.Gang.String()] = r
	}
	for g, code := range ex.Pending {
		r, ok := reasons[g]
		switch {
		case !ok:
			fail("gang %s not pending (pending: %v)", g, keys(reasons))
		case string(r.Code) != code:
			fail("gang %s reason %s, want %s (%s)", g, r.Code, code, r.Message)
		}
	}
	for g, sub := range ex.Reasons {
		r, ok := reasons[g]
		if !ok || !strings.Contains(r.Message, sub) {
			fail("gang %s reason %q does not contain %q", g, r.Message, sub)
		}
	}
	if ex.Running != nil || ex.RunningOn != nil {
		byNS, byNode := map[string]int{}, map[string]int{}
		for _, p := range s.pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				byNS[p.Namespace]++
				byNode[p.Spec.NodeName]++
			}
		}
		if ex.Running != nil {
			if diff := cmp.Diff(ex.Running, byNS, cmpEmpty); diff != "" {
				fail("running pods per namespace (-want +got):\n%s", diff)
			}
		}
		if ex.RunningOn != nil {
			got := map[string]int{}
			for n := range ex.RunningOn {
				got[n] = byNode[n]
			}
			if diff := cmp.Diff(ex.RunningOn, got); diff != "" {
				fail("running pods per node (-want +got):\n%s", diff)
			}
		}
	}
	for q, want := range ex.FairShareGPU {
		got := "missing"
		for _, st := range res.Queues {
			if st.Name == q {
				got = snapshot.FormatAmount(snapshot.DimGPU, st.FairShare["gpu"])
			}
		}
		if got != want {
			fail("queue %s GPU fair share %s, want %s", q, got, want)
		}
	}
	for q, want := range ex.RequestedGPU {
		got := "missing"
		for _, st := range res.Queues {
			if st.Name == q {
				got = snapshot.FormatAmount(snapshot.DimGPU, st.Requested["gpu"])
			}
		}
		if got != want {
			fail("queue %s GPU requested %s, want %s", q, got, want)
		}
	}
	for q, want := range ex.PendingPods {
		got := int32(-1)
		for _, st := range res.Queues {
			if st.Name == q {
				got = st.PendingPods
			}
		}
		if got != want {
			fail("queue %s pending pods %d, want %d", q, got, want)
		}
	}
}

var cmpEmpty = cmpopts.EquateEmpty()

func keys(m map[string]engine.GangReason) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
