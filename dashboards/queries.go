package dashboards

import (
	"fmt"
	"regexp"
	"strings"
)

// Query is one PromQL query of a dashboard, located for reports.
type Query struct {
	Board string // the board's UID
	Panel string // panel title, or "variable <name>"
	RefID string // A, B, ... within the panel
	// Expr is the query as it ships, with Grafana variables.
	Expr string
	// Optional: see Target.Optional. Variable queries are never optional.
	Optional bool
}

// Queries lists every query of the board: each panel target, and each query variable as the
// PromQL expression Grafana runs for it.
func (b *Board) Queries() []Query {
	var out []Query
	for _, v := range b.Variables {
		if v.Kind != QueryVariable {
			continue
		}
		expr, err := LabelValuesExpr(v.Query)
		if err != nil {
			expr = v.Query // the checks report it unparsable
		}
		out = append(out, Query{Board: b.UID, Panel: "variable " + v.Name, RefID: "A", Expr: expr})
	}
	for _, r := range b.Rows {
		for _, p := range r.Panels {
			for i, t := range p.Targets {
				out = append(out, Query{Board: b.UID, Panel: p.Title, RefID: refID(i), Expr: t.Expr, Optional: t.Optional})
			}
		}
	}
	return out
}

func refID(i int) string { return string(rune('A' + i)) }

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// LabelValuesExpr turns Grafana's label_values(<selector>, <label>) into the PromQL whose result
// holds those values, so variable queries are checked like panel queries.
func LabelValuesExpr(q string) (string, error) {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return "", fmt.Errorf("variable query %q is not label_values(<selector>, <label>)", q)
	}
	return fmt.Sprintf("count by (%s) (%s)", m[2], m[1]), nil
}

// grafanaBuiltins are the Grafana variables the queries may use, with the value the checks give
// them: long enough windows for rate() over a short e2e run scraped every second, and a sampling
// interval ($__interval of a subquery) short enough that a run of seconds has samples.
var grafanaBuiltins = []string{"__rate_interval", "__interval", "__interval_ms", "__range"}

var builtinCheckValues = map[string]string{"__rate_interval": "1m", "__interval": "5s", "__interval_ms": "5000", "__range": "15m"}

// variableRE matches $name, ${name} and ${name:format}. Names that start with a digit ($1 in
// label_replace) are not Grafana variables and are left alone.
var variableRE = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

func referencedVariables(expr string) []string {
	var out []string
	for _, m := range variableRE.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// Expand substitutes the board's variables and Grafana's built-in intervals with their check
// values, giving plain PromQL that Prometheus can run.
func (b *Board) Expand(expr string) string {
	values := map[string]string{}
	for k, v := range builtinCheckValues {
		values[k] = v
	}
	for _, v := range b.Variables {
		values[v.Name] = v.CheckValue
	}
	return variableRE.ReplaceAllStringFunc(expr, func(s string) string {
		m := variableRE.FindStringSubmatch(s)
		if v, ok := values[m[1]+m[2]]; ok {
			return v
		}
		return s
	})
}

// Lookup returns the board with the UID, nil if none.
func Lookup(uid string) *Board {
	for _, b := range All() {
		if b.UID == uid {
			return b
		}
	}
	return nil
}

// FileName is the name of the board's JSON file.
func (b *Board) FileName() string { return strings.TrimPrefix(b.UID, "fairway-") + ".json" }
