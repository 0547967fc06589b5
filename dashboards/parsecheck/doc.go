// Package parsecheck holds one test: every query of fairway's dashboards parses with
// Prometheus's own PromQL parser, and the metrics the parser finds in it are the ones the
// dashboards package's scanner finds, which is what the metric-name check relies on.
//
//	cd dashboards/parsecheck && go test ./...
package parsecheck
