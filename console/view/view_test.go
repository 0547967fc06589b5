package view_test

import (
	gocmp "cmp"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli/clitest"
	"github.com/fairway-sched/fairway/console/internal/consoletest"
	"github.com/fairway-sched/fairway/console/view"
)

func teamB() view.Scope { return view.Scope{Namespaces: map[string]bool{"team-b": true}} }

// TestWhyIsTheCLIs checks that the Why page explains with `fairway why`'s own words: its text
// for the CLI's scenario is the CLI's golden, byte for byte.
func TestWhyIsTheCLIs(t *testing.T) {
	m := view.Build(consoletest.CLIScenario())
	for query, golden := range map[string]string{
		"team-a/train-big":            "why-train-big.txt",
		"podgroup/team-a/train-llama": "why-train-llama.txt",
		"pod/team-b/nb-alice":         "why-nb-alice.txt",
		"pod/team-b/sweep":            "why-sweep.txt",
		"pod/team-b/debug":            "why-debug.txt",
	} {
		t.Run(golden, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "..", "cli", "testdata", golden))
			if err != nil {
				t.Fatal(err)
			}
			w := m.Why(view.Everything(), query)
			if len(w.Explanations) != 1 {
				t.Fatalf("Why(%q) explained %d objects, want 1 (candidates %v)", query, len(w.Explanations), w.Candidates)
			}
			if diff := cmp.Diff(string(want), w.Explanations[0].Text); diff != "" {
				t.Errorf("Why(%q) differs from `fairway why` (-cli +console):\n%s", query, diff)
			}
		})
	}
}

