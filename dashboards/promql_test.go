package dashboards

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetrics(t *testing.T) {
	cases := map[string]struct {
		expr    string
		want    []MetricRef
		wantErr bool
	}{
		"selector":       {expr: `fairway_queue_allocated{queue="a", resource="gpu"}`, want: []MetricRef{{Name: "fairway_queue_allocated"}}},
		"aggregation by": {expr: `sum by (queue, reason) (fairway_pending_pods)`, want: []MetricRef{{Name: "fairway_pending_pods"}}},
		"by after":       {expr: `sum(fairway_pending_pods) by (reason)`, want: []MetricRef{{Name: "fairway_pending_pods"}}},
		"histogram": {expr: `histogram_quantile(0.9, sum by (framework, le) (rate(fairway_pod_scheduling_latency_seconds_bucket{queue=~".+"}[1m])))`,
			want: []MetricRef{{Name: "fairway_pod_scheduling_latency_seconds_bucket"}}},
		"binary with matching": {expr: `a * on(queue) group_left(parent) b{parent!=""} unless on (queue) c`,
			want: []MetricRef{{Name: "a"}, {Name: "b"}, {Name: "c"}}},
		"label_replace keeps strings": {expr: `x unless on(queue) label_replace(fairway_queue_info, "queue", "$1", "parent", "(.+)")`,
			want: []MetricRef{{Name: "x"}, {Name: "fairway_queue_info"}}},
		"name matcher": {expr: `count by (queue) ({__name__=~"fairway_queue_(a|b)"})`, want: []MetricRef{{Name: "fairway_queue_(a|b)", Regex: true}}},
		"keywords":     {expr: `sum(a offset 5m) > bool 1 or vector(0) and b @ start()`, want: []MetricRef{{Name: "a"}, {Name: "b"}}},
		"comparison":   {expr: `max by (pod) (fairway_gpu_pod_idle) == 1`, want: []MetricRef{{Name: "fairway_gpu_pod_idle"}}},
		"subquery":     {expr: `max_over_time(rate(a[1m])[10m:30s])`, want: []MetricRef{{Name: "a"}}},
		"unbalanced":   {expr: `sum(rate(a[1m])`, wantErr: true},
		"mismatched":   {expr: `sum(a{b="c")}`, wantErr: true},
		"string":       {expr: `a{b="c}`, wantErr: true},
		"stray":        {expr: `a ; b`, wantErr: true},
		"no metric":    {expr: `vector(1)`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Metrics(tc.expr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestMetricRefMatches(t *testing.T) {
	r := MetricRef{Name: "fairway_queue_(a|b)", Regex: true}
	if !r.Matches("fairway_queue_a") || r.Matches("fairway_queue_ab") || r.Matches("x_fairway_queue_a") {
		t.Error("regex references are anchored")
	}
}
