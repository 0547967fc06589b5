package dashboards_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/dashboards"
	"github.com/fairway-sched/fairway/dashboards/catalog"
)

// problems checks every query of the boards against the index: each must scan, and each metric
// it selects must be exported by a component or requested from one. It returns the problems
// and, separately, the queries that wait for requested metrics.
func problems(boards []*dashboards.Board, ix *catalog.Index) (bad, waiting []string) {
	for _, b := range boards {
		for _, q := range b.Queries() {
			where := fmt.Sprintf("%s / %s / %s", q.Board, q.Panel, q.RefID)
			refs, err := dashboards.Metrics(b.Expand(q.Expr))
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v: %s", where, err, q.Expr))
				continue
			}
			for _, r := range refs {
				if r.Regex {
					if !slices.ContainsFunc(append(ix.SeriesNames(), ix.RequestedNames()...), r.Matches) {
						bad = append(bad, fmt.Sprintf("%s: {__name__=~%q} matches no metric any component exports", where, r.Name))
					}
					continue
				}
				if _, ok := ix.Exported(r.Name); ok {
					continue
				}
				if req, ok := ix.Requested(r.Name); ok {
					waiting = append(waiting, fmt.Sprintf("%s: %s (requested from %s)", where, r.Name, req.Component))
					continue
				}
				bad = append(bad, fmt.Sprintf("%s: metric %s is exported by no component", where, r.Name))
			}
		}
	}
	return bad, waiting
}

func index(t *testing.T) *catalog.Index {
	t.Helper()
	fams, err := catalog.Exported()
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewIndex(fams, catalog.Requested())
}

// TestQueriesUseExportedMetrics is the check the issue asks for: a dashboard query that names a
// metric the components do not export fails here.
func TestQueriesUseExportedMetrics(t *testing.T) {
	ix := index(t)
	bad, waiting := problems(dashboards.All(), ix)
	for _, p := range bad {
		t.Error(p)
	}
	if len(waiting) > 0 {
		t.Logf("%d queries wait for requested metrics:\n%s", len(waiting), strings.Join(waiting, "\n"))
	}
}

func TestUnknownMetricFails(t *testing.T) {
	ix := index(t)
	b := &dashboards.Board{UID: "x", Rows: []dashboards.Row{{Panels: []dashboards.Panel{{Title: "p", Targets: []dashboards.Target{
		{Expr: `sum(fairway_gpu_utilisation_ratio)`}, // misspelt
		{Expr: `sum({__name__=~"fairway_nothing_.+"})`},
		{Expr: `sum(fairway_gpu_utilization_ratio`},
	}}}}}}
	bad, _ := problems([]*dashboards.Board{b}, ix)
	if len(bad) != 3 {
		t.Fatalf("want 3 problems, got %d: %v", len(bad), bad)
	}
	if !strings.Contains(bad[0], "fairway_gpu_utilisation_ratio is exported by no component") {
		t.Errorf("unexpected report %q", bad[0])
	}
}

// TestRequestsAreOpen fails once a component exports what was requested from it, so the list
// of requests only holds what is still missing.
func TestRequestsAreOpen(t *testing.T) {
	fams, err := catalog.Exported()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]catalog.Family{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	for _, r := range catalog.Requested() {
		f, ok := byName[r.Name]
		switch {
		case r.Label == "" && ok:
			t.Errorf("%s is exported by %s now: drop its request from dashboards/catalog/requested.go", r.Name, f.Component)
		case r.Label != "" && ok && slices.Contains(f.Labels, r.Label):
			t.Errorf("%s has the label %s now: drop its request", r.Name, r.Label)
		}
	}
}
