package dashboards

import "fmt"

// Variables shared by several boards.

func queueVariable() Variable {
	return Variable{
		Kind: QueryVariable, Name: "queue", Label: "Queue", Multi: true, CheckValue: ".+",
		// Any queue metric: a queue with nothing guaranteed, allocated or asked has no series of
		// some of them, but always of one.
		Query: `label_values({__name__=~"fairway_queue_(fair_share|requested|allocated|guaranteed)"}, queue)`,
	}
}

func resourceVariable() Variable {
	return Variable{
		Kind: CustomVariable, Name: "resource", Label: "Resource", Values: []string{"gpu", "cpu", "memory"},
		CheckValue: "gpu",
	}
}

func nodeVariable() Variable {
	return Variable{Kind: QueryVariable, Name: "node", Label: "Node", Multi: true, CheckValue: ".+",
		Query: `label_values(fairway_gpu_info, node)`}
}

// leaves keeps the series of leaf queues (projects) of a queue-labelled vector, dropping
// departments, whose amounts are the sums of their children's, so sums over queues count once.
func leaves(vector string) string {
	return fmt.Sprintf(`%s unless on(queue) %s`, vector, parents)
}

// departments keeps the series of queues that are some queue's parent.
func departments(vector string) string {
	return fmt.Sprintf(`%s and on(queue) %s`, vector, parents)
}

// parents has one series per queue that is some queue's parent, labelled queue=<that queue>.
// Siblings name the same parent, so the series are grouped before the relabelling, which would
// otherwise make duplicates.
const parents = `label_replace(group by (parent) (fairway_queue_info{parent!=""}), "queue", "$1", "parent", "(.+)")`

// quantiles are the latency percentiles the boards show.
var quantiles = []struct {
	q      string
	legend string
}{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}}

// histogramQuantiles returns one target per quantile of a histogram, aggregated by the labels
// given (and le).
func histogramQuantiles(metric, selector, by, legendPrefix string) []Target {
	var out []Target
	for _, q := range quantiles {
		out = append(out, Target{
			Expr:   fmt.Sprintf(`histogram_quantile(%s, sum by (%sle) (rate(%s_bucket%s[$__rate_interval])))`, q.q, by, metric, selector),
			Legend: legendPrefix + q.legend,
		})
	}
	return out
}
