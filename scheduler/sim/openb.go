package sim

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// This file reproduces the protocol of the Alibaba "openb" GPU trace experiments of Weng et al.,
// "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
// Descent" (USENIX ATC'23), whose simulator is hkust-adsl/kubernetes-scheduler-simulator. The
// choices its code makes that a reader of the paper would not guess are matched and marked
// "paper's simulator" below; docs/simulator.md lists them.

// OpenBPod is one row of an openb_pod_list_*.csv file.
type OpenBPod struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	NumGPU    int
	GPUMilli  int64
	// GPUSpec lists the GPU models the pod may use; empty: any.
	GPUSpec  []string
	QoS      string
	Phase    string
	Creation int64
	Deletion int64
	// Scheduled is the scheduled_time column; 0 when the row has none.
	Scheduled int64
}

// MilliGPU is the pod's GPU demand: num_gpu x 1000, or gpu_milli when num_gpu is 1.
func (p *OpenBPod) MilliGPU() int64 {
	if p.NumGPU == 1 {
		return p.GPUMilli
	}
	return int64(p.NumGPU) * 1000
}

// perGPUMilli is the paper's simulator's "MilliGpu" of a pod: the share of each GPU it asks for.
func (p *OpenBPod) perGPUMilli() int64 {
	if p.NumGPU == 0 {
		return 0
	}
	if p.NumGPU == 1 {
		return p.GPUMilli
	}
	return 1000
}

// Pod turns the row into a trace pod in queue q.
func (p *OpenBPod) Pod(name, queue string) Pod {
	// Non-preemptible: the protocol has no preemption, and nothing may move a pod once placed.
	out := Pod{Name: name, Queue: queue, MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, GPUTypes: p.GPUSpec,
		Preemptibility: string(v1alpha1.NonPreemptible)}
	switch {
	case p.NumGPU == 1 && p.GPUMilli > 0 && p.GPUMilli < 1000:
		out.GPUMilli = p.GPUMilli
	case p.NumGPU > 0:
		out.GPUs = p.NumGPU
	}
	return out
}

// OpenBNode is one row of openb_node_list_*.csv.
type OpenBNode struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int
	Model     string
}

