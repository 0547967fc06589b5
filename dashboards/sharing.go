package dashboards

// GPUSharing shows fractional GPUs: how much of each shared GPU the scheduler handed out, how
// much memory and compute each pod on it really uses (from the gpu-agents), which interactive
// sessions sit idle on a GPU share, and which have their memory swapped to host RAM.
func GPUSharing() *Board {
	n := `node=~"$node"`
	nq := `{node=~"$node", queue=~"$queue"}`
	podKey := "node, gpu_uuid, namespace, pod, queue"
	return &Board{
		UID:         "fairway-gpu-sharing",
		Title:       "fairway / GPU sharing",
		Description: "Shares allocated per GPU, per-pod GPU memory and utilization, idle interactive sessions, swap.",
		Variables:   []Variable{nodeVariable(), queueVariable()},
		Rows: []Row{
			{Title: "Shares", Panels: []Panel{
				{Kind: Stat, Title: "Shared GPUs", Targets: []Target{{Expr: `count(fairway_gpu_share_allocated{` + n + `})`}}},
				{Kind: Stat, Title: "Mean fill of shared GPUs", Unit: "percentunit", Description: "How much of a shared GPU its fractional pods hold, on average.",
					Targets: []Target{{Expr: `avg(fairway_gpu_share_allocated{` + n + `})`}}},
				{Kind: Stat, Title: "Pods on GPUs", Description: "Pods with processes on a GPU, as the gpu-agents see them.",
					Targets: []Target{{Expr: `count(count by (namespace, pod) (fairway_gpu_pod_processes` + nq + `))`}}},
				{Kind: Stat, Title: "Idle interactive sessions", Description: "Notebooks and other interactive pods idle on their GPU (condition fairway.dev/GPUIdle).",
					Targets: []Target{{Expr: `sum(fairway_gpu_pod_idle` + nq + `)`}}},
				{Kind: Table, Title: "Shares allocated per GPU", Unit: "percentunit",
					Description: "gpu_index is the scheduler's slot on the node; the physical GPU is the one the slot's reservation pod got.",
					Targets:     []Target{{Expr: `sum by (node, gpu_index) (fairway_gpu_share_allocated{` + n + `})`, Legend: "allocated", Instant: true}}},
				{Kind: TimeSeries, Title: "Share allocated per GPU over time", Unit: "percentunit",
					Targets: []Target{{Expr: `sum by (node, gpu_index) (fairway_gpu_share_allocated{` + n + `})`, Legend: "{{node}} GPU {{gpu_index}}"}}},
				{Kind: Table, Title: "Allocated vs used per shared GPU", Width: 24,
					Description: "Per physical GPU: the share the scheduler handed out, the utilization and the memory share its pods use.",
					Targets: []Target{
						{Expr: `sum by (node, gpu_uuid) (fairway_gpu_share_allocated{` + n + `, gpu_uuid!=""})`, Legend: "allocated", Instant: true},
						{Expr: `sum by (node, gpu_uuid) (fairway_gpu_pod_utilization_ratio` + nq + `)`, Legend: "utilization", Instant: true},
						{Expr: `sum by (node, gpu_uuid) (fairway_gpu_pod_memory_used_bytes` + nq + `) / on(node, gpu_uuid) max by (node, gpu_uuid) (fairway_gpu_memory_total_bytes{` + n + `})`, Legend: "memory", Instant: true},
					}},
			}},
			{Title: "Per pod", Panels: []Panel{
				{Kind: Table, Title: "Pods on GPUs now", Width: 24, Description: "GPU memory (GiB), utilization (0-1) and idleness (1: idle) per pod and GPU.",
					Targets: []Target{
						{Expr: `sum by (` + podKey + `) (fairway_gpu_pod_memory_used_bytes` + nq + `) / 1073741824`, Legend: "memory GiB", Instant: true},
						{Expr: `sum by (` + podKey + `) (fairway_gpu_pod_utilization_ratio` + nq + `)`, Legend: "utilization", Instant: true},
						{Expr: `max by (` + podKey + `) (fairway_gpu_pod_idle` + nq + `)`, Legend: "idle", Instant: true, Optional: true},
					}},
				{Kind: TimeSeries, Title: "GPU memory per pod", Unit: "bytes",
					Targets: []Target{{Expr: `sum by (namespace, pod) (fairway_gpu_pod_memory_used_bytes` + nq + `)`, Legend: "{{namespace}}/{{pod}}"}}},
				{Kind: TimeSeries, Title: "GPU utilization per pod", Unit: "percentunit",
					Targets: []Target{{Expr: `sum by (namespace, pod) (fairway_gpu_pod_utilization_ratio` + nq + `)`, Legend: "{{namespace}}/{{pod}}"}}},
				{Kind: TimeSeries, Title: "GPU utilization per GPU", Unit: "percentunit",
					Targets: []Target{{Expr: `avg by (node, gpu_index) (fairway_gpu_utilization_ratio{` + n + `})`, Legend: "{{node}} GPU {{gpu_index}}"}}},
			}},
			{Title: "Interactive sessions", Panels: []Panel{
				{Kind: Table, Title: "Idle sessions now", Description: "Interactive pods idle on their GPU: their share can be lent to waiting training.",
					Targets: []Target{{Expr: `max by (namespace, pod, queue, node) (fairway_gpu_pod_idle` + nq + `) == 1`, Legend: "idle", Instant: true}}},
				{Kind: TimeSeries, Title: "Interactive sessions idle vs working", Stacked: true,
					Targets: []Target{
						{Expr: `sum(fairway_gpu_pod_idle` + nq + `)`, Legend: "idle"},
						{Expr: `count(fairway_gpu_pod_idle` + nq + `) - sum(fairway_gpu_pod_idle` + nq + `)`, Legend: "working"},
					}},
				{Kind: TimeSeries, Title: "GPU memory held by idle sessions", Unit: "bytes",
					Targets: []Target{{Expr: `sum by (namespace, pod) (fairway_gpu_pod_memory_used_bytes` + nq + ` and on(node, gpu_uuid, namespace, pod) (fairway_gpu_pod_idle == 1))`, Legend: "{{namespace}}/{{pod}}"}}},
			}},
			swapRow(n, nq),
		},
	}
}

