#!/usr/bin/env bash
# verify-generated-extra.sh: generated files outside api/ that `make verify` checks (verify.sh
# calls this script when it exists). Today: the Grafana dashboards' JSON, which
# `go run ./dashboards/cmd/generate` writes from the Go definitions in dashboards/ into
# dashboards/json and, once the chart provisions them, into charts/fairway/dashboards.
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
exit "$stale"
