package catalog

// Requested lists what the dashboards use and no component in this tree exports yet, with the
// component asked for it. An entry goes when its component exports it (a test enforces that).
func Requested() []Request {
	queueRes := []string{"queue", "resource"}
	return []Request{
		// The scheduler runtime's metrics as built on the runtime branch
		// (scheduler/runtime/metrics); they move to Sources when it merges.
		{Name: "fairway_queue_guaranteed", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "Guaranteed quota of a queue per resource (gpu, cpu, memory, gpu/<type>)."},
		{Name: "fairway_queue_fair_share", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "Fair share of a queue per resource, as of the last cycle."},
		{Name: "fairway_queue_allocated", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "What a queue's bound pods hold, per resource."},
		{Name: "fairway_queue_allocated_nonpreemptible", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "The non-preemptible part of fairway_queue_allocated."},
		{Name: "fairway_queue_requested", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "Allocated plus what a queue's waiting pods ask for."},
		{Name: "fairway_queue_borrowed", Type: "gauge", Labels: queueRes, Component: "scheduler", Meaning: "Allocated above the guaranteed quota."},
		{Name: "fairway_pending_pods", Type: "gauge", Labels: []string{"queue", "reason"}, Component: "scheduler", Meaning: "Waiting pods by queue and the engine's reason code."},
		{Name: "fairway_pending_gangs", Type: "gauge", Labels: []string{"queue", "reason"}, Component: "scheduler", Meaning: "Waiting gangs by queue and reason code."},
		{Name: "fairway_gpu_share_allocated", Type: "gauge", Labels: []string{"node", "gpu_index"}, Component: "scheduler", Meaning: "Share of a GPU slot held by fractional pods, 0-1."},
		{Name: "fairway_cycle_duration_seconds", Type: "histogram", Component: "scheduler", Meaning: "Duration of a scheduling cycle."},
		{Name: "fairway_pod_scheduling_latency_seconds", Type: "histogram", Labels: []string{"framework", "queue"}, Component: "scheduler", Meaning: "Pod creation to binding."},
		{Name: "fairway_bindings_total", Type: "counter", Component: "scheduler", Meaning: "Pods bound."},
		{Name: "fairway_binding_errors_total", Type: "counter", Labels: []string{"reason"}, Component: "scheduler", Meaning: "Bindings given up, by reason."},
		{Name: "fairway_evictions_total", Type: "counter", Labels: []string{"reason", "queue"}, Component: "scheduler", Meaning: "Pods evicted, by reason and the victim's queue."},
		{Name: "fairway_leader", Type: "gauge", Component: "scheduler", Meaning: "1 while this replica is the leader."},

		// New metrics the dashboards need from the scheduler runtime.
		{Name: "fairway_queue_info", Type: "gauge", Labels: []string{"queue", "parent"}, Component: "scheduler",
			Meaning: "Always 1, one series per Queue; parent is spec.parent (empty for a top-level queue). Gives the tree to PromQL: department roll-ups and leaf-only sums."},
		{Name: "fairway_node_gpus", Type: "gauge", Labels: []string{"node", "gpu_type", "state"}, Component: "scheduler",
			Meaning: "GPUs of a schedulable node by state: whole (held whole by pods), shared (a slot of fractional pods), free (healthy, unheld), unhealthy. gpu_type is the node's fairway.dev/gpu-type (the node pool). The states sum to the node's GPUs."},
		{Name: "fairway_podgroups", Type: "gauge", Labels: []string{"queue", "framework", "phase"}, Component: "scheduler",
			Meaning: "PodGroups (gangs) by queue, framework (the pods' fairway.dev/framework) and status.phase."},
		// New labels on existing scheduler metrics.
		{Name: "fairway_evictions_total", Label: "framework", Component: "scheduler",
			Meaning: "The victim's framework (fairway.dev/framework, none when unlabelled), for preemptions per framework."},
		{Name: "fairway_gpu_share_allocated", Label: "gpu_uuid", Component: "scheduler",
			Meaning: "The physical GPU of the slot (the UUID its reservation pod got; empty until the agent reports it), to join the share with the agent's per-GPU and per-pod usage."},
	}
}
