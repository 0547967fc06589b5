package sim

import (
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const openbData = "testdata/openb"

func names(pods []OpenBPod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestOpenBProtocol pins the protocol of the paper's experiments on a small slice: the order of
// the trace's pods, the tune-up draws and where they stop, and the two ratios and the table's
// columns.
func TestOpenBProtocol(t *testing.T) {
	trace := []OpenBPod{
		{Name: "c", NumGPU: 1, GPUMilli: 500, MilliCPU: 1000, Creation: 20},
		{Name: "a", NumGPU: 2, GPUMilli: 1000, MilliCPU: 1000, Creation: 10},
		{Name: "b", NumGPU: 0, MilliCPU: 1000, Creation: 20},
		{Name: "d", NumGPU: 1, GPUMilli: 250, MilliCPU: 1000, Creation: 5},
	}
	// Creation order, ties by name.
	if got, want := names(OpenBWorkload(trace, 4000, 0, 1, OrderCreation)), []string{"d", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("creation order %v, want %v", got, want)
	}
	// The shuffle is Go's math/rand after Seed(seed) and one Int(), over the pods sorted by name,
	// as in the paper's simulator; the same seed gives the same order.
	s1, s2 := OpenBWorkload(trace, 4000, 0, 42, OrderShuffle), OpenBWorkload(trace, 4000, 0, 42, OrderShuffle)
	if !slices.Equal(names(s1), names(s2)) {
		t.Errorf("shuffle not deterministic: %v vs %v", names(s1), names(s2))
	}
	if got := slices.Sorted(slices.Values(names(s1))); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("shuffle lost pods: %v", got)
	}
	// Tune-up: the trace asks 2750 milli-GPU; with 4000 of capacity and ratio 1.3 the target is
	// 5200. Draws are appended until the next would pass it, judged by its per-GPU milli (a
	// 2-GPU pod counts 1000 in the test, as in the paper's simulator).
	w := OpenBWorkload(trace, 4000, 1.3, 7, OrderCreation)
	if !slices.Equal(names(w[:4]), []string{"d", "a", "b", "c"}) {
		t.Fatalf("trace pods not first: %v", names(w))
	}
	var total int64
	for i, p := range w {
		if i >= 4 && !strings.Contains(p.Name, "-tuned-") {
			t.Errorf("appended pod %d is %s, want a -tuned- copy", i, p.Name)
		}
		total += p.MilliGPU()
	}
	if float64(total) > 5200+1000 || len(w) == 4 {
		t.Errorf("tuned workload asks %d milli-GPU in %d pods, want about 5200 (at most one multi-GPU pod over)", total, len(w))
	}
	// Replay on one node of 4 GPUs, 16 CPUs: d (250) and a (2 GPUs) and b (CPU) and c (500) fit.
	snap, capMilli, err := OpenBCluster([]OpenBNode{{Name: "n0", MilliCPU: 16000, MemoryMiB: 65536, GPUs: 4, Model: "T4"}})
	if err != nil {
		t.Fatal(err)
	}
	big := OpenBPod{Name: "e", NumGPU: 4, GPUMilli: 1000, MilliCPU: 1000}
	res, err := RunOpenB(snap, capMilli, append(OpenBWorkload(trace, capMilli, 0, 1, OrderCreation), big), DefaultOpenBOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{250, 2250, 2250, 2750, 6750}; !slices.Equal(res.Arrived, want) {
		t.Errorf("arrived %v, want %v", res.Arrived, want)
	}
	if want := []int64{250, 2250, 2250, 2750, 2750}; !slices.Equal(res.Allocated, want) {
		t.Errorf("allocated %v, want %v (the 4-GPU pod fails: no retry)", res.Allocated, want)
	}
	if res.Failed != 1 {
		t.Errorf("%d failed, want 1", res.Failed)
	}
	cols := res.Columns(170)
	// Samples (arrived%, alloc%): (0,0) (6.25,6.25) (56.25,56.25) x2 (68.75,68.75) (168.75,68.75).
	for x, want := range map[int]float64{0: 0, 6: 6.25, 56: 56.25, 69: 68.75, 169: 68.75, 55: 56.25} {
		if math.Abs(cols[x]-want) > 1e-9 {
			t.Errorf("column %d = %v, want %v", x, cols[x], want)
		}
	}
	if !math.IsNaN(cols[30]) {
		t.Errorf("column 30 = %v, want none (no sample within a point)", cols[30])
	}
}

// TestOpenBReplay runs the start of the default trace through the engine: it must be fast (a
// whole 10,000-pod replay takes seconds) and place everything while the cluster is far from full.
func TestOpenBReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 2,000 pods")
	}
	nodes, err := LoadOpenBNodes(filepath.Join(openbData, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadOpenBPods(filepath.Join(openbData, "openb_pod_list_default.csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 8152 || len(nodes) != 1213 {
		t.Fatalf("%d pods and %d nodes, want 8152 and 1213", len(pods), len(nodes))
	}
	snap, capMilli, err := OpenBCluster(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if capMilli != 6212000 {
		t.Fatalf("capacity %d milli-GPU, want 6212000", capMilli)
	}
	w := OpenBWorkload(pods, capMilli, 1.3, 42, OrderShuffle)
	start := time.Now()
	res, err := RunOpenB(snap, capMilli, w[:2000], DefaultOpenBOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 {
		t.Errorf("%d of the first 2000 pods failed on a cluster far from full", res.Failed)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("2000 arrivals took %v", d)
	}
	if err := snap.Verify(); err != nil {
		t.Fatal(err)
	}
	// Deterministic: the same replay again decides the same.
	snap2, _, err := OpenBCluster(nodes)
	if err != nil {
		t.Fatal(err)
	}
	res2, err := RunOpenB(snap2, capMilli, w[:2000], DefaultOpenBOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Allocated, res2.Allocated) {
		t.Error("two replays of the same workload allocate differently")
	}
	for _, n := range snap.Nodes() {
		if n2 := snap2.Node(n.Name); n2 == nil || n2.UsedMilliGPU != n.UsedMilliGPU || n2.Used.MilliCPU != n.Used.MilliCPU {
			t.Fatalf("node %s differs between two replays", n.Name)
		}
	}
}

// TestOpenBTimed pins how an openb pod list is replayed in time: queues by qos, arrivals closer
// together by the speedup with durations kept, and the tune-up to a multiple of the cluster.
func TestOpenBTimed(t *testing.T) {
	path := filepath.Join(openbData, "openb_pod_list_default.csv.gz")
	plain, err := LoadTrace(path, OpenBTimed{})
	if err != nil {
		t.Fatal(err)
	}
	o := OpenBTimed{QueueByQoS: map[string]string{"LS": "ls", "BE": "be"}, Queue: "other", Speedup: 10}
	fast, err := LoadTrace(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(fast) != len(plain) {
		t.Fatalf("%d pods, want %d", len(fast), len(plain))
	}
	queues := map[string]int{}
	for i := range fast {
		queues[fast[i].Queue]++
		if want := plain[i].Arrival / 10; fast[i].Arrival-want > time.Second || want-fast[i].Arrival > time.Second {
			t.Fatalf("pod %s arrives at %v, want %v (a tenth of %v)", fast[i].Name, fast[i].Arrival, want, plain[i].Arrival)
		}
		if fast[i].Duration != plain[i].Duration {
			t.Fatalf("pod %s runs %v, want its real %v", fast[i].Name, fast[i].Duration, plain[i].Duration)
		}
	}
	// The default trace: 4,647 LS, 3,398 BE, 107 Burstable or Guaranteed (not mapped).
	if want := map[string]int{"ls": 4647, "be": 3398, "other": 107}; !maps.Equal(queues, want) {
		t.Errorf("pods per queue %v, want %v", queues, want)
	}
	if _, err := LoadTrace(path, OpenBTimed{Tune: 1.3}); err == nil || !strings.Contains(err.Error(), "tune needs a cluster") {
		t.Errorf("tune without a cluster: %v", err)
	}
	tuned := OpenBTimed{Tune: 1.3, Seed: 42, capacityMilli: 6212000}
	pods, err := LoadTrace(path, tuned)
	if err != nil {
		t.Fatal(err)
	}
	var milli int64
	for i := range pods {
		milli += pods[i].MilliGPU()
	}
	if len(pods) <= len(plain) || milli < 8_000_000 || milli > 8_100_000+8000 {
		t.Errorf("tuned: %d pods asking %d milli-GPU, want more than %d pods and about 1.3 x 6,212,000", len(pods), milli, len(plain))
	}
}
