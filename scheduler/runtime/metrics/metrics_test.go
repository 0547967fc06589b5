package metrics

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStateMetrics(t *testing.T) {
	m := New()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.SetState(&State{
		Queues:    []QueueAmounts{{Queue: "team-a", Guaranteed: map[string]float64{"gpu": 2}, Allocated: map[string]float64{"gpu": 2.5, "memory": 1 << 30}}},
		Pending:   []Pending{{Queue: "team-b", Reason: "NoNodeFits", Pods: 3, Gangs: 1}},
		Shares:    []Share{{Node: "n1", GPUIndex: 3, GPUUUID: "GPU-3", Ratio: 0.75}},
		QueueTree: []QueueInfo{{Queue: "research"}, {Queue: "team-a", Parent: "research"}},
		NodeGPUs:  []NodeGPUs{{Node: "n1", GPUType: "H100", Whole: 4, Shared: 1, Free: 2, Unhealthy: 1}},
		PodGroups: []PodGroups{{Queue: "team-a", Framework: "ray", Kind: "ray", Phase: "Running", Count: 2}},
	})
	m.SetPods(func() []PodInfo {
		return []PodInfo{{Namespace: "team-a", Pod: "nb-0", Queue: "team-a", Kind: "notebook", Node: "n1"}}
	})
	want := `
# HELP fairway_queue_allocated What a queue's bound pods hold, per resource.
# TYPE fairway_queue_allocated gauge
fairway_queue_allocated{queue="team-a",resource="gpu"} 2.5
fairway_queue_allocated{queue="team-a",resource="memory"} 1.073741824e+09
# HELP fairway_queue_guaranteed Guaranteed quota of a queue per resource (GPUs, CPU cores, memory bytes).
# TYPE fairway_queue_guaranteed gauge
fairway_queue_guaranteed{queue="team-a",resource="gpu"} 2
# HELP fairway_pending_pods Pods waiting to be scheduled, by queue and the engine's reason code.
# TYPE fairway_pending_pods gauge
fairway_pending_pods{queue="team-b",reason="NoNodeFits"} 3
# HELP fairway_pending_gangs Gangs with pods waiting, by queue and the engine's reason code.
# TYPE fairway_pending_gangs gauge
fairway_pending_gangs{queue="team-b",reason="NoNodeFits"} 1
# HELP fairway_gpu_share_allocated Share of a GPU held by fractional pods, as a ratio from 0 to 1 (GPUs held whole are not listed); gpu_uuid is the physical GPU of the slot's reservation.
# TYPE fairway_gpu_share_allocated gauge
fairway_gpu_share_allocated{gpu_index="3",gpu_uuid="GPU-3",node="n1"} 0.75
# HELP fairway_queue_info Always 1, one series per Queue; parent is spec.parent (empty for a top-level queue).
# TYPE fairway_queue_info gauge
fairway_queue_info{parent="",queue="research"} 1
fairway_queue_info{parent="research",queue="team-a"} 1
# HELP fairway_node_gpus GPUs of a schedulable node by state (whole, shared, free, unhealthy); the states sum to the node's GPUs.
# TYPE fairway_node_gpus gauge
fairway_node_gpus{gpu_type="H100",node="n1",state="free"} 2
fairway_node_gpus{gpu_type="H100",node="n1",state="shared"} 1
fairway_node_gpus{gpu_type="H100",node="n1",state="unhealthy"} 1
fairway_node_gpus{gpu_type="H100",node="n1",state="whole"} 4
# HELP fairway_podgroups PodGroups by queue, framework (their pods' fairway.dev/framework, none when unlabelled), kind of work (their fairway.dev/workload-kind, pod when unlabelled) and status.phase.
# TYPE fairway_podgroups gauge
fairway_podgroups{framework="ray",phase="Running",queue="team-a",workload_kind="ray"} 2
# HELP fairway_pod_info Always 1, one series per bound pod fairway schedules, with its queue and kind of work (fairway.dev/workload-kind): join per-pod usage (the kubelet's pod_cpu_usage_seconds_total and pod_memory_working_set_bytes, the gpu-agents' fairway_gpu_pod_*) on namespace and pod to sum it per queue and kind.
# TYPE fairway_pod_info gauge
fairway_pod_info{namespace="team-a",node="n1",pod="nb-0",queue="team-a",workload_kind="notebook"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairway_queue_allocated", "fairway_queue_guaranteed",
		"fairway_pending_pods", "fairway_pending_gangs", "fairway_gpu_share_allocated", "fairway_queue_info", "fairway_node_gpus",
		"fairway_podgroups", "fairway_pod_info"); err != nil {
		t.Error(err)
	}
	// A queue that went away leaves no series behind; so does a pod.
	m.SetState(&State{})
	m.SetPods(func() []PodInfo { return nil })
	if n := testutil.CollectAndCount(stateCollector{m}); n != 0 {
		t.Errorf("%d state series after the state emptied", n)
	}
	m.Evictions.WithLabelValues("Reclaim", "team-b", "none", "pod").Inc()
	m.BindingErrors.WithLabelValues("Conflict").Inc()
	if n, err := testutil.GatherAndCount(reg); err != nil || n < 3 {
		t.Errorf("gathered %d series (%v)", n, err)
	}
}

// Swapped GPUs show their bytes on the host and their swapped holders, labelled as the shares
// are; swap requests count up.
func TestSwapMetrics(t *testing.T) {
	m := New()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.SetState(&State{Swapped: []Swapped{{Node: "n1", GPUIndex: 3, GPUUUID: "GPU-3", Holders: 2, Bytes: 40 << 30}}})
	m.SwapRequests.Add(2)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			labels := []string{}
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	for k, want := range map[string]string{
		"fairway_gpu_swapped_bytes{gpu_index=3,gpu_uuid=GPU-3,node=n1}": "4.294967296e+10",
		"fairway_gpu_swapped_pods{gpu_index=3,gpu_uuid=GPU-3,node=n1}":  "2",
		"fairway_swap_requests_total{}":                                 "2",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %s", k, got[k], want)
		}
	}
	m.SetState(&State{})
	if n := testutil.CollectAndCount(stateCollector{m}, "fairway_gpu_swapped_bytes", "fairway_gpu_swapped_pods"); n != 0 {
		t.Errorf("%d swap series after the swaps ended", n)
	}
}
