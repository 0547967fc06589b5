package dashboards

import "fmt"

// ProjectResources is the CPU, memory and GPU history per project that the admin dashboard of
// the seeds asks for: what each project's pods held (allocated), asked for including waiting
// pods (requested), against its guarantee and fair share; and what they really used: GPU from
// the gpu-agents, CPU and memory from the kubelets' resource metrics, per project and per kind of
// work, with the GPU-hours held but idle (where lending or smaller shares would pay).
func ProjectResources() *Board {
	row := func(title, resource, unit, used string) Row {
		sel := `{queue=~"$queue", resource="` + resource + `"}`
		return Row{Title: title, Panels: []Panel{
			{Kind: TimeSeries, Title: title + " allocated per project", Unit: unit, Stacked: true,
				Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated`+sel) + `)`, Legend: "{{queue}}"}}},
			{Kind: TimeSeries, Title: title + " requested per project", Unit: unit, Description: "Allocated plus what waiting pods ask for.",
				Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_requested`+sel) + `)`, Legend: "{{queue}}"}}},
			{Kind: TimeSeries, Title: title + " of $queue", Unit: unit, Repeat: "queue", Width: 8,
				Description: "Used (measured on the nodes; projects only: a department's pods are its projects') against allocated (what its pods hold), guaranteed and fair share.",
				Targets: []Target{
					{Expr: `sum(` + used + `)`, Legend: "used"},
					{Expr: `sum(fairway_queue_allocated` + sel + `)`, Legend: "allocated"},
					{Expr: `sum(fairway_queue_guaranteed` + sel + `)`, Legend: "guaranteed"},
					{Expr: `sum(fairway_queue_fair_share` + sel + `)`, Legend: "fair share"},
				}},
		}}
	}
	gpu := row("GPU", "gpu", "short", gpuUsed)
	gpu.Panels = append(gpu.Panels,
		Panel{Kind: TimeSeries, Title: "GPU memory used per project", Unit: "bytes", Description: "Measured by the gpu-agents.",
			Targets: []Target{{Expr: `sum by (queue) (fairway_gpu_pod_memory_used_bytes{queue=~"$queue"})`, Legend: "{{queue}}"}}},
		Panel{Kind: TimeSeries, Title: "GPU utilization per project", Description: "Sum of the project's pods' GPU utilization, in busy GPUs.",
			Targets: []Target{{Expr: `sum by (queue) (` + gpuUsed + `)`, Legend: "{{queue}}"}}},
	)
	allocGPU := `sum by (queue) (` + leaves(`fairway_queue_allocated{queue=~"$queue", resource="gpu"}`) + `)`
	// GPUs a project holds and does not keep busy; a project with GPUs and no measured use (no
	// gpu-agent sample yet, or pods that never touched their GPU) counts all of them.
	idle := fmt.Sprintf(`clamp_min(%s - (sum by (queue) (%s) or %s * 0), 0)`, allocGPU, gpuUsed, allocGPU)
	usage := Row{Title: "Used vs allocated", Panels: []Panel{
		{Kind: Table, Title: "Used, allocated and guaranteed now", Width: 24,
			Description: "Per project: GPUs (used: busy GPUs by the gpu-agents), CPU cores and memory bytes (used: the kubelets' resource metrics).",
			Targets: []Target{
				{Expr: `sum by (queue) (` + gpuUsed + `)`, Legend: "GPU used", Instant: true},
				{Expr: allocGPU, Legend: "GPU allocated", Instant: true},
				{Expr: `sum by (queue) (` + leaves(`fairway_queue_guaranteed{queue=~"$queue", resource="gpu"}`) + `)`, Legend: "GPU guaranteed", Instant: true},
				{Expr: `sum by (queue) (` + cpuUsed + `)`, Legend: "CPU used", Instant: true},
				{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated{queue=~"$queue", resource="cpu"}`) + `)`, Legend: "CPU allocated", Instant: true},
				{Expr: `sum by (queue) (` + memoryUsed + `)`, Legend: "memory used", Instant: true},
				{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated{queue=~"$queue", resource="memory"}`) + `)`, Legend: "memory allocated", Instant: true},
			}},
		{Kind: TimeSeries, Title: "CPU used per project", Unit: "short", Stacked: true, Description: "CPU cores, from the kubelets' resource metrics.",
			Targets: []Target{{Expr: `sum by (queue) (` + cpuUsed + `)`, Legend: "{{queue}}"}}},
		{Kind: TimeSeries, Title: "Memory used per project", Unit: "bytes", Stacked: true, Description: "Working set, from the kubelets' resource metrics.",
			Targets: []Target{{Expr: `sum by (queue) (` + memoryUsed + `)`, Legend: "{{queue}}"}}},
		{Kind: TimeSeries, Title: "GPU used per project and kind of work", Description: "Busy GPUs, by the project's pods' kind (notebook, training, pipeline-step, ...).",
			Targets: []Target{{Expr: `sum by (queue, workload_kind) (` + gpuUsed + kindJoin + `)`, Legend: "{{queue}} {{workload_kind}}"}}},
		{Kind: TimeSeries, Title: "CPU used per project and kind of work", Unit: "short",
			Targets: []Target{{Expr: `sum by (queue, workload_kind) (` + cpuUsed + `)`, Legend: "{{queue}} {{workload_kind}}"}}},
		{Kind: TimeSeries, Title: "Memory used per project and kind of work", Unit: "bytes",
			Targets: []Target{{Expr: `sum by (queue, workload_kind) (` + memoryUsed + `)`, Legend: "{{queue}} {{workload_kind}}"}}},
		{Kind: TimeSeries, Title: "GPU memory used per project and kind of work", Unit: "bytes",
			Targets: []Target{{Expr: `sum by (queue, workload_kind) (fairway_gpu_pod_memory_used_bytes{queue=~"$queue"}` + kindJoin + `)`, Legend: "{{queue}} {{workload_kind}}"}}},
		{Kind: TimeSeries, Title: "Idle allocated GPUs per project", Stacked: true,
			Description: "GPUs a project holds minus those it keeps busy: where lending idle GPUs or smaller shares would pay.",
			Targets:     []Target{{Expr: idle, Legend: "{{queue}}"}}},
		{Kind: BarGauge, Title: "Idle allocated GPU-hours per project", Unit: "short",
			Description: "Over the dashboard's time range: GPU-hours held and not kept busy (the idle GPUs sampled every $__interval, each sample counting for that long).",
			Targets:     []Target{{Expr: `sum_over_time(` + idle + `[$__range:$__interval]) * $__interval_ms / 3600000`, Legend: "{{queue}}", Instant: true}}},
	}}
	return &Board{
		UID:         "fairway-project-resources",
		Title:       "fairway / Project resources",
		Description: "CPU, memory and GPU history per project: used, allocated, requested, guaranteed, fair share, and the GPU-hours held idle.",
		Variables:   []Variable{queueVariable()},
		Rows:        []Row{row("CPU", "cpu", "short", cpuUsed), row("Memory", "memory", "bytes", memoryUsed), gpu, usage},
	}
}

// kindJoin gives a per-pod series of the gpu-agents the pod's kind of work, from the scheduler's
// fairway_pod_info (the agents label pods with their queue only).
const kindJoin = ` * on(namespace, pod) group_left(workload_kind) fairway_pod_info`

// Usage per pod of the selected projects. The kubelets' resource metrics carry namespace and pod
// only: the scheduler's fairway_pod_info gives each pod its queue and kind of work. The
// gpu-agents label their pod series with the queue themselves.
const (
	gpuUsed    = `fairway_gpu_pod_utilization_ratio{queue=~"$queue"}`
	cpuUsed    = `rate(pod_cpu_usage_seconds_total[$__rate_interval]) * on(namespace, pod) group_left(queue, workload_kind) fairway_pod_info{queue=~"$queue"}`
	memoryUsed = `pod_memory_working_set_bytes * on(namespace, pod) group_left(queue, workload_kind) fairway_pod_info{queue=~"$queue"}`
)
