package metrics

import (
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
		Queues:  []QueueAmounts{{Queue: "team-a", Guaranteed: map[string]float64{"gpu": 2}, Allocated: map[string]float64{"gpu": 2.5, "memory": 1 << 30}}},
		Pending: []Pending{{Queue: "team-b", Reason: "NoNodeFits", Pods: 3, Gangs: 1}},
		Shares:  []Share{{Node: "n1", GPUIndex: 3, Ratio: 0.75}},
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
# HELP fairway_gpu_share_allocated Share of a GPU held by fractional pods, as a ratio from 0 to 1 (GPUs held whole are not listed).
# TYPE fairway_gpu_share_allocated gauge
fairway_gpu_share_allocated{gpu_index="3",node="n1"} 0.75
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairway_queue_allocated", "fairway_queue_guaranteed",
		"fairway_pending_pods", "fairway_pending_gangs", "fairway_gpu_share_allocated"); err != nil {
		t.Error(err)
	}
	// A queue that went away leaves no series behind.
	m.SetState(&State{})
	if n := testutil.CollectAndCount(stateCollector{m}); n != 0 {
		t.Errorf("%d state series after the state emptied", n)
	}
	m.Evictions.WithLabelValues("Reclaim", "team-b").Inc()
	m.BindingErrors.WithLabelValues("Conflict").Inc()
	if n, err := testutil.GatherAndCount(reg); err != nil || n < 3 {
		t.Errorf("gathered %d series (%v)", n, err)
	}
}
