#!/usr/bin/env bash
# verify-generated-extra.sh: generated files outside api/ that `make verify` checks (verify.sh
# calls this script when it exists). Today: the Grafana dashboards' JSON, which
# `go run ./dashboards/cmd/generate` writes from the Go definitions in dashboards/ into
# dashboards/json and, once the chart provisions them, into charts/fairway/dashboards; and every
# dashboard query parses with Prometheus's own parser (dashboards/parsecheck, a module of its own
# so that Prometheus stays out of fairway's go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go run ./dashboards/cmd/generate -out "$tmp/json" >/dev/null
stale=0
for dir in dashboards/json charts/fairway/dashboards; do
  [ -d "$dir" ] || continue
  if ! diff -ru "$dir" "$tmp/json"; then
    echo "$dir is stale (run: make generate)" >&2
    stale=1
  fi
done
if ! (cd dashboards/parsecheck && go test -count=1 ./... >"$tmp/parsecheck.log" 2>&1); then
  cat "$tmp/parsecheck.log" >&2
  echo "a dashboard query does not parse with Prometheus's parser (see above)" >&2
  stale=1
fi
exit "$stale"
