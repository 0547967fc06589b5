package dashboards

// ProjectResources is the CPU, memory and GPU history per project that the admin dashboard of
// the seeds asks for: what each project's pods held (allocated), asked for including waiting
// pods (requested), against its guarantee and fair share; and, for GPUs, what the pods really
// used according to the gpu-agents.
func ProjectResources() *Board {
	row := func(title, resource, unit string) Row {
		sel := `{queue=~"$queue", resource="` + resource + `"}`
		return Row{Title: title, Panels: []Panel{
			{Kind: TimeSeries, Title: title + " allocated per project", Unit: unit, Stacked: true,
				Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated`+sel) + `)`, Legend: "{{queue}}"}}},
			{Kind: TimeSeries, Title: title + " requested per project", Unit: unit, Description: "Allocated plus what waiting pods ask for.",
				Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_requested`+sel) + `)`, Legend: "{{queue}}"}}},
			{Kind: TimeSeries, Title: title + " of $queue", Unit: unit, Repeat: "queue", Width: 8,
				Targets: []Target{
					{Expr: `sum(fairway_queue_allocated` + sel + `)`, Legend: "allocated"},
					{Expr: `sum(fairway_queue_guaranteed` + sel + `)`, Legend: "guaranteed"},
					{Expr: `sum(fairway_queue_fair_share` + sel + `)`, Legend: "fair share"},
				}},
		}}
	}
	gpu := row("GPU", "gpu", "short")
	gpu.Panels = append(gpu.Panels,
		Panel{Kind: TimeSeries, Title: "GPU memory used per project", Unit: "bytes", Description: "Measured by the gpu-agents.",
			Targets: []Target{{Expr: `sum by (queue) (fairway_gpu_pod_memory_used_bytes{queue=~"$queue"})`, Legend: "{{queue}}"}}},
		Panel{Kind: TimeSeries, Title: "GPU utilization per project", Description: "Sum of the project's pods' GPU utilization, in busy GPUs.",
			Targets: []Target{{Expr: `sum by (queue) (fairway_gpu_pod_utilization_ratio{queue=~"$queue"})`, Legend: "{{queue}}"}}},
	)
	return &Board{
		UID:         "fairway-project-resources",
		Title:       "fairway / Project resources",
		Description: "CPU, memory and GPU history per project: allocated, requested, guaranteed, fair share, and GPU use.",
		Variables:   []Variable{queueVariable()},
		Rows:        []Row{row("CPU", "cpu", "short"), row("Memory", "memory", "bytes"), gpu},
	}
}
