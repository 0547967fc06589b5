package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/metrics"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// GPUs by state sum to the node's GPUs, whether or not the node's allocatable drops a failed
// GPU (a device plugin does; kwok nodes do not).
func TestNodeGPUs(t *testing.T) {
	inventory := func(healthy ...bool) string {
		inv := v1alpha1.GPUInventory{}
		for i, h := range healthy {
			inv.GPUs = append(inv.GPUs, v1alpha1.GPUDevice{Index: int32(i), UUID: "GPU-" + string(rune('a'+i)), MemoryMiB: 81920, Healthy: h})
		}
		b, _ := json.Marshal(inv)
		return string(b)
	}
	for name, tc := range map[string]struct {
		gpus int
		inv  string
		want metrics.NodeGPUs
	}{
		"allocatable keeps the failed GPU": {gpus: 4, inv: inventory(true, true, true, false),
			want: metrics.NodeGPUs{Node: "n", GPUType: "H100", Whole: 1, Shared: 1, Free: 1, Unhealthy: 1}},
		"allocatable drops the failed GPU": {gpus: 3, inv: inventory(true, true, true, false),
			want: metrics.NodeGPUs{Node: "n", GPUType: "H100", Whole: 1, Shared: 1, Free: 1, Unhealthy: 1}},
		"no inventory": {gpus: 4,
			want: metrics.NodeGPUs{Node: "n", GPUType: "H100", Whole: 1, Shared: 1, Free: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			s := snapshot.New()
			node := testutil.MakeNode("n").GPUs(tc.gpus, "H100").Obj()
			if tc.inv != "" {
				node.Annotations[v1alpha1.GPUInventoryAnnotation] = tc.inv
			}
			if err := s.UpsertNode(node); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*testutil.PodWrapper{
				testutil.MakePod("a", "whole").Queue("q").GPU(1).Node("n").GPUIndex(0),
				testutil.MakePod("a", "share").Queue("q").Fraction("0.5").Node("n").GPUIndex(1),
			} {
				if err := s.UpsertPod(p.Obj()); err != nil {
					t.Fatal(err)
				}
			}
			if got := nodeGPUs(s.Node("n")); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fairway_pod_info lists fairway's bound, live pods of queues with their kind of work, and
// leaves out reservation pods, pods waiting for a node and pods that finished.
func TestPodInfos(t *testing.T) {
	pods := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	for _, p := range []*testutil.PodWrapper{
		testutil.MakePod("a", "nb").Queue("q").Fraction("0.5").Node("n").Annotation(v1alpha1.WorkloadKindAnnotation, "notebook"),
		testutil.MakePod("a", "train").Queue("q").GPU(1).Node("n").Annotation(v1alpha1.WorkloadKindAnnotation, "training"),
		testutil.MakePod("a", "plain").Queue("q").Node("n"),
		testutil.MakePod("a", "done").Queue("q").GPU(1).Node("n").Phase(corev1.PodSucceeded),
		testutil.MakePod("fairway-system", "resv").Reservation("n", 1, 2),
		testutil.MakePod("a", "pending").Queue("q").GPU(1),
	} {
		if err := pods.GetStore().Add(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	got := (&Runtime{inf: &cache.Informers{Pods: pods}}).podInfos()
	slices.SortFunc(got, func(a, b metrics.PodInfo) int { return strings.Compare(a.Pod, b.Pod) })
	want := []metrics.PodInfo{
		{Namespace: "a", Pod: "nb", Queue: "q", Node: "n", Kind: "notebook"},
		{Namespace: "a", Pod: "plain", Queue: "q", Node: "n", Kind: "pod"},
		{Namespace: "a", Pod: "train", Queue: "q", Node: "n", Kind: "training"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// BenchmarkPodInfos is the cost of fairway_pod_info at each scrape (on the scrape's goroutine,
// not the loop's): listing 20,000 running pods from the informer's store.
func BenchmarkPodInfos(b *testing.B) {
	pods := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	for i := range 20000 {
		p := testutil.MakePod("ns", fmt.Sprintf("p-%d", i)).Queue("q").Node(fmt.Sprintf("n-%d", i%1000)).Obj()
		if err := pods.GetStore().Add(p); err != nil {
			b.Fatal(err)
		}
	}
	r := &Runtime{inf: &cache.Informers{Pods: pods}}
	b.ReportAllocs()
	for b.Loop() {
		if got := r.podInfos(); len(got) != 20000 {
			b.Fatalf("%d pods", len(got))
		}
	}
}

// A shared GPU shows as swapped with the bytes its swapped-out holders have on the host; a loan
// on it and a holder only eligible for a swap do not count.
func TestSwappedGPUs(t *testing.T) {
	s := snapshot.New()
	if err := s.UpsertNode(testutil.MakeNode("n").GPUs(4, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	swap := func(st v1alpha1.GPUSwapState, bytes int64) string {
		return v1alpha1.FormatGPUSwap(v1alpha1.GPUSwap{State: st, Bytes: bytes, PIDs: []int{4242}})
	}
	for _, p := range []*testutil.PodWrapper{
		testutil.MakePod("a", "nb-0").Queue("q").Fraction("0.25").Node("n").GPUIndex(2).Annotation(v1alpha1.GPUSwapAnnotation, swap(v1alpha1.GPUSwappedOut, 30<<30)),
		testutil.MakePod("a", "nb-1").Queue("q").Fraction("0.25").Node("n").GPUIndex(2).Annotation(v1alpha1.GPUSwapAnnotation, swap(v1alpha1.GPUSwappedOut, 10<<30)),
		testutil.MakePod("a", "nb-2").Queue("q").Fraction("0.25").Node("n").GPUIndex(1).Annotation(v1alpha1.GPUSwapAnnotation, swap(v1alpha1.GPUSwapEligible, 10<<30)),
		testutil.MakePod("b", "loan").Queue("t").Fraction("0.9").Node("n").GPUIndex(2).Annotation(v1alpha1.LoanAnnotation, "true"),
	} {
		if err := s.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	got := swappedGPUs(s.Node("n"), nil)
	want := []metrics.Swapped{{Node: "n", GPUIndex: 2, Holders: 2, Bytes: 40 << 30}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