// swapRow shows swap (docs/idle-lending.md#swap): the GPUs lent in full while their idle
// sessions' memory is on host RAM (the scheduler's view), which sessions and how much (the
// gpu-agents'), how long moving it takes each way, and how often the scheduler asks.
func swapRow(n, nq string) Row {
	latency := append(histogramQuantiles("fairway_gpu_swap_out_seconds", `{`+n+`}`, "", "out "),
		histogramQuantiles("fairway_gpu_swap_in_seconds", `{`+n+`}`, "", "in ")...)
	return Row{Title: "Swap", Panels: []Panel{
		{Kind: Stat, Title: "Swapped GPUs", Description: "Shared GPUs lent in full while their idle sessions' GPU memory is on host RAM, as the scheduler sees them.",
			Targets: []Target{{Expr: `count(fairway_gpu_swapped_pods{` + n + `})`}}},
		{Kind: Stat, Title: "GPU memory on host RAM", Unit: "bytes", Description: "Idle sessions' GPU memory the gpu-agents moved to host RAM.",
			Targets: []Target{{Expr: `sum(fairway_gpu_pod_swapped_bytes` + nq + `)`}}},
		{Kind: Table, Title: "Swapped sessions now", Unit: "bytes", Description: "Each idle session whose GPU memory is on host RAM, with its bytes; it comes back at the session's next work.",
			Targets: []Target{{Expr: `sum by (node, gpu_index, namespace, pod, queue) (fairway_gpu_pod_swapped_bytes` + nq + `)`, Legend: "swapped", Instant: true}}},
		{Kind: TimeSeries, Title: "Swapped GPU memory per GPU", Unit: "bytes", Description: "What the scheduler lends beyond each GPU's free memory: its holders' bytes on host RAM (gpu_index is the scheduler's slot).",
			Targets: []Target{{Expr: `sum by (node, gpu_index) (fairway_gpu_swapped_bytes{` + n + `})`, Legend: "{{node}} GPU {{gpu_index}}"}}},
		{Kind: TimeSeries, Title: "Swap latency", Unit: "s", Description: "Swap-out: lock and checkpoint of an idle session's processes. Swap-in: from its first sign of work to its memory restored, loans' return included.",
			Targets: latency},
		{Kind: TimeSeries, Title: "Swap requests and failures", Description: "Swaps the scheduler asked of the gpu-agents, and swaps refused or failed by stage (check, lock, checkpoint, restore).",
			Targets: []Target{
				{Expr: `sum(increase(fairway_swap_requests_total[$__rate_interval]))`, Legend: "requests"},
				{Expr: `sum by (stage) (increase(fairway_gpu_swap_failures_total{` + n + `}[$__rate_interval]))`, Legend: "failed: {{stage}}", Optional: true},
			}},
	}}
}
