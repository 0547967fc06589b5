// Package dashboards holds fairway's Grafana dashboards as code. Each dashboard is a Board (one
// file per board) over the metrics fairway's components export: the scheduler's fairway_queue_*,
// fairway_pending_*, latency and eviction metrics, and the gpu-agent's fairway_gpu_* metrics.
// Build turns a Board into Grafana's model with github.com/grafana/grafana-foundation-sdk/go;
// `go run ./dashboards/cmd/generate` writes the JSON files under dashboards/json, which are
// committed, checked up to date by a test, and provisioned by the Helm chart.
//
// Three checks keep the dashboards honest. The unit tests scan every query for the metrics it
// selects and require each to be exported by a component (package dashboards/catalog collects
// the names from the components' own collectors) or listed as requested from one. The module
// dashboards/parsecheck parses every query with Prometheus's own parser. The e2e harness behind
// `make dashboards-check` (test/e2e/dashboards_test.go) runs every query on a real Prometheus
// that scrapes a local cluster and requires data.
//
// This package is not imported by any fairway binary; the SDK stays out of the product.
package dashboards
