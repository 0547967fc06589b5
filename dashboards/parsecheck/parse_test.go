package parsecheck

import (
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fairway-sched/fairway/dashboards"
)

func TestPrometheusParsesEveryQuery(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	n := 0
	for _, b := range dashboards.All() {
		for _, q := range b.Queries() {
			n++
			where := b.UID + " / " + q.Panel + " / " + q.RefID
			expr := b.Expand(q.Expr)
			ast, err := p.ParseExpr(expr)
			if err != nil {
				t.Errorf("%s: Prometheus cannot parse %s: %v", where, expr, err)
				continue
			}
			var want []dashboards.MetricRef
			parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				ref := dashboards.MetricRef{Name: vs.Name}
				for _, m := range vs.LabelMatchers {
					switch {
					case m.Name != labels.MetricName || vs.Name != "":
					case m.Type == labels.MatchRegexp:
						ref = dashboards.MetricRef{Name: m.Value, Regex: true}
					case m.Type == labels.MatchEqual:
						ref = dashboards.MetricRef{Name: m.Value}
					}
				}
				if !slices.Contains(want, ref) {
					want = append(want, ref)
				}
				return nil
			})
			got, err := dashboards.Metrics(expr)
			if err != nil {
				t.Errorf("%s: the scanner refuses what Prometheus parses: %v", where, err)
				continue
			}
			slices.SortFunc(want, cmpRef)
			slices.SortFunc(got, cmpRef)
			if !slices.Equal(want, got) {
				t.Errorf("%s: the scanner finds %v, Prometheus %v, in %s", where, got, want, expr)
			}
		}
	}
	t.Logf("%d queries parsed", n)
}

func cmpRef(a, b dashboards.MetricRef) int {
	if a.Name < b.Name {
		return -1
	}
	if a.Name > b.Name {
		return 1
	}
	return 0
}
