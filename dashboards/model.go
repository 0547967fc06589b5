package dashboards

import (
	"fmt"
	"slices"
	"strings"
)

// Board is one dashboard as fairway describes it: plain data that Build turns into the Grafana
// model, and that the checks walk to find every query. Keeping this small model between the
// dashboard files and the SDK means a check never has to know the SDK's panel types.
type Board struct {
	// UID is the stable Grafana UID, also the JSON file's name; links and bookmarks rely on it.
	UID         string
	Title       string
	Description string
	Tags        []string
	// Variables besides ${datasource}, which every board has.
	Variables []Variable
	Rows      []Row
}

// Row is a titled band of panels.
type Row struct {
	Title  string
	Panels []Panel
}

// PanelKind is the Grafana visualisation.
type PanelKind string

// Panel kinds in use.
const (
	TimeSeries PanelKind = "timeseries"
	Stat       PanelKind = "stat"
	Table      PanelKind = "table"
	BarGauge   PanelKind = "bargauge"
)

// Panel is one visualisation and its queries.
type Panel struct {
	Kind        PanelKind
	Title       string
	Description string
	// Unit is a Grafana unit id: short, percentunit, bytes, s, ...
	Unit string
	// Width in grid columns (of 24); Height in grid rows. Defaults: 12 x 8 (stats 4 x 4).
	Width, Height uint32
	// Stacked stacks time series (capacity split by state, by queue).
	Stacked bool
	// Repeat repeats the panel once per value of the named variable.
	Repeat  string
	Targets []Target
}

// Target is one PromQL query of a panel.
type Target struct {
	Expr string
	// Legend is Grafana's legend format ({{queue}}).
	Legend string
	// Instant queries the last value only (tables, stats, bar gauges).
	Instant bool
	// Optional marks a query that may rightly return nothing on a healthy cluster (an error
	// counter that never fired). dashboards-check still requires data from at least one query
	// of the panel, and parses this one.
	Optional bool
}

// VariableKind says where a variable's values come from.
type VariableKind string

// Variable kinds.
const (
	// QueryVariable takes its values from label_values(<selector>, <label>).
	QueryVariable VariableKind = "query"
	// CustomVariable has a fixed list of values.
	CustomVariable VariableKind = "custom"
)

// Variable is a dashboard template variable other than ${datasource}.
type Variable struct {
	Kind  VariableKind
	Name  string
	Label string
	// Query is label_values(<selector>, <label>) for a QueryVariable.
	Query string
	// Values are the choices of a CustomVariable; the first is the default.
	Values []string
	// Multi allows several values and adds "All" (matching any value, also those not listed).
	Multi bool
	// CheckValue is what the variable stands for when dashboards-check and the unit tests
	// expand a query: a regex that matches every value for a Multi variable (".+"), else one
	// value that the e2e scenario makes exist.
	CheckValue string
}

// Datasource is the name of the data-source variable every board has.
const Datasource = "datasource"

// Validate reports what makes a board unusable: duplicate titles within a board (panels are
// named by title in the checks' reports), targets without a query, unknown variables.
func (b *Board) Validate() error {
	var errs []string
	vars := map[string]bool{}
	for _, v := range b.Variables {
		vars[v.Name] = true
		if v.CheckValue == "" {
			errs = append(errs, fmt.Sprintf("variable %s has no CheckValue", v.Name))
		}
	}
	titles := map[string]bool{}
	for _, r := range b.Rows {
		for _, p := range r.Panels {
			if titles[p.Title] {
				errs = append(errs, fmt.Sprintf("panel title %q appears twice", p.Title))
			}
			titles[p.Title] = true
			if len(p.Targets) == 0 {
				errs = append(errs, fmt.Sprintf("panel %q has no query", p.Title))
			}
			if p.Repeat != "" && !vars[p.Repeat] {
				errs = append(errs, fmt.Sprintf("panel %q repeats over unknown variable %s", p.Title, p.Repeat))
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					errs = append(errs, fmt.Sprintf("panel %q has an empty query", p.Title))
				}
				for _, name := range referencedVariables(t.Expr) {
					if !vars[name] && !slices.Contains(grafanaBuiltins, name) {
						errs = append(errs, fmt.Sprintf("panel %q uses unknown variable $%s", p.Title, name))
					}
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dashboard %s: %s", b.UID, strings.Join(errs, "; "))
	}
	return nil
}

// All returns every fairway dashboard, in the order of the README.
func All() []*Board {
	return []*Board{Cluster(), Quotas(), Workloads(), GPUSharing(), ProjectResources()}
}
