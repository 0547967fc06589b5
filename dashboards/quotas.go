package dashboards

import "fmt"

// Quotas answers "who holds what, who borrows, who waits" per project and department: each
// queue's guaranteed quota against its fair share (what it is entitled to now), what it holds,
// what it borrows above its guarantee (reclaimable), and what it asks for.
func Quotas() *Board {
	sel := `{queue=~"$queue", resource="$resource"}`
	perQueue := func(metric string) string { return fmt.Sprintf(`sum by (queue) (%s%s)`, metric, sel) }
	perDept := func(metric string) string {
		return fmt.Sprintf(`sum by (parent) (%s{resource="$resource"} * on(queue) group_left(parent) fairway_queue_info{parent!=""})`, metric)
	}
	return &Board{
		UID:         "fairway-quotas",
		Title:       "fairway / Projects and quotas",
		Description: "Guaranteed quota, fair share, allocation and borrowing per queue and department.",
		Variables:   []Variable{queueVariable(), resourceVariable()},
		Rows: []Row{
			{Title: "Per queue", Panels: []Panel{
				{Kind: TimeSeries, Title: "$queue: $resource", Repeat: "queue", Width: 8,
					Description: "Guaranteed: promised on demand. Fair share: guaranteed (up to demand) plus its part of the idle capacity. " +
						"Allocated above fair share is reclaimable; borrowed is allocated above the guarantee.",
					Targets: []Target{
						{Expr: `sum(fairway_queue_guaranteed` + sel + `)`, Legend: "guaranteed"},
						{Expr: `sum(fairway_queue_fair_share` + sel + `)`, Legend: "fair share"},
						{Expr: `sum(fairway_queue_allocated` + sel + `)`, Legend: "allocated"},
						{Expr: `sum(fairway_queue_borrowed` + sel + `)`, Legend: "borrowed"},
						{Expr: `sum(fairway_queue_requested` + sel + `)`, Legend: "requested"},
					}},
			}},
			{Title: "All queues", Panels: []Panel{
				{Kind: Table, Title: "Queues now", Width: 24, Description: "Per queue, in units of the selected resource; pending pods over all resources.",
					Targets: []Target{
						{Expr: perQueue("fairway_queue_guaranteed"), Legend: "guaranteed", Instant: true},
						{Expr: perQueue("fairway_queue_fair_share"), Legend: "fair share", Instant: true},
						{Expr: perQueue("fairway_queue_allocated"), Legend: "allocated", Instant: true},
						{Expr: perQueue("fairway_queue_borrowed"), Legend: "borrowed", Instant: true},
						{Expr: perQueue("fairway_queue_requested"), Legend: "requested", Instant: true},
						{Expr: `sum by (queue) (fairway_pending_pods{queue=~"$queue"})`, Legend: "pending pods", Instant: true},
					}},
				{Kind: TimeSeries, Title: "Allocated by project", Stacked: true,
					Targets: []Target{{Expr: `sum by (queue) (` + leaves(`fairway_queue_allocated`+sel) + `)`, Legend: "{{queue}}"}}},
				{Kind: TimeSeries, Title: "Borrowed by queue", Stacked: true, Description: "Allocated above the guaranteed quota: what reclaim can take back.",
					Targets: []Target{{Expr: perQueue("fairway_queue_borrowed"), Legend: "{{queue}}"}}},
				{Kind: BarGauge, Title: "Allocated / fair share", Unit: "percentunit",
					Description: "Above 100% a queue holds more than it is entitled to now; the excess is reclaimed when others ask.",
					Targets:     []Target{{Expr: perQueue("fairway_queue_allocated") + " / " + perQueue("fairway_queue_fair_share"), Legend: "{{queue}}", Instant: true}}},
				{Kind: TimeSeries, Title: "Non-preemptible allocation", Description: "What notebooks and inference hold: never preempted, so it must fit the guarantee.",
					Targets: []Target{{Expr: perQueue("fairway_queue_allocated_nonpreemptible"), Legend: "{{queue}}"}}},
			}},
			{Title: "Fair share over time", Panels: []Panel{
				{Kind: TimeSeries, Title: "Recent over-quota use by queue", Unit: "percentunit",
					Description: "Each queue's decayed use above its guarantee over the cluster's decayed capacity (--fair-share-usage-half-life). Fair share over time " +
						"divides the capacity above guarantees against queues whose part of this exceeds their weight's part.",
					Targets: []Target{{Expr: `sum by (queue) (fairway_queue_over_quota_usage_share` + sel + `)`, Legend: "{{queue}}"}}},
				{Kind: TimeSeries, Title: "Decayed usage by queue", Description: "Resource-hours (GPU-hours, core-hours, byte-hours), each hour of use counting 2^(-age/half-life).",
					Targets: []Target{{Expr: `sum by (queue) (fairway_queue_usage` + sel + `)`, Legend: "{{queue}}"}}},
				{Kind: TimeSeries, Title: "Usage-adjusted fair share by queue",
					Description: "The fair share the scheduler enforces: with fair share over time, queues that used more than their weight entitles them to lately get less of the capacity above guarantees.",
					Targets:     []Target{{Expr: perQueue("fairway_queue_fair_share"), Legend: "{{queue}}"}}},
			}},
			{Title: "Departments", Panels: []Panel{
				{Kind: TimeSeries, Title: "Allocated by department", Stacked: true, Description: "The sum of each department's projects.",
					Targets: []Target{{Expr: perDept("fairway_queue_allocated"), Legend: "{{parent}}"}}},
				{Kind: TimeSeries, Title: "Borrowed by department", Stacked: true,
					Targets: []Target{{Expr: perDept("fairway_queue_borrowed"), Legend: "{{parent}}"}}},
				{Kind: Table, Title: "Departments now", Width: 24, Description: "Each department's own quota and fair share, and what its projects hold.",
					Targets: []Target{
						{Expr: `sum by (queue) (` + departments(`fairway_queue_guaranteed{resource="$resource"}`) + `)`, Legend: "guaranteed", Instant: true},
						{Expr: `sum by (queue) (` + departments(`fairway_queue_fair_share{resource="$resource"}`) + `)`, Legend: "fair share", Instant: true},
						{Expr: `sum by (queue) (` + departments(`fairway_queue_allocated{resource="$resource"}`) + `)`, Legend: "allocated", Instant: true},
					}},
			}},
		},
	}
}
