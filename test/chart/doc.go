// Package chart renders fairway's Helm chart (charts/fairway) with the pinned helm binary
// (hack/tools/helm, built into bin/ by `make tools` or `make chart-test`) and installs the
// rendering into a local test cluster (test/cluster). It also reads the chart's RBAC and the API
// server's audit log, to show which rules a run of fairway used.
//
// The chart's unit tests (helm lint, helm template with default, full and bad values, the README
// documenting every value) live here; the e2e test that installs the chart and runs every
// component under its ServiceAccount is test/e2e's TestChart, and the demo installs fairway with
// Install too.
package chart