// TestRestrictedUserSeesOnlyTheirNamespace cuts every page to team-b and looks for team-a in
// what is left: pods, workloads, GPU holders, evictions, the Why page's "shared with".
func TestRestrictedUserSeesOnlyTheirNamespace(t *testing.T) {
	m := view.Build(consoletest.CLIScenario())
	sc := teamB()
	for _, w := range m.WorkloadsFor(sc, "") {
		if w.Namespace != "team-b" {
			t.Errorf("workload %s/%s shown to a team-b user", w.Namespace, w.Name)
		}
	}
	o := m.Overview(sc)
	if o.GPUTypes != nil {
		t.Errorf("GPU totals shown to a user who may not list nodes: %+v", o.GPUTypes)
	}
	for _, w := range o.Waiting {
		if w.Namespace != "team-b" {
			t.Errorf("waiting workload %s/%s shown to a team-b user", w.Namespace, w.Name)
		}
	}
	var queues []string
	for _, q := range m.QueuesFor(sc).Items {
		queues = append(queues, q.Name)
	}
	if slices.Contains(queues, "team-a") || !slices.Contains(queues, "team-b") {
		t.Errorf("a team-b user sees queues %v; want team-b and its ancestors, not team-a", queues)
	}
	if n := m.NodesFor(sc); n != nil {
		t.Errorf("nodes shown to a user who may not list nodes")
	}
	sc.Nodes = true
	seen := 0
	for _, n := range m.NodesFor(sc) {
		for _, c := range n.GPUs {
			for _, h := range c.Holders {
				if !h.Hidden && h.Namespace != "team-b" {
					t.Errorf("node %s GPU %d shows %s/%s to a team-b user", n.Name, c.Index, h.Namespace, h.Name)
				}
				if h.Hidden && (h.Name != "" || h.Namespace != "" || h.Queue != "") {
					t.Errorf("a hidden holder keeps its name: %+v", h)
				}
				if h.Hidden {
					seen++
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no holder of team-a's was hidden: the scenario has some")
	}
	if w := m.Why(sc, "team-a/train-big"); len(w.Explanations) != 0 || w.Workload != nil {
		t.Errorf("a team-b user got team-a's train-big explained: %+v", w)
	}
	w := m.Why(sc, "pod/team-b/nb-alice")
	if len(w.Explanations) != 1 {
		t.Fatalf("nb-alice not explained to its own team: %+v", w)
	}
	if text := w.Explanations[0].Text; strings.Contains(text, "team-a") {
		t.Errorf("the Why page shows team-a's pods to a team-b user:\n%s", text)
	}
	if ev := m.EvictionsFor(view.Scope{Namespaces: map[string]bool{"team-a": true}}, 0); len(ev) != 0 {
		t.Errorf("team-b's eviction shown to a team-a user: %+v", ev)
	}
	ev := m.EvictionsFor(sc, 0)
	if len(ev) != 1 || ev[0].Reason != "Reclaim" {
		t.Fatalf("team-b's Reclaim eviction not shown to team-b: %+v", ev)
	}
	// Its note names team-a's gang: the event is team-b's, the name is not.
	if strings.Contains(ev[0].Note, "team-a/") {
		t.Errorf("the eviction's note names team-a's work to a team-b user: %q", ev[0].Note)
	}
	if ev := m.EvictionsFor(view.Everything(), 0); !strings.Contains(ev[0].Note, "PodGroup team-a/train-llama") {
		t.Errorf("an administrator does not read the eviction's note whole: %q", ev[0].Note)
	}
}

// TestWorkloadsAsUsersKnowThem groups pods the way their users think of them.
func TestWorkloadsAsUsersKnowThem(t *testing.T) {
	s := &view.Snapshot{Now: clitest.Now}
	pod := func(spec clitest.PodSpec, labels, annotations map[string]string, owner *metav1.OwnerReference) {
		p := clitest.Pod(spec)
		for k, v := range labels {
			p.Labels[k] = v
		}
		for k, v := range annotations {
			p.Annotations[k] = v
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		s.Pods = append(s.Pods, *p)
	}
	yes := true
	base := clitest.PodSpec{Namespace: "ml", Queue: "ml"}
	step := func(name, wf, node string) {
		b := base
		b.Name, b.Node, b.WholeGPUs, b.Kind = name, node, 1, fairwayv1.KindWorkflowStep
		if node == "" {
			b.Waiting = "NoNodeFits: 0/4 nodes fit the pod"
		}
		pod(b, map[string]string{argo.WorkflowLabel: wf}, map[string]string{fairwayv1.ArgoNodeNameAnnotation: wf + ".train"}, nil)
	}
	step("sweep-1", "sweep", "n0")
	step("sweep-2", "sweep", "")
	kfpStep := base
	kfpStep.Name, kfpStep.Node, kfpStep.Kind = "train-pipeline-x7k2p-1", "n0", fairwayv1.KindPipelineStep
	pod(kfpStep, map[string]string{kfp.RunIDLabel: "0d5c-run", argo.WorkflowLabel: "train-pipeline-x7k2p"}, nil, nil)
	for i, role := range []string{"head", "worker", "worker"} {
		b := base
		b.Name, b.Node, b.Kind, b.Group = "rc-"+role+string(rune('0'+i)), "n1", fairwayv1.KindRay, "rc"
		pod(b, map[string]string{kuberay.ClusterLabel: "rc", kuberay.NodeTypeLabel: role}, nil, nil)
	}
	for _, r := range []string{"master", "worker"} {
		b := base
		b.Name, b.Node, b.Kind, b.WholeGPUs = "pt-"+r, "n2", fairwayv1.KindTraining, 8
		pod(b, map[string]string{kubeflowjob.JobNameLabel: "pt", kubeflowjob.ReplicaTypeLabel: r, fairwayv1.FrameworkLabel: "pytorchjob"}, nil, nil)
	}
	for _, h := range []string{"abc", "def"} {
		b := base
		b.Name, b.Node, b.Kind, b.WholeGPUs = "serve-5d8f-"+h, "n3", fairwayv1.KindInference, 1
		pod(b, map[string]string{"pod-template-hash": "5d8f"}, nil,
			&metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "serve-5d8f", Controller: &yes})
	}
	nb := base
	nb.Name, nb.Node, nb.Kind, nb.Fraction = "jupyter-alice", "n3", fairwayv1.KindNotebook, "0.25"
	pod(nb, nil, nil, nil)
	s.PodGroups = append(s.PodGroups, fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rc"}, Spec: fairwayv1.PodGroupSpec{MinMember: 3}})

	type row struct {
		Kind, Name, State, GPUs string
		Roles                   []view.Role
		MinMember               int32
		Reason                  string
	}
	var got []row
	for _, w := range view.Build(s).WorkloadsFor(view.Everything(), "") {
		got = append(got, row{w.Kind, w.Name, w.State, w.GPUs, w.Roles, w.MinMember, w.Reason})
	}
	want := []row{
		{view.KindWorkflow, "sweep", "Partly running", "2", []view.Role{{Name: "step", Running: 1, Waiting: 1}}, 0, "NoNodeFits"},
		{view.KindInference, "serve", "Running", "2", []view.Role{{Name: "replica", Running: 2}}, 0, ""},
		{view.KindKFPRun, "train-pipeline-x7k2p", "Running", "-", []view.Role{{Name: "step", Running: 1}}, 0, ""},
		{view.KindNotebook, "jupyter-alice", "Running", "1×0.25", nil, 0, ""},
		{view.KindPyTorchJob, "pt", "Running", "16", []view.Role{{Name: "master", Running: 1}, {Name: "worker", Running: 1}}, 0, ""},
		{view.KindRayCluster, "rc", "Running", "-", []view.Role{{Name: "head", Running: 1}, {Name: "worker", Running: 2}}, 3, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
}

// TestGridKeepsRealIndexes draws the scenario's h100-1: its shared GPUs at the indexes the
// gpu-agent reports, the loan marked.
func TestGridKeepsRealIndexes(t *testing.T) {
	m := view.Build(consoletest.CLIScenario())
	var n *view.NodeGrid
	for i := range m.Nodes {
		if m.Nodes[i].Name == "h100-1" {
			n = &m.Nodes[i]
		}
	}
	if n == nil {
		t.Fatal("no grid for h100-1")
	}
	c := n.GPUs[3]
	if c.State != view.CellShared || !c.IndexKnown || !c.Lent {
		t.Fatalf("GPU 3 of h100-1 = %+v; want shared, real index, lent (train-lora is on loan on it)", c)
	}
	var holders []string
	for _, h := range c.Holders {
		holders = append(holders, h.Namespace+"/"+h.Name)
	}
	if want := []string{"team-a/train-lora", "team-b/nb-alice", "team-b/nb-bob"}; !slices.Equal(holders, want) {
		t.Errorf("GPU 3 holders %v, want %v", holders, want)
	}
	if c := n.GPUs[5]; c.State != view.CellShared || len(c.Holders) != 1 || c.Holders[0].Name != "nb-carol" {
		t.Errorf("GPU 5 of h100-1 = %+v; want nb-carol's shared GPU", c)
	}
}

// TestBuildIsTheSameOnAnyCPUsInAnyOrder builds a model on one CPU and on four, from the same
// objects listed in another order (the cache lists them in no order): Build spreads the work
// over the CPUs, and the pages must not tell.
func TestBuildIsTheSameOnAnyCPUsInAnyOrder(t *testing.T) {
	s := consoletest.Large(40, 800)
	shuffled := *s
	shuffled.Pods = slices.Clone(s.Pods)
	shuffled.PodGroups = slices.Clone(s.PodGroups)
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(shuffled.Pods), func(i, j int) { shuffled.Pods[i], shuffled.Pods[j] = shuffled.Pods[j], shuffled.Pods[i] })
	r.Shuffle(len(shuffled.PodGroups), func(i, j int) {
		shuffled.PodGroups[i], shuffled.PodGroups[j] = shuffled.PodGroups[j], shuffled.PodGroups[i]
	})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one := view.Build(s)
	runtime.GOMAXPROCS(4)
	four := view.Build(&shuffled)
	ignore := cmpopts.IgnoreUnexported(view.Workload{})
	if diff := cmp.Diff(one.Workloads, four.Workloads, ignore); diff != "" {
		t.Fatalf("workloads on 1 CPU (-) and on 4 CPUs, shuffled (+):\n%s", diff)
	}
	for i := range one.Workloads {
		a, b := &one.Workloads[i], &four.Workloads[i]
		if diff := cmp.Diff(a.Members(), b.Members()); diff != "" {
			t.Errorf("members of %s/%s (-1 CPU +4 CPUs):\n%s", a.Namespace, a.Name, diff)
		}
	}
	if diff := cmp.Diff(one.Nodes, four.Nodes); diff != "" {
		t.Errorf("nodes on 1 CPU (-) and on 4 CPUs, shuffled (+):\n%s", diff)
	}
	if !slices.IsSortedFunc(one.Workloads, func(a, b view.Workload) int {
		return gocmp.Compare(a.Namespace+"\x00"+a.Kind+"\x00"+a.Name, b.Namespace+"\x00"+b.Kind+"\x00"+b.Name)
	}) {
		t.Errorf("workloads are not by namespace, kind and name")
	}
}
