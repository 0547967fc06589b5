package snapshot_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func mustVerify(t *testing.T, s *snapshot.Snapshot) {
	t.Helper()
	if err := s.Verify(); err != nil {
		t.Fatalf("snapshot inconsistent:\n%v", err)
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestPodInfoFromPod(t *testing.T) {
	cases := map[string]struct {
		pod         *corev1.Pod
		wantReq     snapshot.Request
		wantLife    snapshot.Lifecycle
		wantProblem string
		wantGang    snapshot.GangKey
	}{
		"whole GPUs": {
			pod:      testutil.MakePod("a", "p").Queue("a").GPU(2).CPU("1").Memory("1Gi").Obj(),
			wantReq:  snapshot.Request{WholeGPUs: 2, MilliCPU: 1000, Memory: 1 << 30},
			wantLife: snapshot.LifecyclePending,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"fraction in a pod group": {
			pod:      testutil.MakePod("a", "p").Queue("a").Fraction("0.3333").PodGroup("g").Obj(),
			wantReq:  snapshot.Request{FractionMilli: 333},
			wantLife: snapshot.LifecyclePending,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "g", PodGroup: true},
		},
		"Run:ai aliases": {
			pod: testutil.MakePod("a", "p").Label(v1alpha1.RunAIQueueLabel, "a").
				Annotation(v1alpha1.GPUMemoryAliasAnnotation, "20000").Obj(),
			wantReq:  snapshot.Request{GPUMemoryMiB: 20000},
			wantLife: snapshot.LifecyclePending,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"garbage fraction is a problem, not a crash": {
			pod:         testutil.MakePod("a", "p").Queue("a").Fraction("1.5").Obj(),
			wantLife:    snapshot.LifecyclePending,
			wantProblem: `annotation fairway.dev/gpu-fraction "1.5": must be a decimal greater than 0 and less than 1`,
			wantGang:    snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"queue labels that disagree are a problem; fairway's is the queue": {
			pod:         testutil.MakePod("a", "p").Queue("a").Label(v1alpha1.KAIQueueLabel, "b").Obj(),
			wantLife:    snapshot.LifecyclePending,
			wantProblem: `fairway.dev/queue "a" and kai.scheduler/queue "b": the labels name different queues`,
			wantGang:    snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"an empty queue label counts as not set": {
			pod:      testutil.MakePod("a", "p").Label(v1alpha1.QueueLabel, "").Label(v1alpha1.KAIQueueLabel, "a").Obj(),
			wantLife: snapshot.LifecyclePending,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"fraction and whole GPUs together": {
			pod:         testutil.MakePod("a", "p").Queue("a").Fraction("0.5").GPU(1).Obj(),
			wantReq:     snapshot.Request{FractionMilli: 500, WholeGPUs: 1},
			wantLife:    snapshot.LifecyclePending,
			wantProblem: "not both",
			wantGang:    snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"bad min-member": {
			pod:         testutil.MakePod("a", "p").Queue("a").MinMember(0).Obj(),
			wantLife:    snapshot.LifecyclePending,
			wantProblem: "positive integer",
			wantGang:    snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"other scheduler's pending pod": {
			pod:      testutil.MakePod("a", "p").Queue("a").SchedulerName("default-scheduler").Obj(),
			wantLife: snapshot.LifecycleIgnore,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"bound pod of another scheduler still counts": {
			pod:      testutil.MakePod("a", "p").SchedulerName("default-scheduler").CPU("2").Node("n1").Obj(),
			wantReq:  snapshot.Request{MilliCPU: 2000},
			wantLife: snapshot.LifecycleBound,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"terminating": {
			pod:      testutil.MakePod("a", "p").Queue("a").Node("n1").Terminating().Obj(),
			wantLife: snapshot.LifecycleTerminating,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
		"host port": {
			pod:      testutil.MakePod("a", "p").Queue("a").HostPort(8080).Obj(),
			wantReq:  snapshot.Request{HostPorts: []snapshot.HostPort{{Protocol: corev1.ProtocolTCP, Port: 8080}}},
			wantLife: snapshot.LifecyclePending,
			wantGang: snapshot.GangKey{Namespace: "a", Name: "p"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info := snapshot.PodInfoFromPod(tc.pod)
			if diff := cmp.Diff(tc.wantReq, info.Req); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if info.Lifecycle != tc.wantLife {
				t.Errorf("lifecycle = %v, want %v", info.Lifecycle, tc.wantLife)
			}
			if info.Gang != tc.wantGang {
				t.Errorf("gang = %v, want %v", info.Gang, tc.wantGang)
			}
			switch {
			case tc.wantProblem == "" && info.Problem != nil:
				t.Errorf("unexpected problem %+v", info.Problem)
			case tc.wantProblem != "" && (info.Problem == nil || !strings.Contains(info.Problem.Message, tc.wantProblem)):
				t.Errorf("problem = %+v, want one containing %q", info.Problem, tc.wantProblem)
			}
		})
	}
}

func TestUnsupportedConstraintIsAProblem(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertPod(testutil.MakePod("a", "p").Queue("a").PodAntiAffinity("app", "x").Obj()); err != nil {
		t.Fatal(err)
	}
	task := s.Task(key("a", "p"))
	if task.Problem == nil || task.Problem.Code != snapshot.ProblemUnsupported || !strings.Contains(task.Problem.Message, "anti-affinity") {
		t.Fatalf("problem = %+v, want unsupported anti-affinity", task.Problem)
	}
	if task.Placeable() {
		t.Error("a pod with an unsupported constraint must not be placeable")
	}
}

func TestNodeUsageAndGPUSlots(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(4, "H100").Inventory(81920).Obj()); err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{
		testutil.MakePod("a", "whole").Queue("a").GPU(2).CPU("2").Node("n1").GPUIndex(0, 1).Obj(),
		testutil.MakePod("a", "half").Queue("a").Fraction("0.5").Node("n1").GPUIndex(3).Obj(),
		testutil.MakePod("a", "quarter").Queue("a").Fraction("0.25").Node("n1").GPUIndex(3).Obj(),
		testutil.MakePod("b", "lost").Queue("b").GPU(1).Node("n1").Obj(), // no index: floating
	}
	for _, p := range pods {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	n := s.Node("n1")
	if n.UsedMilliGPU != 3750 {
		t.Errorf("used milli-GPU = %d, want 3750", n.UsedMilliGPU)
	}
	if g := n.Slots[3]; g.UsedMilli != 750 || g.Sharers != 2 || g.UsedMemMiB != 61440 || g.UUID != "GPU-n1-3" {
		t.Errorf("shared GPU = %+v", g)
	}
	if n.Floating != 1 || n.FreeWholeSlots() != 0 {
		t.Errorf("floating %d, free whole %d; want 1 and 0 (GPU 2 is taken by the pod without an index)", n.Floating, n.FreeWholeSlots())
	}
	if got := s.NodesWithFreeGPUs(0); !got.Has(n.ID) {
		t.Error("node not indexed with 0 free GPUs")
	}
	if !s.NodesWithSharedRoom().Has(n.ID) {
		t.Error("node with a 0.75-used shared GPU not indexed as having shared room")
	}
	a := s.Queue("a")
	if got := a.Allocated.At(snapshot.DimGPU); got != 2750 {
		t.Errorf("queue a allocated GPU = %d, want 2750", got)
	}
	if got := a.Allocated.At(snapshot.NumBaseDims); got != 2750 || s.DimName(snapshot.NumBaseDims) != "gpu/H100" {
		t.Errorf("queue a allocated on %s = %d, want 2750", s.DimName(snapshot.NumBaseDims), got)
	}
	s.DeletePod(key("a", "whole"))
	mustVerify(t, s)
	if n.FreeWholeSlots() != 2 {
		t.Errorf("free whole after delete = %d, want 2 (GPUs 0-2 look empty, one is the floating pod's)", n.FreeWholeSlots())
	}
}

func TestPodsBeforeTheirNode(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertPod(testutil.MakePod("a", "p").Queue("a").GPU(1).Node("n1").Obj()); err != nil {
		t.Fatal(err)
	}
	if got := s.Queue("a").Allocated.At(snapshot.DimGPU); got != 1000 {
		t.Errorf("orphan pod not accounted: %d", got)
	}
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(2, "").Obj()); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if n := s.Node("n1"); n.UsedMilliGPU != 1000 || len(n.Tasks) != 1 {
		t.Errorf("pod not attached when its node arrived: used %d tasks %d", n.UsedMilliGPU, len(n.Tasks))
	}
	s.DeleteNode("n1")
	mustVerify(t, s)
	if got := s.Queue("a").Allocated.At(snapshot.DimGPU); got != 1000 {
		t.Errorf("pod of a deleted node must stay accounted until deleted: %d", got)
	}
}

func TestQueueTree(t *testing.T) {
	s := snapshot.New()
	for _, q := range []*v1alpha1.Queue{
		testutil.MakeQueue("dept").GPU("4", 1, "").Obj(),
		testutil.MakeQueue("p1").Parent("dept").GPU("2", 1, "").Namespaces("x").Obj(),
		testutil.MakeQueue("p2").Parent("dept").Namespaces("x").Obj(),
		testutil.MakeQueue("orphan").Parent("missing").Obj(),
	} {
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{
		testutil.MakePod("x", "r1").Queue("p1").GPU(1).Node("n1").Obj(),
		testutil.MakePod("x", "r2").Queue("p2").GPU(2).Node("n1").Obj(),
		testutil.MakePod("x", "w").Queue("p2").GPU(4).Obj(),
		testutil.MakePod("x", "lost").Queue("nowhere").GPU(1).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	dept := s.Queue("dept")
	if got := dept.Allocated.At(snapshot.DimGPU); got != 3000 {
		t.Errorf("dept allocated = %d, want 3000", got)
	}
	if got := dept.Demand(snapshot.DimGPU); got != 7000 {
		t.Errorf("dept demand = %d, want 7000", got)
	}
	if q := s.Queue("orphan"); q.NotReadyReason != v1alpha1.QueueParentMissing || q.NotReady != "parent queue missing does not exist" {
		t.Errorf("orphan queue not ready %q: %q", q.NotReadyReason, q.NotReady)
	}
	if q := s.Queue("nowhere"); q == nil || q.Defined || q.NotReadyReason != v1alpha1.QueueMissing || q.NotReady == "" {
		t.Errorf("placeholder queue = %+v", q)
	}
	// Moving p2 to the top of the tree moves its totals out of dept.
	if err := s.UpsertQueue(testutil.MakeQueue("p2").Obj()); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if got := dept.Allocated.At(snapshot.DimGPU); got != 1000 {
		t.Errorf("dept allocated after p2 moved = %d, want 1000", got)
	}
	s.DeletePod(key("x", "lost"))
	if s.Queue("nowhere") != nil {
		t.Error("placeholder queue should disappear with its last pod")
	}
}

// Each readiness rule gives its own code, and the rules that follow read the code, not the
// words of the message (which holds queue names): queues of a parent cycle are cut from their
// parents, a queue with children and pods stays under its parent and counts in its totals, and
// a queue under a queue with a missing parent is not ready either.
func TestQueueNotReadyReasons(t *testing.T) {
	s := snapshot.New()
	for _, q := range []*v1alpha1.Queue{
		testutil.MakeQueue("dept").GPU("8", 1, "").Obj(),
		testutil.MakeQueue("bicycle").Parent("dept").Obj(),
		testutil.MakeQueue("wheel").Parent("bicycle").Obj(),
		testutil.MakeQueue("loop-a").Parent("loop-b").Obj(),
		testutil.MakeQueue("loop-b").Parent("loop-a").Obj(),
		testutil.MakeQueue("below-loop").Parent("loop-a").Obj(),
		testutil.MakeQueue("orphan").Parent("gone").Obj(),
		testutil.MakeQueue("under-orphan").Parent("orphan").Obj(),
	} {
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{
		testutil.MakePod("x", "b").Queue("bicycle").GPU(1).Node("n1").Obj(),
		testutil.MakePod("x", "w").Queue("wheel").GPU(1).Node("n1").Obj(),
		testutil.MakePod("x", "lost").Queue("nowhere").GPU(1).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	for name, want := range map[string]v1alpha1.QueueNotReadyReason{
		"dept": "", "wheel": "", "bicycle": v1alpha1.QueueHasChildren, "loop-a": v1alpha1.QueueParentCycle,
		"loop-b": v1alpha1.QueueParentCycle, "below-loop": v1alpha1.QueueParentCycle, // its ancestry loops
		"orphan": v1alpha1.QueueParentMissing, "under-orphan": v1alpha1.QueueAncestorNotReady, "nowhere": v1alpha1.QueueMissing,
	} {
		q := s.Queue(name)
		if q.NotReadyReason != want || (want == "") != (q.NotReady == "") {
			t.Errorf("queue %s not ready %q (%q), want %q", name, q.NotReadyReason, q.NotReady, want)
		}
	}
	if p := s.Queue("bicycle").Parent; p == nil || p.Name != "dept" {
		t.Errorf("bicycle's parent = %v, want dept", p)
	}
	if got := s.Queue("dept").Allocated.At(snapshot.DimGPU); got != 2000 {
		t.Errorf("dept allocated %d milli-GPU, want bicycle's and wheel's 2000", got)
	}
	if s.Queue("loop-a").Parent != nil || s.Queue("loop-b").Parent != nil || s.Queue("below-loop").Parent != nil {
		t.Error("queues of a parent cycle must be cut from their parents")
	}
}

func TestGangFromPodGroup(t *testing.T) {
	s := snapshot.New()
	for i := range 3 {
		p := testutil.MakePod("a", "w-"+string(rune('0'+i))).Queue("a").PodGroup("g").MinMember(2).GPU(1).Priority(50)
		if err := s.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	g := s.Gang(snapshot.GangKey{Namespace: "a", Name: "g", PodGroup: true})
	if g.MinMember != 2 || !g.Preemptible || len(g.Pending) != 3 {
		t.Fatalf("gang from annotations: min %d preemptible %v pending %d", g.MinMember, g.Preemptible, len(g.Pending))
	}
	pg := testutil.MakePodGroup("a", "g").MinMember(3).Queue("b").Preemptibility(v1alpha1.NonPreemptible).Obj()
	if err := s.UpsertPodGroup(pg); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if g.MinMember != 3 || g.Preemptible || g.Queue.Name != "b" {
		t.Errorf("pod group must override: min %d preemptible %v queue %s", g.MinMember, g.Preemptible, g.Queue.Name)
	}
	if s.Queue("a") != nil && s.Queue("a").PendingPods != 0 {
		t.Errorf("queue a still counts the gang's pods")
	}
	if got := s.Queue("b").PendingPods; got != 3 {
		t.Errorf("queue b pending pods = %d, want 3", got)
	}
}

func TestAssumeUnassumeIsExact(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(2, "A100").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertPod(testutil.MakePod("a", "p").Queue("a").GPU(1).CPU("1").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertPod(testutil.MakePod("a", "r").Queue("a").Fraction("0.5").Node("n1").GPUIndex(1).Obj()); err != nil {
		t.Fatal(err)
	}
	before := s.Summary()
	task := s.Task(key("a", "p"))
	n := s.Node("n1")
	now := testutil.Epoch.Add(time.Hour)
	s.Assume(task, n, snapshot.Assignment{Whole: []int32{0}, Shared: -1}, now)
	mustVerify(t, s)
	if task.State != snapshot.TaskBound || !task.Assumed || n.FreeWholeSlots() != 0 {
		t.Fatalf("after Assume: state %v assumed %v free %d", task.State, task.Assumed, n.FreeWholeSlots())
	}
	r := s.Task(key("a", "r"))
	s.SetReleasing(r, true)
	g := r.Gang
	s.AddHold(g, snapshot.Hold{Node: n, WholeGPUs: 1, MilliGPU: 1000, MilliCPU: 500})
	mustVerify(t, s)
	s.PopHold(g)
	s.SetReleasing(r, false)
	s.Unassume(task)
	mustVerify(t, s)
	if diff := cmp.Diff(before, s.Summary()); diff != "" {
		t.Errorf("Assume+Unassume left a trace (-before +after):\n%s", diff)
	}
}

func TestForgetAndConfirm(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(1, "").Obj()); err != nil {
		t.Fatal(err)
	}
	pod := testutil.MakePod("a", "p").Queue("a").GPU(1).Obj()
	if err := s.UpsertPod(pod); err != nil {
		t.Fatal(err)
	}
	task := s.Task(key("a", "p"))
	s.Assume(task, s.Node("n1"), snapshot.Assignment{Whole: []int32{0}, Shared: -1}, testutil.Epoch)
	// The informer still shows the pod pending: the assumption holds.
	if err := s.UpsertPod(pod); err != nil {
		t.Fatal(err)
	}
	if !task.Assumed || s.Task(key("a", "p")) != task {
		t.Fatal("a stale pending update must not undo the assumption")
	}
	if err := s.Forget(key("a", "p")); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if task.State != snapshot.TaskPending || s.Node("n1").UsedMilliGPU != 0 {
		t.Fatal("Forget did not free the node")
	}
	if err := s.Forget(key("a", "p")); !errors.Is(err, snapshot.ErrNotAssumed) {
		t.Errorf("second Forget = %v, want ErrNotAssumed", err)
	}
	s.Assume(task, s.Node("n1"), snapshot.Assignment{Whole: []int32{0}, Shared: -1}, testutil.Epoch)
	bound := testutil.MakePod("a", "p").Queue("a").GPU(1).Node("n1").Obj()
	if err := s.UpsertPod(bound); err != nil {
		t.Fatal(err)
	}
	if task.Assumed || task.GPUs.Whole[0] != 0 {
		t.Errorf("confirmation must clear Assumed and keep the GPUs: %+v", task)
	}
	mustVerify(t, s)
}

func TestNodeHeartbeatIsNoop(t *testing.T) {
	s := snapshot.New()
	node := testutil.MakeNode("n1").GPUs(8, "H100").Obj()
	if err := s.UpsertNode(node); err != nil {
		t.Fatal(err)
	}
	v := s.Node("n1").Version
	beat := node.DeepCopy()
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := s.UpsertNode(beat); err != nil {
		t.Fatal(err)
	}
	if s.Node("n1").Version != v {
		t.Error("a heartbeat must not touch the node")
	}
	tainted := beat.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	if err := s.UpsertNode(tainted); err != nil {
		t.Fatal(err)
	}
	if s.Node("n1").Version == v {
		t.Error("a taint change must be applied")
	}
}

func TestBadInventoryStillRecordsNode(t *testing.T) {
	s := snapshot.New()
	n := testutil.MakeNode("n1").GPUs(2, "").Obj()
	n.Annotations[v1alpha1.GPUInventoryAnnotation] = "{not json"
	if err := s.UpsertNode(n); err == nil {
		t.Error("want an error for a malformed inventory")
	}
	if got := s.Node("n1"); got == nil || len(got.Slots) != 2 {
		t.Errorf("node not recorded with its 2 GPUs: %+v", got)
	}
}

func TestNodeChangeKeepsPodsOnTheirGPUs(t *testing.T) {
	s := snapshot.New()
	node := testutil.MakeNode("n1").GPUs(4, "A100").Obj()
	if err := s.UpsertNode(node); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		testutil.MakePod("a", "frac").Queue("a").Fraction("0.5").Node("n1").GPUIndex(2).Obj(),
		testutil.MakePod("a", "whole").Queue("a").GPU(1).Node("n1").GPUIndex(3).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	relabelled := node.DeepCopy()
	relabelled.Labels["fairway.dev/gpu-type"] = "H100"
	if err := s.UpsertNode(relabelled); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	n := s.Node("n1")
	if n.Slots[2].Sharers != 1 || n.Slots[3].Owners != 1 || n.FreeWholeSlots() != 2 {
		t.Errorf("pods moved off their GPUs: %+v", n.Slots)
	}
	a := s.Queue("a")
	if got := a.Allocated.At(s.DimOfType("H100")); got != 1500 {
		t.Errorf("queue a on H100 = %d, want 1500", got)
	}
	if got := a.Allocated.At(s.DimOfType("A100")); got != 0 {
		t.Errorf("queue a still charged on A100: %d", got)
	}
}

func TestPodRecreatedWithTheSameName(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(2, "").Obj()); err != nil {
		t.Fatal(err)
	}
	old := testutil.MakePod("a", "p").Queue("a").GPU(1).Node("n1").GPUIndex(0).Obj()
	if err := s.UpsertPod(old); err != nil {
		t.Fatal(err)
	}
	fresh := testutil.MakePod("a", "p").Queue("a").GPU(1).Obj()
	fresh.UID = "new-uid"
	if err := s.UpsertPod(fresh); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	task := s.Task(key("a", "p"))
	if task.State != snapshot.TaskPending || task.UID != "new-uid" || s.Node("n1").UsedMilliGPU != 0 {
		t.Errorf("the new pod must replace the old one: %+v", task)
	}
}

func TestParseGPUInventoryAgentFormat(t *testing.T) {
	agent := `{"observedAt":"2026-01-01T00:00:00Z","refreshSeconds":30,"mps":true,"gpus":[
		{"index":1,"uuid":"GPU-b","memoryMiB":81559,"healthy":true},
		{"index":0,"uuid":"GPU-a","memoryMiB":81559,"healthy":true},
		{"index":2,"uuid":"GPU-lost","memoryMiB":81559,"healthy":false},
		{"index":3,"uuid":"GPU-mig","memoryMiB":81559,"healthy":true,"migEnabled":true}]}`
	got, err := snapshot.ParseGPUInventory(agent)
	if err != nil {
		t.Fatal(err)
	}
	want := []snapshot.GPUInventoryEntry{{Index: 0, UUID: "GPU-a", MemoryMiB: 81559}, {Index: 1, UUID: "GPU-b", MemoryMiB: 81559}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent inventory (-want +got):\n%s", diff)
	}
	list, err := snapshot.ParseGPUInventory(`[{"index":0,"uuid":"GPU-x","memoryMiB":40000}]`)
	if err != nil || len(list) != 1 || list[0].UUID != "GPU-x" {
		t.Errorf("list form: %v, %v", list, err)
	}
	s := snapshot.New()
	n := testutil.MakeNode("n1").GPUs(2, "H100").Obj()
	n.Annotations[v1alpha1.GPUInventoryAnnotation] = agent
	if err := s.UpsertNode(n); err != nil {
		t.Fatal(err)
	}
	if got := s.Node("n1").Slots[1].UUID; got != "GPU-b" {
		t.Errorf("slot 1 UUID = %q, want GPU-b", got)
	}
}

// A reservation pod marks its slot (fairway.dev/gpu-slot, not the agent's physical
// fairway.dev/gpu-index) without taking a second GPU, keeps whole-GPU pods off it until it is
// gone, and lets fractional pods join.
func TestReservationHoldsItsSlot(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(8, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	resv := testutil.MakePod("fairway-system", "fairway-gpu-n1-3").Reservation("n1", 3, 5).Obj()
	frac := testutil.MakePod("a", "nb").Queue("a").Fraction("0.25").Node("n1").GPUIndex(3).Obj()
	for _, p := range []*corev1.Pod{resv, frac} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	n := s.Node("n1")
	slot := n.Slot(3)
	if slot.Reserved != 1 || slot.Sharers != 1 || slot.UsedMilli != 250 || n.Slot(5).Reserved != 0 {
		t.Fatalf("slot 3 = %+v, slot 5 = %+v", *slot, *n.Slot(5))
	}
	if got := n.FreeWholeSlots(); got != 7 {
		t.Errorf("free whole GPUs = %d, want 7 (the reservation is not a second GPU)", got)
	}
	if n.UnmanagedMilliGPU != 0 || s.Queue("a").Allocated.At(snapshot.DimGPU) != 250 {
		t.Errorf("unmanaged GPU %d, queue a GPU %d", n.UnmanagedMilliGPU, s.Queue("a").Allocated.At(snapshot.DimGPU))
	}
	s.DeletePod(key("a", "nb"))
	mustVerify(t, s)
	if slot.Empty() || !slot.EmptyAfterRelease() || !slot.Joinable() || n.FreeWholeSlots() != 7 || !n.HasSharedRoom() {
		t.Errorf("reservation alone: %+v empty %v after release %v joinable %v free %d", *slot, slot.Empty(), slot.EmptyAfterRelease(), slot.Joinable(), n.FreeWholeSlots())
	}
	terminating := resv.DeepCopy()
	terminating.DeletionTimestamp = frac.CreationTimestamp.DeepCopy()
	if err := s.UpsertPod(terminating); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if slot.Joinable() || slot.Empty() {
		t.Errorf("terminating reservation: joinable %v empty %v", slot.Joinable(), slot.Empty())
	}
	s.DeletePod(key("fairway-system", "fairway-gpu-n1-3"))
	mustVerify(t, s)
	if !slot.Empty() || n.FreeWholeSlots() != 8 {
		t.Errorf("after the reservation: %+v free %d", *slot, n.FreeWholeSlots())
	}
}

func TestReservationSurvivesNodeChangeAndDeletion(t *testing.T) {
	s := snapshot.New()
	node := testutil.MakeNode("n1").GPUs(4, "H100").Obj()
	if err := s.UpsertPod(testutil.MakePod("fairway-system", "r").Reservation("n1", 2, 0).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertNode(node); err != nil {
		t.Fatal(err)
	}
	if got := s.Node("n1").Slot(2).Reserved; got != 1 {
		t.Fatalf("reservation seen before its node: slot 2 reserved %d", got)
	}
	s.DeleteNode("n1")
	if err := s.UpsertNode(node); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if got := s.Node("n1").Slot(2).Reserved; got != 1 {
		t.Errorf("node re-added: slot 2 reserved %d", got)
	}
}

func TestGangPriorityFromResolvedClass(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertPod(testutil.MakePod("a", "p").Queue("a").PodGroup("g").GPU(1).Priority(50).Obj()); err != nil {
		t.Fatal(err)
	}
	g := s.Gang(snapshot.GangKey{Namespace: "a", Name: "g", PodGroup: true})
	if g.Priority != 50 || !g.Preemptible {
		t.Fatalf("from pods: priority %d preemptible %v", g.Priority, g.Preemptible)
	}
	spec := snapshot.GangSpecFromPodGroup(testutil.MakePodGroup("a", "g").MinMember(1).Obj())
	prio := int32(125)
	spec.Priority = &prio
	if err := s.UpsertGangSpec(key("a", "g"), spec); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if g.Priority != 125 || g.Preemptible {
		t.Errorf("from the PodGroup's class: priority %d preemptible %v", g.Priority, g.Preemptible)
	}
	if err := s.UpsertPodGroup(testutil.MakePodGroup("a", "g").MinMember(1).Obj()); err != nil {
		t.Fatal(err)
	}
	if g.Priority != 50 {
		t.Errorf("class gone: priority %d, want the pods' 50", g.Priority)
	}
}

func TestSchedulingProblemAnnotation(t *testing.T) {
	s := snapshot.New()
	p := testutil.MakePod("a", "p").Queue("a").GPU(1).
		Annotation(snapshot.SchedulingProblemAnnotation, "PersistentVolumeClaim a/data is not bound").Obj()
	if err := s.UpsertPod(p); err != nil {
		t.Fatal(err)
	}
	task := s.Task(key("a", "p"))
	if task.Placeable() || task.Problem == nil || task.Problem.Message != "PersistentVolumeClaim a/data is not bound" {
		t.Errorf("problem %+v placeable %v", task.Problem, task.Placeable())
	}
}

// TestForeignQueue: a gang whose queue does not serve its namespace is Foreign, its pending pods
// are not placeable and not in the queue's demand, and it follows the queue's namespaces as they
// change, the queue's deletion and re-creation included.
func TestForeignQueue(t *testing.T) {
	s := snapshot.New()
	upsert := func(q *v1alpha1.Queue) {
		t.Helper()
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
		mustVerify(t, s)
	}
	upsert(testutil.MakeQueue("team-b").Obj())
	for _, p := range []*corev1.Pod{
		testutil.MakePod("team-a", "intruder").Queue("team-b").GPU(2).Obj(),
		testutil.MakePod("team-b", "own").Queue("team-b").GPU(1).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, s)
	check := func(step string, foreign bool, demand int64) {
		t.Helper()
		g := s.Gang(snapshot.GangKey{Namespace: "team-a", Name: "intruder"})
		if got := g.Foreign != ""; got != foreign {
			t.Errorf("%s: Foreign = %q, want foreign %v", step, g.Foreign, foreign)
		}
		if got := s.Task(key("team-a", "intruder")).Placeable(); got == foreign {
			t.Errorf("%s: Placeable = %v", step, got)
		}
		if got := s.Queue("team-b").Demand(snapshot.DimGPU); got != demand {
			t.Errorf("%s: team-b GPU demand = %d, want %d", step, got, demand)
		}
	}
	check("serving team-b only", true, 1000)
	upsert(testutil.MakeQueue("team-b").Namespaces("team-b", "team-a").Obj())
	check("serving team-a too", false, 3000)
	upsert(testutil.MakeQueue("team-b").Namespaces("team-b").Obj())
	check("team-a removed again", true, 1000)
	s.DeleteQueue("team-b")
	mustVerify(t, s)
	check("queue deleted: not ready, not foreign", false, 3000)
	upsert(testutil.MakeQueue("team-b").Obj())
	check("queue re-created", true, 1000)
}

// A tenant's pod that carries the reservation label outside fairway's namespace is an ordinary
// pod: its eight GPUs are taken and charged to its queue, not passed off as a reservation that
// holds one slot and is charged nothing. In fairway's own namespace (SetOwnNamespace) the same
// label marks a reservation.
func TestReservationLabelOutsideFairwaysNamespace(t *testing.T) {
	for _, own := range []string{"", "fairway-prod"} {
		s := snapshot.New()
		if own != "" {
			s.SetOwnNamespace(own)
		}
		if err := s.UpsertNode(testutil.MakeNode("n1").GPUs(8, "H100").Obj()); err != nil {
			t.Fatal(err)
		}
		forged := testutil.MakePod("a", "forged").Queue("a").Reservation("n1", 0, -1).GPU(8).Obj()
		if err := s.UpsertPod(forged); err != nil {
			t.Fatal(err)
		}
		mustVerify(t, s)
		n := s.Node("n1")
		if got := n.FreeWholeSlots(); got != 0 {
			t.Errorf("own namespace %q: %d GPUs free after a forged reservation asking for 8, want 0", own, got)
		}
		if got := s.Queue("a").Allocated.At(snapshot.DimGPU); got != 8000 {
			t.Errorf("own namespace %q: queue a charged %d milli-GPU for the forged reservation, want 8000", own, got)
		}
		if own != "" {
			real := testutil.MakePod(own, "fairway-gpu-n1-0").Reservation("n1", 0, 0).Obj()
			s2 := snapshot.New()
			s2.SetOwnNamespace(own)
			if err := s2.UpsertNode(testutil.MakeNode("n1").GPUs(8, "H100").Obj()); err != nil {
				t.Fatal(err)
			}
			if err := s2.UpsertPod(real); err != nil {
				t.Fatal(err)
			}
			if got := s2.Node("n1").Slot(0).Reserved; got != 1 {
				t.Errorf("a reservation in the configured namespace %q holds slot 0 %d times, want 1", own, got)
			}
		}
	}
}

// A queue admits pipelines as its own spec says, else as its nearest ancestor's does, else per
// pod; a change of the mode alone reaches the snapshot, and a deleted queue admits per pod.
func TestQueuePipelineAdmission(t *testing.T) {
	s := snapshot.New()
	for _, q := range []*v1alpha1.Queue{
		testutil.MakeQueue("dept").PipelineAdmission(v1alpha1.PipelineAdmissionPeak).Obj(),
		testutil.MakeQueue("team").Parent("dept").Obj(),
		testutil.MakeQueue("staged").Parent("dept").PipelineAdmission(v1alpha1.PipelineAdmissionStages).Obj(),
		testutil.MakeQueue("alone").Obj(),
	} {
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]v1alpha1.PipelineAdmission{
		"dept": v1alpha1.PipelineAdmissionPeak, "team": v1alpha1.PipelineAdmissionPeak,
		"staged": v1alpha1.PipelineAdmissionStages, "alone": v1alpha1.PipelineAdmissionPerPod,
	} {
		if got := s.Queue(name).PipelineAdmission(); got != want {
			t.Errorf("queue %s admits pipelines %q, want %q", name, got, want)
		}
	}
	if err := s.UpsertQueue(testutil.MakeQueue("dept").PipelineAdmission(v1alpha1.PipelineAdmissionPerPod).Obj()); err != nil {
		t.Fatal(err)
	}
	if got := s.Queue("team").PipelineAdmission(); got != v1alpha1.PipelineAdmissionPerPod {
		t.Errorf("after its parent turned Peak off, team admits pipelines %q", got)
	}
	if err := s.UpsertPod(testutil.MakePod("staged", "p").Queue("staged").Obj()); err != nil {
		t.Fatal(err)
	}
	s.DeleteQueue("staged")
	if q := s.Queue("staged"); q == nil || q.Defined || q.PipelineAdmission() != v1alpha1.PipelineAdmissionPerPod {
		t.Errorf("deleted queue (placeholder %+v) still admits pipelines", q)
	}
}

// A gang whose PodGroup names a queue that stopped serving its namespace is foreign, its pods
// of the old queue label included; once the PodGroup follows the namespace to its new queue
// (podgroups.Follow), the gang is the new queue's, placeable and counted in its demand.
func TestGangFollowsItsPodGroupToTheNamespacesNewQueue(t *testing.T) {
	s := snapshot.New()
	for _, q := range []*v1alpha1.Queue{
		testutil.MakeQueue("training").Namespaces("other").Obj(), // ml moved away
		testutil.MakeQueue("research").Namespaces("ml").Obj(),
	} {
		if err := s.UpsertQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ml"}, Spec: v1alpha1.PodGroupSpec{Queue: "training", MinMember: 2}}
	if err := s.UpsertPodGroup(pg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		testutil.MakePod("ml", "old-0").Queue("training").PodGroup("llm").GPU(1).Obj(),
		testutil.MakePod("ml", "new-0").Queue("research").PodGroup("llm").GPU(1).Obj(),
	} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	g := s.Gang(snapshot.GangKey{Namespace: "ml", Name: "llm", PodGroup: true})
	if g == nil || g.Foreign == "" || g.Queue.Name != "training" {
		t.Fatalf("gang %+v: want it foreign to training while its PodGroup names it", g)
	}
	pg.Spec.Queue = "research"
	if err := s.UpsertPodGroup(pg); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
	if g.Foreign != "" || g.Queue.Name != "research" {
		t.Errorf("gang queue %s foreign %q: want research's, not foreign", g.Queue.Name, g.Foreign)
	}
	if d := s.Queue("research").Demand(snapshot.DimGPU); d != 2000 {
		t.Errorf("research's demand %d milli-GPU, want both pods of the gang", d)
	}
	for _, name := range []string{"old-0", "new-0"} {
		if tk := s.Task(key("ml", name)); tk == nil || !tk.Placeable() {
			t.Errorf("pod %s not placeable: %+v", name, tk)
		}
	}
}

// With an admission key, a pending pod is placeable only with the webhook's seal made with that
// key; an unsealed or mis-sealed pod has ProblemNotAdmitted. Bound pods are not checked (they
// run already, and may predate the key), nor is anything without a key.
func TestAdmissionSealChecked(t *testing.T) {
	sealKey := v1alpha1.AdmissionKey(strings.Repeat("k", 32))
	sealed := testutil.MakePod("a", "sealed").Queue("a").GPU(1).Obj()
	sealed.Annotations[v1alpha1.AdmittedAnnotation] = sealKey.Seal(sealed)
	forged := testutil.MakePod("a", "forged").Queue("a").GPU(1).Obj()
	forged.Annotations[v1alpha1.AdmittedAnnotation] = sealKey.Seal(sealed) // copied from a pod whose keys differ
	forged.Labels[v1alpha1.PreemptibilityLabel] = string(v1alpha1.NonPreemptible)
	unsealed := testutil.MakePod("a", "unsealed").Queue("a").GPU(1).Obj()
	running := testutil.MakePod("a", "running").Queue("a").GPU(1).Node("n1").Obj()
	for _, withKey := range []bool{true, false} {
		s := snapshot.New()
		if withKey {
			s.SetAdmissionKey(sealKey)
		}
		for _, p := range []*corev1.Pod{sealed, forged, unsealed, running} {
			if err := s.UpsertPod(p); err != nil {
				t.Fatal(err)
			}
		}
		for name, wantProblem := range map[string]bool{"sealed": false, "forged": withKey, "unsealed": withKey, "running": false} {
			tk := s.Task(key("a", name))
			got := tk.Problem != nil && tk.Problem.Code == snapshot.ProblemNotAdmitted
			if got != wantProblem {
				t.Errorf("key %v, pod %s: NotAdmitted %v (problem %+v), want %v", withKey, name, got, tk.Problem, wantProblem)
			}
		}
	}
}