// openReader opens a file, reading through gzip when its name ends in .gz.
func openReader(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// readCSV reads a CSV file with a header into rows keyed by column name, checking that the
// required columns are there.
func readCSV(path string, required ...string) ([]map[string]string, error) {
	rc, err := openReader(path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	r := csv.NewReader(rc)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, k := range required {
		if _, ok := col[k]; !ok {
			return nil, fmt.Errorf("%s: no column %q (have %s)", path, k, strings.Join(head, ","))
		}
	}
	var rows []map[string]string
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		row := make(map[string]string, len(col))
		for k, i := range col {
			if i < len(rec) {
				row[k] = strings.TrimSpace(rec[i])
			}
		}
		row["#line"] = strconv.Itoa(line)
		rows = append(rows, row)
	}
	return rows, nil
}

func intField(path string, row map[string]string, key string, allowEmpty bool) (int64, error) {
	v := row[key]
	if v == "" && allowEmpty {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f == math.Trunc(f) {
			return int64(f), nil
		}
		return 0, fmt.Errorf("%s line %s: column %s: %q is not an integer", path, row["#line"], key, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s line %s: column %s: %d must not be negative", path, row["#line"], key, n)
	}
	return n, nil
}

// LoadOpenBNodes reads an openb node list (sn, cpu_milli, memory_mib, gpu, model).
func LoadOpenBNodes(path string) ([]OpenBNode, error) {
	rows, err := readCSV(path, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	out := make([]OpenBNode, 0, len(rows))
	for _, row := range rows {
		n := OpenBNode{Name: row["sn"], Model: row["model"]}
		var g int64
		for _, f := range []struct {
			key string
			dst *int64
		}{{"cpu_milli", &n.MilliCPU}, {"memory_mib", &n.MemoryMiB}, {"gpu", &g}} {
			if *f.dst, err = intField(path, row, f.key, false); err != nil {
				return nil, err
			}
		}
		n.GPUs = int(g)
		if n.Model == "nan" {
			n.Model = ""
		}
		out = append(out, n)
	}
	return out, nil
}

// LoadOpenBPods reads an openb pod list.
func LoadOpenBPods(path string) ([]OpenBPod, error) {
	// gpu_spec and the times are optional: the multigpu traces have neither.
	rows, err := readCSV(path, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return nil, err
	}
	out := make([]OpenBPod, 0, len(rows))
	for _, row := range rows {
		p := OpenBPod{Name: row["name"], QoS: row["qos"], Phase: row["pod_phase"]}
		var ng int64
		for _, f := range []struct {
			key   string
			dst   *int64
			empty bool
		}{{"cpu_milli", &p.MilliCPU, false}, {"memory_mib", &p.MemoryMiB, false}, {"num_gpu", &ng, false},
			{"gpu_milli", &p.GPUMilli, false}, {"creation_time", &p.Creation, true},
			{"deletion_time", &p.Deletion, true}, {"scheduled_time", &p.Scheduled, true}} {
			if *f.dst, err = intField(path, row, f.key, f.empty); err != nil {
				return nil, err
			}
		}
		p.NumGPU = int(ng)
		if p.NumGPU == 1 && (p.GPUMilli <= 0 || p.GPUMilli > 1000) {
			return nil, fmt.Errorf("%s line %s: gpu_milli %d of a 1-GPU pod must be in 1..1000", path, row["#line"], p.GPUMilli)
		}
		if s := row["gpu_spec"]; s != "" && s != "nan" {
			for _, m := range strings.Split(s, "|") {
				if m != "" && !slices.Contains(p.GPUSpec, m) {
					p.GPUSpec = append(p.GPUSpec, m)
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// OpenBOrder is how the trace's own pods are ordered before the tuned-up ones are appended.
type OpenBOrder string

const (
	// OrderShuffle sorts the pods by name and shuffles them with the seed: what the paper's
	// experiments ran (its run scripts pass --shuffle-pod=true).
	OrderShuffle OpenBOrder = "shuffle"
	// OrderCreation sorts the pods by creation_time, ties by name (stable).
	OrderCreation OpenBOrder = "creation"
)

// OpenBWorkload is the protocol's arrival sequence: the trace's pods in order, then pods drawn at
// random with replacement appended until the next would push the requested milli-GPU past
// ratio x capacity. Draws use Go's math/rand seeded with seed, in the order the paper's
// simulator makes them: one Int() (a debug log line evaluates it), the shuffle if any, then one
// Intn(len(trace)) per draw over the trace in file order. Its stop test, like the paper's
// simulator's, adds the drawn pod's per-GPU milli (1000 for a multi-GPU pod), not its total.
func OpenBWorkload(trace []OpenBPod, capacityMilli int64, ratio float64, seed int64, order OpenBOrder) []OpenBPod {
	rng := rand.New(rand.NewSource(seed))
	_ = rng.Int()
	pods := slices.Clone(trace)
	switch order {
	case OrderCreation:
		slices.SortStableFunc(pods, func(a, b OpenBPod) int {
			if a.Creation != b.Creation {
				if a.Creation < b.Creation {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
	default:
		slices.SortStableFunc(pods, func(a, b OpenBPod) int { return strings.Compare(a.Name, b.Name) })
		rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	}
	if ratio <= 0 || len(trace) == 0 {
		return pods
	}
	var total int64
	for i := range pods {
		total += pods[i].MilliGPU()
	}
	target := ratio * float64(capacityMilli)
	for i := 0; float64(total) < target; i++ {
		p := trace[rng.Intn(len(trace))]
		if float64(total+p.perGPUMilli()) > target {
			break
		}
		total += p.MilliGPU()
		p.Name = fmt.Sprintf("%s-tuned-%d", p.Name, i)
		pods = append(pods, p)
	}
	return pods
}

// OpenBResult is one openb replay.
type OpenBResult struct {
	// CapacityMilli is the cluster's milli-GPU.
	CapacityMilli int64
	// Arrived and Allocated are, after each arrival, the requested milli-GPU of the pods arrived
	// so far and the milli-GPU allocated on the cluster.
	Arrived, Allocated []int64
	// Failed counts the pods no node could take.
	Failed int
	// Elapsed is the wall time of the replay.
	Elapsed time.Duration
}

// Columns are the paper's table: for arrived ratio x = 0..maxPct (%), the mean allocation ratio
// (%) of the samples whose arrived ratio rounds to x, each rounded to 2 decimals as its analysis
// script does (Python's round, halves to even); where no sample rounds to x, the samples within
// one point. Its first sample is the empty cluster, before any arrival. NaN where there is none.
func (r *OpenBResult) Columns(maxPct int) []float64 {
	cap := float64(r.CapacityMilli)
	arr := append([]int64{0}, r.Arrived...)
	alloc := append([]int64{0}, r.Allocated...)
	ratios := make([]float64, len(arr))
	allocs := make([]float64, len(arr))
	for i := range arr {
		ratios[i] = math.RoundToEven(float64(arr[i]) / cap * 100)
		allocs[i] = math.RoundToEven(float64(alloc[i])/cap*100*100) / 100
	}
	out := make([]float64, maxPct+1)
	for x := 0; x <= maxPct; x++ {
		mean := func(lo, hi float64) (float64, bool) {
			var s float64
			n := 0
			for i, a := range ratios {
				if a >= lo && a <= hi {
					s += allocs[i]
					n++
				}
			}
			return s / float64(max(n, 1)), n > 0
		}
		v, ok := mean(float64(x), float64(x))
		if !ok {
			v, ok = mean(float64(x-1), float64(x+1))
		}
		if !ok {
			v = math.NaN()
		}
		out[x] = math.RoundToEven(v*100) / 100
	}
	return out
}

// OpenBCluster builds the snapshot of an openb node list: one node per row, GPU type = model,
// one queue "openb" without quota that every pod goes to.
func OpenBCluster(nodes []OpenBNode) (*snapshot.Snapshot, int64, error) {
	snap := snapshot.New()
	var capMilli, cpu, mem int64
	for i := range nodes {
		cpu += nodes[i].MilliCPU
		mem += nodes[i].MemoryMiB
		n := Node{Name: nodes[i].Name, MilliCPU: nodes[i].MilliCPU, MemoryMiB: nodes[i].MemoryMiB, GPUs: nodes[i].GPUs, GPUType: nodes[i].Model}
		if err := snap.UpsertNode(n.Object()); err != nil {
			return nil, 0, fmt.Errorf("node %s: %w", n.Name, err)
		}
		capMilli += int64(n.GPUs) * 1000
	}
	// The queue is guaranteed the whole cluster: its pods are non-preemptible, which run only
	// within guaranteed quota.
	q := QueueObject(OpenBQueue)
	q.Spec.Resources.GPU = &v1alpha1.ResourceQuota{Quota: resource.NewQuantity(capMilli/1000, resource.DecimalSI)}
	q.Spec.Resources.CPU = &v1alpha1.ResourceQuota{Quota: resource.NewMilliQuantity(cpu, resource.DecimalSI)}
	q.Spec.Resources.Memory = &v1alpha1.ResourceQuota{Quota: resource.NewQuantity(mem<<20, resource.BinarySI)}
	if err := snap.UpsertQueue(q); err != nil {
		return nil, 0, err
	}
	return snap, capMilli, nil
}

// OpenBQueue is the one queue of an openb replay.
const OpenBQueue = "openb"

// RunOpenB replays the arrival sequence on the cluster through the engine: one pod arrives, one
// cycle runs, the pod is bound where the engine put it or, if it fits nowhere, fails and is
// dropped (no preemption, no retry); pods never leave. progress, when set, is called every 1000
// arrivals.
func RunOpenB(snap *snapshot.Snapshot, capMilli int64, pods []OpenBPod, opts engine.Options, progress func(done, total int)) (*OpenBResult, error) {
	start := time.Now()
	eng := engine.New(opts)
	res := &OpenBResult{CapacityMilli: capMilli, Arrived: make([]int64, 0, len(pods)), Allocated: make([]int64, 0, len(pods))}
	now := simEpoch
	var arrived, allocated int64
	b := binder{snap: snap}
	for i := range pods {
		p := pods[i].Pod(fmt.Sprintf("p%05d-%s", i, pods[i].Name), OpenBQueue)
		obj := p.Object(now)
		if err := snap.UpsertPod(obj); err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		arrived += pods[i].MilliGPU()
		out := eng.Schedule(snap, now)
		bound := false
		for _, bd := range out.Bindings {
			m, err := b.bind(obj, bd, now)
			if err != nil {
				return nil, err
			}
			allocated += m
			bound = true
		}
		if !bound {
			res.Failed++
			snap.DeletePod(keyOf(obj))
		}
		res.Arrived = append(res.Arrived, arrived)
		res.Allocated = append(res.Allocated, allocated)
		now = now.Add(time.Second)
		if progress != nil && (i+1)%1000 == 0 {
			progress(i+1, len(pods))
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// DefaultOpenBOptions are the scheduler's engine options as its runtime sets them: the defaults
// (bin-packing, fragmentation-aware where pods ask for shares), with shares only on nodes that
// publish a GPU inventory (every simulated GPU node does).
func DefaultOpenBOptions() engine.Options {
	o := engine.DefaultOptions()
	o.SharesNeedInventory = true
	return o
}
