package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasourceRef points every panel and variable at the ${datasource} variable, so the boards
// import into any Grafana whatever its Prometheus data source is called.
func datasourceRef() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + Datasource + "}")}
}

// Build turns the board into Grafana's dashboard model (schema version 42: Grafana 11 and 12).
// The SDK marks this (v1) model deprecated in favour of dashboardv2, which only Grafana 12 reads.
func (b *Board) Build() (dashboard.Dashboard, error) { //nolint:staticcheck // SA1019: dashboardv2 is Grafana 12 only; the v1 model imports into Grafana 11 and 12.
	if err := b.Validate(); err != nil {
		return dashboard.Dashboard{}, err //nolint:staticcheck // SA1019: dashboardv2 is Grafana 12 only; the v1 model imports into Grafana 11 and 12.
	}
	//nolint:staticcheck // SA1019: dashboardv2 is Grafana 12 only; the v1 model imports into Grafana 11 and 12.
	d := dashboard.NewDashboardBuilder(b.Title).
		Uid(b.UID).
		Description(b.Description).
		Tags(append([]string{"fairway"}, b.Tags...)).
		Editable().
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(Datasource).
			Label("Data source").
			Type("prometheus"))
	for _, v := range b.Variables {
		d.WithVariable(variable(v))
	}
	// Stable panel ids, in layout order: Grafana links to a panel by id (viewPanel=).
	id := uint32(0)
	for _, r := range b.Rows {
		id++
		d.WithRow(dashboard.NewRowBuilder(r.Title).Id(id))
		for _, p := range r.Panels {
			id++
			d.WithPanel(panel(p, id))
		}
	}
	return d.Build()
}

func variable(v Variable) cog.Builder[dashboard.VariableModel] {
	label := v.Label
	if label == "" {
		label = strings.ToUpper(v.Name[:1]) + v.Name[1:]
	}
	switch v.Kind {
	case CustomVariable:
		cv := dashboard.NewCustomVariableBuilder(v.Name).Label(label).
			Values(dashboard.StringOrMap{String: cog.ToPtr(strings.Join(v.Values, ","))}).
			Multi(v.Multi).IncludeAll(v.Multi)
		if len(v.Values) > 0 && !v.Multi {
			cv.Current(dashboard.VariableOption{Selected: cog.ToPtr(true),
				Text: dashboard.StringOrArrayOfString{String: cog.ToPtr(v.Values[0])}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(v.Values[0])}})
		}
		return cv
	default:
		qv := dashboard.NewQueryVariableBuilder(v.Name).Label(label).
			Query(dashboard.StringOrMap{String: cog.ToPtr(v.Query)}).
			Definition(v.Query).
			Datasource(datasourceRef()).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(v.Multi).IncludeAll(v.Multi)
		if v.Multi {
			// "All" means any value, including values that appear after the variable loaded.
			qv.AllValue(".+")
		}
		return qv
	}
}

func targets(p Panel) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(p.Targets))
	for i, t := range p.Targets {
		q := prometheus.NewDataqueryBuilder().
			RefId(refID(i)).
			Datasource(datasourceRef()).
			Expr(t.Expr).
			LegendFormat(legend(t.Legend))
		if t.Instant {
			q.Instant().Format(prometheus.PromQueryFormatTable)
		} else {
			q.Range()
		}
		out = append(out, q)
	}
	return out
}

func legend(s string) string {
	if s == "" {
		return "__auto"
	}
	return s
}

// mergeTables joins the instant queries of a table panel into one row per label set.
var mergeTables = []dashboard.DataTransformerConfig{
	{Id: "merge", Options: map[string]any{}},
	{Id: "organize", Options: map[string]any{"excludeByName": map[string]any{"Time": true}}},
}

func panel(p Panel, id uint32) cog.Builder[dashboard.Panel] {
	w, h := p.Width, p.Height
	if w == 0 {
		w = 12
		if p.Kind == Stat {
			w = 4
		}
	}
	if h == 0 {
		h = 8
		if p.Kind == Stat {
			h = 4
		}
	}
	unit := p.Unit
	if unit == "" {
		unit = "short"
	}
	switch p.Kind {
	case Stat:
		b := stat.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasourceRef()).
			Unit(unit).Span(w).Height(h).
			GraphMode(common.BigValueGraphModeArea).ColorMode(common.BigValueColorModeValue).Orientation(common.VizOrientationAuto).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		for _, t := range targets(p) {
			b.WithTarget(t)
		}
		return repeat(b, p.Repeat)
	case Table:
		b := table.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasourceRef()).
			Unit(unit).Span(w).Height(h).Transformations(mergeTables)
		for _, t := range targets(p) {
			b.WithTarget(t)
		}
		return repeat(b, p.Repeat)
	case BarGauge:
		b := bargauge.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasourceRef()).
			Unit(unit).Span(w).Height(h).Min(0).
			DisplayMode(common.BarGaugeDisplayModeGradient).Orientation(common.VizOrientationHorizontal).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		for _, t := range targets(p) {
			b.WithTarget(t)
		}
		return repeat(b, p.Repeat)
	default:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasourceRef()).
			Unit(unit).Span(w).Height(h).Min(0).FillOpacity(10).
			Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).
				Placement(common.LegendPlacementBottom).ShowLegend(true).Calcs([]string{"lastNotNull", "max"}))
		if p.Stacked {
			b.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(40)
		}
		for _, t := range targets(p) {
			b.WithTarget(t)
		}
		return repeat(b, p.Repeat)
	}
}

// repeater is what every panel builder offers for repetition.
type repeater[T any] interface {
	cog.Builder[dashboard.Panel]
	Repeat(string) T
}

func repeat[T any](b repeater[T], variable string) cog.Builder[dashboard.Panel] {
	if variable != "" {
		b.Repeat(variable)
	}
	return b
}

// JSON renders the board as indented JSON with a trailing newline, the committed form.
func (b *Board) JSON() ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("building dashboard %s: %w", b.UID, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encoding dashboard %s: %w", b.UID, err)
	}
	return buf.Bytes(), nil
}

// Render returns every board's JSON by file name.
func Render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, b := range All() {
		data, err := b.JSON()
		if err != nil {
			return nil, err
		}
		out[b.FileName()] = data
	}
	return out, nil
}
