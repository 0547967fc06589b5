package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func snapWith(t *testing.T, nodes []*corev1.Node, pods ...*corev1.Pod) *snapshot.Snapshot {
	t.Helper()
	s := snapshot.New()
	for _, n := range nodes {
		mustNoErr(t, s.UpsertNode(n))
	}
	for _, p := range pods {
		mustNoErr(t, s.UpsertPod(p))
	}
	return s
}

func reqOf(p *corev1.Pod) *snapshot.Request {
	r := snapshot.PodInfoFromPod(p).Req
	return &r
}

func TestPickGPUs(t *testing.T) {
	node := testutil.MakeNode("n1").GPUs(4, "").GPUMemory(40960).Obj()
	running := []*corev1.Pod{
		testutil.MakePod("q", "whole").Queue("q").GPU(1).Node("n1").GPUIndex(0).Obj(),
		testutil.MakePod("q", "half").Queue("q").Fraction("0.5").Node("n1").GPUIndex(1).Obj(),
		testutil.MakePod("q", "quarter").Queue("q").Fraction("0.25").Node("n1").GPUIndex(2).Obj(),
	}
	cases := map[string]struct {
		pod          *corev1.Pod
		afterRelease bool
		heldWhole    int64
		want         snapshot.Assignment
		wantFail     engine.FitFailure
	}{
		"one whole GPU takes the only empty one": {
			pod:  testutil.MakePod("q", "p").GPU(1).Obj(),
			want: snapshot.Assignment{Whole: []int32{3}, Shared: -1},
		},
		"two whole GPUs do not fit": {
			pod:      testutil.MakePod("q", "p").GPU(2).Obj(),
			wantFail: engine.FailGPUs,
		},
		"more GPUs than the node has": {
			pod:      testutil.MakePod("q", "p").GPU(8).Obj(),
			wantFail: engine.FailTooFewGPUs,
		},
		"a fraction packs onto the fullest shared GPU with room": {
			pod:  testutil.MakePod("q", "p").Fraction("0.5").Obj(),
			want: snapshot.Assignment{Shared: 1, Milli: 500, MemMiB: 20480},
		},
		"a fraction that fits only the emptier shared GPU": {
			pod:  testutil.MakePod("q", "p").Fraction("0.7").Obj(),
			want: snapshot.Assignment{Shared: 2, Milli: 700, MemMiB: 28672},
		},
		"a fraction too large for shared GPUs opens an empty one": {
			pod:  testutil.MakePod("q", "p").Fraction("0.8").Obj(),
			want: snapshot.Assignment{Shared: 3, Milli: 800, MemMiB: 32768},
		},
		"memory is charged as its share of the GPU": {
			pod:  testutil.MakePod("q", "p").GPUMemory(10240).Obj(),
			want: snapshot.Assignment{Shared: 1, Milli: 250, MemMiB: 10240},
		},
		"an empty GPU held for another gang is not free": {
			pod:       testutil.MakePod("q", "p").GPU(1).Obj(),
			heldWhole: 1,
			wantFail:  engine.FailGPUs,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapWith(t, []*corev1.Node{node}, running...)
			got, f := engine.PickGPUs(s.Node("n1"), reqOf(tc.pod), tc.afterRelease, tc.heldWhole)
			if f != tc.wantFail {
				t.Fatalf("failure = %v, want %v", f, tc.wantFail)
			}
			if f != engine.Fits {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("assignment (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPickGPUsAfterRelease(t *testing.T) {
	s := snapWith(t, []*corev1.Node{testutil.MakeNode("n1").GPUs(2, "").Obj()},
		testutil.MakePod("q", "a").Queue("q").GPU(1).Node("n1").GPUIndex(0).Obj(),
		testutil.MakePod("q", "b").Queue("q").GPU(1).Node("n1").GPUIndex(1).Terminating().Obj())
	req := reqOf(testutil.MakePod("q", "p").GPU(1).Obj())
	if _, f := engine.PickGPUs(s.Node("n1"), req, false, 0); f != engine.FailGPUs {
		t.Errorf("now: %v, want FailGPUs", f)
	}
	got, f := engine.PickGPUs(s.Node("n1"), req, true, 0)
	if diff := cmp.Diff(snapshot.Assignment{Whole: []int32{1}, Shared: -1}, got); f != engine.Fits || diff != "" {
		t.Errorf("after release: %v %s", f, diff)
	}
}

func TestFitsNode(t *testing.T) {
	node := testutil.MakeNode("n1").Allocatable(corev1.ResourceCPU, "4").Allocatable(corev1.ResourceMemory, "8Gi").
		Allocatable(corev1.ResourcePods, "2").Allocatable("example.com/nic", "1").Obj()
	running := testutil.MakePod("q", "r").Queue("q").CPU("3").Memory("4Gi").HostPort(8080).Node("n1").Obj()
	cases := map[string]struct {
		pod  *corev1.Pod
		want engine.FitFailure
	}{
		"fits":          {pod: testutil.MakePod("q", "p").CPU("1").Memory("4Gi").Obj(), want: engine.Fits},
		"cpu":           {pod: testutil.MakePod("q", "p").CPU("2").Obj(), want: engine.FailCPU},
		"memory":        {pod: testutil.MakePod("q", "p").Memory("5Gi").Obj(), want: engine.FailMemory},
		"extended":      {pod: testutil.MakePod("q", "p").Request("example.com/nic", "2").Obj(), want: engine.FailExtended},
		"host port":     {pod: testutil.MakePod("q", "p").HostPort(8080).Obj(), want: engine.FailHostPort},
		"other port":    {pod: testutil.MakePod("q", "p").HostPort(9090).Obj(), want: engine.Fits},
		"extended fits": {pod: testutil.MakePod("q", "p").Request("example.com/nic", "1").Obj(), want: engine.Fits},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapWith(t, []*corev1.Node{node}, running)
			if got := engine.FitsNode(s.Node("n1"), reqOf(tc.pod), nil, false); got != tc.want {
				t.Errorf("FitsNode = %v, want %v", got, tc.want)
			}
		})
	}
	s := snapWith(t, []*corev1.Node{node}, running, testutil.MakePod("q", "r2").Queue("q").Node("n1").Obj())
	if got := engine.FitsNode(s.Node("n1"), reqOf(testutil.MakePod("q", "p").Obj()), nil, false); got != engine.FailPods {
		t.Errorf("a full node's pod count: %v, want FailPods", got)
	}
}

func TestTightestDomains(t *testing.T) {
	nodes := []*corev1.Node{
		testutil.MakeNode("a1").GPUs(8, "").Label("rack", "a").Obj(),
		testutil.MakeNode("b1").GPUs(8, "").Label("rack", "b").Obj(),
		testutil.MakeNode("b2").GPUs(8, "").Label("rack", "b").Obj(),
		testutil.MakeNode("c1").GPUs(8, "").Label("rack", "c").Obj(),
		testutil.MakeNode("x").GPUs(8, "").Obj(),
	}
	s := snapWith(t, nodes,
		testutil.MakePod("q", "used-a").Queue("q").GPU(5).Node("a1").Obj(),
		testutil.MakePod("q", "used-c").Queue("q").GPU(2).Node("c1").Obj())
	doms := s.Domains("rack")
	if diff := cmp.Diff([]string{"a", "b", "c"}, doms.Values); diff != "" {
		t.Fatalf("domains (-want +got):\n%s", diff)
	}
	names := func(idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, doms.Values[i])
		}
		return out
	}
	// Free: a 3, b 16, c 6 GPUs.
	if diff := cmp.Diff([]string{"c", "b"}, names(engine.TightestDomains(s, doms, s.AllNodes(), 4000, false))); diff != "" {
		t.Errorf("4 GPUs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "c", "b"}, names(engine.TightestDomains(s, doms, s.AllNodes(), 1000, false))); diff != "" {
		t.Errorf("1 GPU (-want +got):\n%s", diff)
	}
	if got := engine.TightestDomains(s, doms, s.AllNodes(), 17000, false); len(got) != 0 {
		t.Errorf("17 GPUs fit nowhere, got %v", names(got))
	}
}
