#!/usr/bin/env bash
# tools-sync.sh puts fairway's go.mod and every tools module under hack/tools/ on one build list
# (hack/tools/tools.work says why), then tidies each module on its own.
#
#   hack/tools-sync.sh          # rewrite the go.mod and go.sum files
#   hack/tools-sync.sh --check  # change nothing; exit 1 when a file would change (make verify)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

mapfile -t mods < <(cd hack/tools && GOWORK="${ROOT}/hack/tools/tools.work" go work edit -json |
  awk -F'"' '/"DiskPath"/ {print $4}' | sed "s|^|${ROOT}/hack/tools/|" | xargs -n1 realpath --relative-to="${ROOT}")
files=(hack/tools/tools.work hack/tools/tools.work.sum)
for m in "${mods[@]}"; do files+=("$m/go.mod" "$m/go.sum"); done

check=""
[[ "${1:-}" == "--check" ]] && check=1
if [[ -n "${check}" ]]; then
  tmp="$(mktemp -d)"
  trap 'tar -C "${ROOT}" -xf "${tmp}/saved.tar"; rm -rf "${tmp}"' EXIT
  tar -cf "${tmp}/saved.tar" "${files[@]}"
fi

(cd hack/tools && GOWORK="${ROOT}/hack/tools/tools.work" go work sync)
# The modules tidy independently and, cold, mostly wait on the module proxy: four at a time
# (the module cache locks what two of them fetch at once).
printf '%s\0' "${mods[@]}" | xargs -0 -P 4 -I{} sh -c 'cd "$1" && GOWORK=off go mod tidy' _ {}
# Tidying can drop a requirement that sync added; sync once more so both fixed points agree.
(cd hack/tools && GOWORK="${ROOT}/hack/tools/tools.work" go work sync)

if [[ -n "${check}" ]]; then
  mkdir -p "${tmp}/now" "${tmp}/was"
  cp --parents "${files[@]}" "${tmp}/now/"
  tar -C "${tmp}/was" -xf "${tmp}/saved.tar"
  if ! diff -ru "${tmp}/was" "${tmp}/now" >"${tmp}/diff"; then
    grep '^diff\|^[-+][^-+]' "${tmp}/diff" | head -40 >&2
    echo "tools-sync: these go.mod/go.sum files are not on the shared build list (run: make tools-sync)" >&2
    exit 1
  fi
  # The go.mod files agreeing is what sync guarantees; what the build cache needs is that every
  # package the builds compile comes from one version of its module. A replace directive (the
  # kubernetes module's staging modules) can hide a difference from sync: list the packages.
  # remove_all_sd is Prometheus's build tag (hack/build-tools.sh); it is inert elsewhere.
  # Each compiled package's module and the version it is built from (a replace's, if any).
  mod_version='{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}'
  for m in "${mods[@]}"; do
    if [[ "$m" == "." ]]; then
      (GOWORK=off go list -deps -test -f "${mod_version}" ./...)
    else
      mapfile -t pkgs < <(grep -ho '"[^"]*"' "$m"/*.go | tr -d '"')
      (cd "$m" && GOWORK=off go list -tags=remove_all_sd -deps -f "${mod_version}" "${pkgs[@]}")
    fi
  done | awk 'NF == 2 && $1 !~ /^github.com\/fairway-sched\// {print}' | sort -u >"${tmp}/used"
  split="$(awk '{n[$1]++; v[$1] = v[$1] " " $2} END {for (p in n) if (n[p] > 1) print p ":" v[p]}' "${tmp}/used")"
  if [[ -n "${split}" ]]; then
    echo "${split}" >&2
    echo "tools-sync: these modules are compiled at more than one version (align them in hack/tools/kubernetes/go.mod or the module that pins the lower one)" >&2
    exit 1
  fi
  echo "tools-sync: fairway and the $(( ${#mods[@]} - 1 )) tools modules share one build list ($(wc -l <"${tmp}/used") modules compiled)"
fi
