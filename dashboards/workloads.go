package dashboards

// Workloads follows jobs rather than capacity: what waits and for which reason, how long pods
// take from creation to start per framework (pipelines, workflows, Ray, notebooks) and per kind
// of work (inference, notebooks, training, ...), and what was preempted or reclaimed, why, and
// from whom.
func Workloads() *Board {
	q := `queue=~"$queue"`
	qf := `{queue=~"$queue", framework=~"$framework", workload_kind=~"$kind"}`
	return &Board{
		UID:         "fairway-workloads",
		Title:       "fairway / Workloads",
		Description: "Waiting work by reason, creation-to-start latency per framework and kind of work, preemptions and reclaims.",
		Variables: []Variable{queueVariable(), {
			Kind: QueryVariable, Name: "framework", Label: "Framework", Multi: true, CheckValue: ".+",
			Query: `label_values(fairway_pod_scheduling_latency_seconds_count, framework)`,
		}, {
			Kind: QueryVariable, Name: "kind", Label: "Kind of work", Multi: true, CheckValue: ".+",
			Query: `label_values(fairway_pod_scheduling_latency_seconds_count, workload_kind)`,
		}},
		Rows: []Row{
			{Title: "Waiting", Panels: []Panel{
				{Kind: Stat, Title: "Pending pods", Targets: []Target{{Expr: `sum(fairway_pending_pods{` + q + `})`}}},
				{Kind: Stat, Title: "Pending gangs", Targets: []Target{{Expr: `sum(fairway_pending_gangs{` + q + `})`}}},
				{Kind: Stat, Title: "Evictions in range", Description: "Pods preempted, reclaimed or moved over the dashboard's time range.",
					Targets: []Target{{Expr: `sum(increase(fairway_evictions_total{` + q + `}[$__range]))`}}},
				{Kind: Stat, Title: "Median start latency", Unit: "s", Description: "Creation to binding, over the time range.",
					Targets: []Target{{Expr: `histogram_quantile(0.5, sum by (le) (increase(fairway_pod_scheduling_latency_seconds_bucket` + qf + `[$__range])))`}}},
				{Kind: TimeSeries, Title: "Pending pods by reason", Stacked: true, Description: "The engine's reason codes; `fairway why <pod>` explains one pod.",
					Targets: []Target{{Expr: `sum by (reason) (fairway_pending_pods{` + q + `})`, Legend: "{{reason}}"}}},
				{Kind: Table, Title: "Who waits and why", Description: "Now, per queue and reason.",
					Targets: []Target{
						{Expr: `sum by (queue, reason) (fairway_pending_gangs{` + q + `})`, Legend: "gangs", Instant: true},
						{Expr: `sum by (queue, reason) (fairway_pending_pods{` + q + `})`, Legend: "pods", Instant: true},
					}},
				{Kind: TimeSeries, Title: "Gangs by framework and phase", Stacked: true,
					Description: "PodGroups per framework (kubeflow-pipelines, argo, ray, jupyterhub, ...) and phase.",
					Targets:     []Target{{Expr: `sum by (framework, phase) (fairway_podgroups` + qf + `)`, Legend: "{{framework}} {{phase}}"}}},
				{Kind: TimeSeries, Title: "Gangs by kind of work and phase", Stacked: true,
					Description: "PodGroups per kind of work (inference, notebook, training, pipeline-step, workflow-step, ray, pod) and phase: the kind decides their default priority and whether they may be preempted.",
					Targets:     []Target{{Expr: `sum by (workload_kind, phase) (fairway_podgroups` + qf + `)`, Legend: "{{workload_kind}} {{phase}}"}}},
			}},
			{Title: "Creation to start", Panels: []Panel{
				{Kind: TimeSeries, Title: "Creation to start, all frameworks", Unit: "s",
					Targets: histogramQuantiles("fairway_pod_scheduling_latency_seconds", qf, "", "")},
				{Kind: TimeSeries, Title: "p90 creation to start by framework", Unit: "s",
					Targets: []Target{{Expr: `histogram_quantile(0.9, sum by (framework, le) (rate(fairway_pod_scheduling_latency_seconds_bucket` + qf + `[$__rate_interval])))`, Legend: "{{framework}}"}}},
				{Kind: TimeSeries, Title: "p90 creation to start by kind of work", Unit: "s",
					Description: "Inference replicas an autoscaler adds should start in seconds: they take GPUs from preemptible work within their queue's guarantee.",
					Targets:     []Target{{Expr: `histogram_quantile(0.9, sum by (workload_kind, le) (rate(fairway_pod_scheduling_latency_seconds_bucket` + qf + `[$__rate_interval])))`, Legend: "{{workload_kind}}"}}},
				{Kind: BarGauge, Title: "Mean wait by framework", Unit: "s", Description: "Mean creation-to-start over the time range.",
					Targets: []Target{{Expr: `sum by (framework) (increase(fairway_pod_scheduling_latency_seconds_sum` + qf + `[$__range])) / sum by (framework) (increase(fairway_pod_scheduling_latency_seconds_count` + qf + `[$__range]))`, Legend: "{{framework}}", Instant: true}}},
				{Kind: TimeSeries, Title: "Pods started by framework", Unit: "ops",
					Targets: []Target{{Expr: `sum by (framework) (rate(fairway_pod_scheduling_latency_seconds_count` + qf + `[$__rate_interval]))`, Legend: "{{framework}}"}}},
			}},
			{Title: "Preemptions and reclaims", Panels: []Panel{
				{Kind: TimeSeries, Title: "Evictions by reason", Stacked: true,
					Description: "Reclaim: borrowed capacity returns to its owner. Preempt: higher priority in the same queue. Consolidate: moved to make room for a gang. StaleGang: a gang below its minimum.",
					Targets:     []Target{{Expr: `sum by (reason) (increase(fairway_evictions_total{` + q + `}[$__rate_interval]))`, Legend: "{{reason}}"}}},
				{Kind: TimeSeries, Title: "Evictions by victim's queue", Stacked: true,
					Targets: []Target{{Expr: `sum by (queue) (increase(fairway_evictions_total{` + q + `}[$__rate_interval]))`, Legend: "{{queue}}"}}},
				{Kind: Table, Title: "Evictions in range by queue and reason",
					Targets: []Target{{Expr: `sum by (queue, reason) (increase(fairway_evictions_total{` + q + `}[$__range]))`, Legend: "evictions", Instant: true}}},
				{Kind: TimeSeries, Title: "Evictions by framework", Stacked: true,
					Targets: []Target{{Expr: `sum by (framework, reason) (increase(fairway_evictions_total` + qf + `[$__rate_interval]))`, Legend: "{{framework}} {{reason}}"}}},
				{Kind: TimeSeries, Title: "Evictions by kind of work", Stacked: true,
					Description: "Which kinds of work lose pods and why; inference and notebooks are non-preemptible by default and appear only when a queue made them preemptible.",
					Targets:     []Target{{Expr: `sum by (workload_kind, reason) (increase(fairway_evictions_total` + qf + `[$__rate_interval]))`, Legend: "{{workload_kind}} {{reason}}"}}},
			}},
		},
	}
}
