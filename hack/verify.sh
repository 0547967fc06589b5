#!/usr/bin/env bash
# verify.sh: the checks `make verify` (and so CI) runs before any test: formatting,
# generated files up to date, module files tidy, the linter (vet's analyzers among them, and
# depguard's layer fences), no test harness linked into the fairway binary, and no binary or large
# file tracked.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=${FAIRWAY_BIN:-$root/bin}
failed=0
step() { printf '\n== verify: %s\n' "$*"; }
fail() { printf 'verify FAILED: %s\n' "$*" >&2; failed=1; }

step "tracked files (no binaries, nothing over 1 MB)"
hack/verify-files.sh || fail "a binary or large file is tracked (see above)"

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' --cached --others --exclude-standard) 2>/dev/null || true)
[ -z "$unformatted" ] || fail "gofmt needed on: $unformatted (run: gofmt -w <files>)"

step "go.mod tidy"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp"/
go mod tidy
if ! diff -q go.mod "$tmp/go.mod" >/dev/null || ! diff -q go.sum "$tmp/go.sum" >/dev/null; then
  cp "$tmp/go.mod" "$tmp/go.sum" .
  fail "go.mod/go.sum are not tidy (run: go mod tidy)"
fi

step "one build list for fairway and the tools (hack/tools/tools.work)"
hack/tools-sync.sh --check || fail "a go.mod is off the shared build list (run: make tools-sync)"

# depguard (in golangci-lint) fences direct imports; this catches the same mistake one or more
# imports away: a product package that pulls in test/ or Go's testing package through another.
step "the fairway binary links no test harness (go list -deps ./cmd/fairway)"
harness=$(go list -deps ./cmd/fairway | grep -E '^github.com/fairway-sched/fairway/test/|^testing$' || true)
[ -z "$harness" ] || fail "cmd/fairway links test code: $(echo $harness) (find the edge: go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/fairway)"

step "generated code (controller-gen)"
hack/build-tools.sh controller-gen >/dev/null
mkdir -p "$tmp/crds" "$tmp/api"
cp api/v1alpha1/zz_generated.deepcopy.go "$tmp/api/"
"$bin/controller-gen" object paths=./api/... crd:crdVersions=v1 output:crd:artifacts:config="$tmp/crds"
if ! diff -ru charts/fairway/crds "$tmp/crds" || ! diff -u "$tmp/api/zz_generated.deepcopy.go" api/v1alpha1/zz_generated.deepcopy.go; then
  cp "$tmp/api/zz_generated.deepcopy.go" api/v1alpha1/
  fail "generated CRDs or deepcopy are stale (run: make generate)"
fi

if [ -x hack/verify-generated-extra.sh ]; then
  step "other generated files"
  hack/verify-generated-extra.sh || fail "generated files are stale (run: make generate)"
fi

# No separate `go vet`: golangci-lint's govet runs every analyzer `go vet` runs by default (35 in
# Go 1.26; loopclosure aside, which reports nothing in a module at go 1.22 or later), over the
# same packages and tests and the e2e files too. A separate `go vet ./...` cost 91 s of a 2-core
# run, even with every package already compiled, for findings the linter reports anyway.
step "golangci-lint (govet, staticcheck, errcheck, ...)"
hack/build-tools.sh golangci-lint >/dev/null
"$bin/golangci-lint" run ./... || fail "golangci-lint"

[ "$failed" = 0 ] || exit 1
echo "verify: all checks passed"
