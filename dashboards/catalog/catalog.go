// Package catalog lists the Prometheus metric families fairway's components export, collected
// from the components' own collectors rather than written down by hand, so that a dashboard
// query naming a metric no component exports fails a test. It also lists the metrics the
// dashboards need that have been requested from a component and are not exported yet.
//
// Each component contributes a Source: a function that returns the registry its /metrics
// endpoint serves, filled with sample data so that every family (vectors included) appears in a
// Gather and its type is known. The collectors' Describe output is checked against the gathered
// families, so a family the sample data failed to produce is still listed, by name.
package catalog

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Family is one exported metric family.
type Family struct {
	Name      string
	Type      string // counter, gauge, histogram, summary, untyped
	Help      string
	Labels    []string // sorted
	Component string
}

// SeriesNames are the names the family's series carry in Prometheus: the family name, or for
// histograms and summaries the _bucket, _sum and _count series.
func (f Family) SeriesNames() []string {
	switch f.Type {
	case "histogram":
		return []string{f.Name + "_bucket", f.Name + "_sum", f.Name + "_count"}
	case "summary":
		return []string{f.Name, f.Name + "_sum", f.Name + "_count"}
	}
	return []string{f.Name}
}

// Source is one component's metrics endpoint.
type Source struct {
	Component string
	// Registry returns what the component's /metrics serves, with sample data in every family,
	// and the collectors whose Describe lists the component's own families.
	Registry func() (prometheus.Gatherer, []prometheus.Collector, error)
}

// Exported gathers the families of every source, sorted by name.
func Exported() ([]Family, error) {
	var out []Family
	for _, s := range Sources() {
		fams, err := gather(s)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", s.Component, err)
		}
		out = append(out, fams...)
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func gather(s Source) ([]Family, error) {
	g, own, err := s.Registry()
	if err != nil {
		return nil, err
	}
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	byName := map[string]Family{}
	for _, mf := range mfs {
		f := Family{Name: mf.GetName(), Help: mf.GetHelp(), Type: strings.ToLower(mf.GetType().String()), Component: s.Component}
		if len(mf.Metric) > 0 {
			f.Labels = labelNames(mf.Metric[0])
		}
		byName[f.Name] = f
	}
	// Families the sample data did not produce are still exported: list them untyped.
	for _, c := range own {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			name, labels, err := parseDesc(d)
			if err != nil {
				return nil, err
			}
			if _, ok := byName[name]; !ok {
				byName[name] = Family{Name: name, Type: "untyped", Labels: labels, Component: s.Component}
			}
		}
	}
	out := make([]Family, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	return out, nil
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		if l.GetName() != "le" && l.GetName() != "quantile" {
			out = append(out, l.GetName())
		}
	}
	return out
}

// client_golang keeps a Desc's name private; its String form has been stable for years:
// Desc{fqName: "x", help: "...", constLabels: {...}, variableLabels: {a,b}}.
var (
	descNameRE   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabelsRE = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func parseDesc(d *prometheus.Desc) (string, []string, error) {
	s := d.String()
	m := descNameRE.FindStringSubmatch(s)
	if m == nil {
		return "", nil, fmt.Errorf("cannot read the metric name of %s", s)
	}
	var labels []string
	if l := descLabelsRE.FindStringSubmatch(s); l != nil && l[1] != "" {
		for _, name := range strings.Split(l[1], ",") {
			labels = append(labels, strings.TrimSpace(name))
		}
	}
	return m[1], labels, nil
}

// Request is a metric, or a label of an exported metric, that a dashboard uses and that a
// component has been asked to export. Once the component exports it, the request must go: a
// test fails on a request for something already exported.
type Request struct {
	Name string
	// Label, when set, requests only this label on the exported metric Name.
	Label     string
	Type      string
	Labels    []string
	Component string
	Meaning   string
}

// Index answers, for a series name, which component exports it or has been asked to.
type Index struct {
	series    map[string]Family
	requested map[string]Request
	labelReqs []Request
}

// NewIndex indexes the exported families and the requests.
func NewIndex(fams []Family, reqs []Request) *Index {
	ix := &Index{series: map[string]Family{}, requested: map[string]Request{}}
	for _, f := range fams {
		for _, n := range f.SeriesNames() {
			ix.series[n] = f
		}
	}
	for _, r := range reqs {
		if r.Label != "" {
			ix.labelReqs = append(ix.labelReqs, r)
			continue
		}
		f := Family{Name: r.Name, Type: r.Type}
		for _, n := range f.SeriesNames() {
			ix.requested[n] = r
		}
	}
	return ix
}

// Exported returns the family that exports the series name.
func (ix *Index) Exported(series string) (Family, bool) {
	f, ok := ix.series[series]
	return f, ok
}

// Requested returns the request that covers the series name.
func (ix *Index) Requested(series string) (Request, bool) {
	r, ok := ix.requested[series]
	return r, ok
}

// LabelRequests returns the requests for labels on exported metrics.
func (ix *Index) LabelRequests() []Request { return ix.labelReqs }

// SeriesNames returns every exported series name, sorted.
func (ix *Index) SeriesNames() []string { return slices.Sorted(maps.Keys(ix.series)) }

// RequestedNames returns every requested series name, sorted.
func (ix *Index) RequestedNames() []string { return slices.Sorted(maps.Keys(ix.requested)) }
