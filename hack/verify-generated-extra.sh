#!/usr/bin/env bash
# verify-generated-extra.sh: generated files outside api/ that `make verify` checks (verify.sh
# calls this script when it exists). Today: the Grafana dashboards' JSON (dashboards/json), which
# `go run ./dashboards/cmd/generate` writes from the Go definitions in dashboards/.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go run ./dashboards/cmd/generate -out "$tmp/json" >/dev/null
if ! diff -ru dashboards/json "$tmp/json"; then
  echo "dashboards/json is stale (run: go run ./dashboards/cmd/generate)" >&2
  exit 1
fi
