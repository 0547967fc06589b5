package dashboards

// Cluster is the administrator's first look: how many GPUs of each type (node pool) there are,
// how many are held whole, shared by fractional pods, idle or broken, how busy they really are,
// and whether the scheduler keeps up (waiting pods, cycle and scheduling latency).
func Cluster() *Board {
	gpus := func(state string) string {
		sel := `gpu_type=~"$gpu_type"`
		if state != "" {
			sel += `, state=~"` + state + `"`
		}
		return `sum(fairway_node_gpus{` + sel + `})`
	}
	return &Board{
		UID:         "fairway-cluster",
		Title:       "fairway / Cluster",
		Description: "GPUs by type and node pool, their use, and the scheduler's health.",
		Variables: []Variable{{
			Kind: QueryVariable, Name: "gpu_type", Label: "GPU type (node pool)", Multi: true, CheckValue: ".+",
			Query: `label_values(fairway_node_gpus, gpu_type)`,
		}},
		Rows: []Row{
			{Title: "GPU capacity", Panels: []Panel{
				{Kind: Stat, Title: "GPUs", Description: "GPUs of the selected types on schedulable nodes.",
					Targets: []Target{{Expr: gpus("")}}},
				{Kind: Stat, Title: "Held whole", Description: "GPUs held whole by pods.",
					Targets: []Target{{Expr: gpus("whole")}}},
				{Kind: Stat, Title: "Shared", Description: "GPUs shared by fractional pods (each held by a reservation pod).",
					Targets: []Target{{Expr: gpus("shared")}}},
				{Kind: Stat, Title: "Idle", Description: "Healthy GPUs no pod holds.",
					Targets: []Target{{Expr: gpus("free")}}},
				{Kind: Stat, Title: "Unhealthy", Description: "GPUs the gpu-agents report lost or failing.",
					Targets: []Target{{Expr: `sum(1 - fairway_gpu_healthy)`}}},
				{Kind: Stat, Title: "GPU utilization", Unit: "percentunit", Description: "Mean utilization of all GPUs, as NVML reports it.",
					Targets: []Target{{Expr: `avg(fairway_gpu_utilization_ratio)`}}},
				{Kind: TimeSeries, Title: "GPUs by type and state", Stacked: true,
					Description: "whole: held whole by pods; shared: shared by fractional pods; free: idle; unhealthy: lost or failing.",
					Targets:     []Target{{Expr: `sum by (gpu_type, state) (fairway_node_gpus{gpu_type=~"$gpu_type"})`, Legend: "{{gpu_type}} {{state}}"}}},
				{Kind: Table, Title: "GPUs per node pool", Description: "Now, per GPU type: total, held whole, shared, idle.",
					Targets: []Target{
						{Expr: `sum by (gpu_type) (fairway_node_gpus{gpu_type=~"$gpu_type"})`, Legend: "total", Instant: true},
						{Expr: `sum by (gpu_type) (fairway_node_gpus{gpu_type=~"$gpu_type", state="whole"})`, Legend: "whole", Instant: true},
						{Expr: `sum by (gpu_type) (fairway_node_gpus{gpu_type=~"$gpu_type", state="shared"})`, Legend: "shared", Instant: true},
						{Expr: `sum by (gpu_type) (fairway_node_gpus{gpu_type=~"$gpu_type", state="free"})`, Legend: "free", Instant: true},
					}},
				{Kind: TimeSeries, Title: "GPUs by model (gpu-agents)", Description: "What the gpu-agents find on the nodes, by NVML product name.",
					Targets: []Target{
						{Expr: `count by (model) (fairway_gpu_info)`, Legend: "{{model}} total"},
						{Expr: `sum by (model) (fairway_gpu_healthy)`, Legend: "{{model}} healthy"},
					}},
				{Kind: TimeSeries, Title: "GPUs held by project", Stacked: true, Description: "GPUs (whole, and shares of GPUs) each leaf queue's pods hold.",
					Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated{resource="gpu"}`) + `)`, Legend: "{{queue}}"}}},
			}},
			{Title: "Utilization", Panels: []Panel{
				{Kind: TimeSeries, Title: "GPU utilization by node", Unit: "percentunit",
					Targets: []Target{{Expr: `avg by (node) (fairway_gpu_utilization_ratio)`, Legend: "{{node}}"}}},
				{Kind: TimeSeries, Title: "GPU memory in use by node", Unit: "percentunit",
					Targets: []Target{{Expr: `sum by (node) (fairway_gpu_memory_used_bytes) / sum by (node) (fairway_gpu_memory_total_bytes)`, Legend: "{{node}}"}}},
				{Kind: TimeSeries, Title: "Allocated vs busy GPUs",
					Description: "Allocated: GPUs held whole or shared. Busy: the sum of every GPU's utilization, in GPUs. The gap is what idle holders waste.",
					Targets: []Target{
						{Expr: gpus("whole|shared"), Legend: "allocated"},
						{Expr: `sum(fairway_gpu_utilization_ratio)`, Legend: "busy"},
					}},
				{Kind: TimeSeries, Title: "gpu-agents", Description: "Nodes whose agent reaches NVML, and nodes running MPS (hard memory limits for fractions).",
					Targets: []Target{
						{Expr: `sum(fairway_gpu_nvml_up)`, Legend: "NVML up"},
						{Expr: `count(fairway_gpu_nvml_up)`, Legend: "agents"},
						{Expr: `sum(fairway_gpu_mps_enabled)`, Legend: "MPS"},
					}},
			}},
			{Title: "Scheduler", Panels: []Panel{
				{Kind: Stat, Title: "Pending pods", Targets: []Target{{Expr: `sum(fairway_pending_pods)`}}},
				{Kind: Stat, Title: "Pending gangs", Targets: []Target{{Expr: `sum(fairway_pending_gangs)`}}},
				{Kind: Stat, Title: "Scheduling leader", Description: "Replicas that hold the leader lease: 1 when healthy.",
					Targets: []Target{{Expr: `sum(fairway_leader)`}}},
				{Kind: TimeSeries, Title: "Pending pods by reason", Stacked: true, Description: "The engine's reason codes; `fairway why` explains each.",
					Targets: []Target{{Expr: `sum by (reason) (fairway_pending_pods)`, Legend: "{{reason}}"}}},
				{Kind: TimeSeries, Title: "Scheduling cycle duration", Unit: "s",
					Targets: histogramQuantiles("fairway_cycle_duration_seconds", "", "", "")},
				{Kind: TimeSeries, Title: "Pod scheduling latency", Unit: "s", Description: "From a pod's creation to its binding.",
					Targets: histogramQuantiles("fairway_pod_scheduling_latency_seconds", "", "", "")},
				{Kind: TimeSeries, Title: "Bindings", Unit: "ops", Description: "Pods bound per second, and bindings given up by reason.",
					Targets: []Target{
						{Expr: `sum(rate(fairway_bindings_total[$__rate_interval]))`, Legend: "bound"},
						{Expr: `sum by (reason) (rate(fairway_binding_errors_total[$__rate_interval]))`, Legend: "failed: {{reason}}", Optional: true},
					}},
			}},
		},
	}
}
