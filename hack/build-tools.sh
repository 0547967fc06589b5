#!/usr/bin/env bash
# build-tools.sh builds the local control plane and the developer tools into bin/ from the small
# Go modules under hack/tools/, so that tests, benchmarks and the demo need nothing but Go and
# the module proxy.
#
#   hack/build-tools.sh                 # every tool but ON_REQUEST ones (the kubelet)
#   hack/build-tools.sh controller-gen  # a subset, by binary name
#   hack/build-tools.sh --list          # the names this script knows
#
# A binary is skipped when it exists and its stamp matches: the stamp is a hash of the tools
# module's go.mod and go.sum, the main package, the build flags and the Go version, so bumping a
# version in hack/tools/*/go.mod (or upgrading Go) rebuilds exactly the binaries it affects.
# FORCE=1 rebuilds anyway. BIN overrides the output directory (default: <repo>/bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-${ROOT}/bin}"
GO="${GO:-go}"

# The Kubernetes version is hack/tools/kubernetes/go.mod's (its one owner): bump it there.
KUBE_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "${ROOT}/hack/tools/kubernetes/go.mod")"
if [[ ! "${KUBE_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+ ]]; then
  echo "build-tools: no 'require k8s.io/kubernetes vX.Y.Z' line in hack/tools/kubernetes/go.mod (got '${KUBE_VERSION}')" >&2
  exit 1
fi
KUBE_MAJOR="${BASH_REMATCH[1]}" KUBE_MINOR="${BASH_REMATCH[2]}"
# containerd reports the version its release builds stamp in (the module's otherwise: "+unknown").
CONTAINERD_VERSION="$(awk '$1 == "require" && $2 == "github.com/containerd/containerd/v2" {print $3}' "${ROOT}/hack/tools/containerd/go.mod")"
CONTAINERD_LDFLAGS=" -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}"

# name|tools module (under hack/tools)|main package|extra -ldflags|build tags|environment
KUBE_VERSION_LDFLAGS=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  # Without these the binaries report v0.0.0-master, which breaks kubectl's skew check and
  # helm's kubeVersion constraints.
  KUBE_VERSION_LDFLAGS+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=${KUBE_MAJOR} -X ${pkg}.gitMinor=${KUBE_MINOR}"
  KUBE_VERSION_LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
done
TOOLS=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|"
  "kube-apiserver|kubernetes|k8s.io/kubernetes/cmd/kube-apiserver|${KUBE_VERSION_LDFLAGS}"
  "kube-controller-manager|kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager|${KUBE_VERSION_LDFLAGS}"
  "kube-scheduler|kubernetes|k8s.io/kubernetes/cmd/kube-scheduler|${KUBE_VERSION_LDFLAGS}"
  "kubectl|kubernetes|k8s.io/kubernetes/cmd/kubectl|${KUBE_VERSION_LDFLAGS}"
  "kubelet|kubernetes|k8s.io/kubernetes/cmd/kubelet|${KUBE_VERSION_LDFLAGS}"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|"
  "workflow-controller|argo|github.com/argoproj/argo-workflows/v3/cmd/workflow-controller|"
  "ray-operator|kuberay|github.com/ray-project/kuberay/ray-operator|"
  "training-operator|training-operator|github.com/kubeflow/training-operator/cmd/training-operator.v1|"
  # remove_all_sd: the tests scrape static targets only; without the cloud service discoveries
  # (AWS, Azure, GCE, Kubernetes, ...) the cold build compiles 3,600 Go files instead of 11,500.
  "prometheus|prometheus|github.com/prometheus/prometheus/cmd/prometheus||remove_all_sd"
  "helm|helm|helm.sh/helm/v3/cmd/helm| -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=${KUBE_MAJOR} -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${KUBE_MINOR}"
  "controller-gen|dev|sigs.k8s.io/controller-tools/cmd/controller-gen|"
  "local-path-provisioner|local-path-provisioner|github.com/rancher/local-path-provisioner|"
  "golangci-lint|lint|github.com/golangci/golangci-lint/v2/cmd/golangci-lint|"
  # containerd 2.x for the real-node tier's CDI node image (hack/images/node.sh, NODE_CDI_IMAGE),
  # static like containerd's own release builds, without the snapshotters that need C headers.
  "containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|${CONTAINERD_LDFLAGS}|no_btrfs no_devmapper no_zfs|CGO_ENABLED=0"
  "containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|${CONTAINERD_LDFLAGS}|no_btrfs no_devmapper no_zfs|CGO_ENABLED=0"
  "ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr|${CONTAINERD_LDFLAGS}|no_btrfs no_devmapper no_zfs|CGO_ENABLED=0"
)

# Built only when named (`make images` names the kubelet and containerd): only the real-node tier
# runs them, so `make tools`, and with it `make test`, does not pay their cold build.
ON_REQUEST=(kubelet containerd containerd-shim-runc-v2 ctr)

# -s -w drops the symbol tables: the binaries are a third smaller and link faster. -trimpath is
# left out on purpose: it changes every compile cache key, so it would not share the build cache
# with plain `go build` runs of the same modules.
BASE_LDFLAGS="-s -w"

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

list_names() { for t in "${TOOLS[@]}"; do echo "${t%%|*}"; done; }

lookup() {
  local t
  for t in "${TOOLS[@]}"; do
    if [[ "${t%%|*}" == "$1" ]]; then echo "$t"; return 0; fi
  done
  return 1
}

stamp_of() { # module pkg ldflags tags environment
  local moddir="${ROOT}/hack/tools/$1"
  {
    cat "${moddir}/go.mod" "${moddir}/go.sum"
    echo "$2" "$3" "${BASE_LDFLAGS}"
    [[ -z "$4" ]] || echo "tags $4" # only when set: the stamps of tools without tags stay as they were
    # shellcheck disable=SC2086 # the environment is VAR=value words
    env ${5:-} "${GO}" env GOVERSION GOOS GOARCH CGO_ENABLED
  } | sha256sum | cut -d' ' -f1
}

is_fresh() { # name stamp
  [[ -x "${BIN}/$1" && -f "${BIN}/.stamps/$1" && "$(cat "${BIN}/.stamps/$1")" == "$2" && -z "${FORCE:-}" ]]
}

# build_group builds the named tools of one module that share their flags with one `go build`:
# one action graph compiles what they share once and links them side by side, where one build
# after another left a core idle through each link (kube-apiserver, -controller-manager,
# -scheduler and kubectl). Each tool's stamp is its own, as if built alone.
build_group() { # module ldflags tags environment name...
  local module="$1" ldflags="$2" tags="$3" environment="$4"
  shift 4
  local name pkg stamp names=() pkgs=() stamps=()
  for name in "$@"; do
    IFS='|' read -r _ _ pkg _ _ _ <<<"$(lookup "${name}")"
    stamp="$(stamp_of "${module}" "${pkg}" "${ldflags}" "${tags}" "${environment}")"
    if is_fresh "${name}" "${stamp}"; then
      echo "build-tools: ${name} is up to date"
      continue
    fi
    names+=("${name}") pkgs+=("${pkg}") stamps+=("${stamp}")
  done
  ((${#names[@]} > 0)) || return 0
  echo "build-tools: building ${names[*]} (${pkgs[*]}, module hack/tools/${module})..."
  local start=${SECONDS}
  # Build into a directory next to the targets and rename, so a concurrent reader (another
  # worktree sharing bin/) never runs a half-written binary. With -o DIR/, go names each binary
  # after its package's last element, which is the tool's name (main checks).
  local tmp="${BIN}/.build.tmp.$$"
  rm -rf "${tmp}" && mkdir -p "${tmp}"
  # GOWORK=off: each module builds from its own go.mod, which hack/tools/tools.work keeps in step
  # with the others (see the header of that file).
  # shellcheck disable=SC2086 # the environment is VAR=value words
  if ((${#names[@]} == 1)); then
    (cd "${ROOT}/hack/tools/${module}" &&
      env GOWORK=off ${environment} "${GO}" build -tags="${tags}" -ldflags="${BASE_LDFLAGS}${ldflags}" -o "${tmp}/${names[0]}" "${pkgs[0]}")
  else
    (cd "${ROOT}/hack/tools/${module}" &&
      env GOWORK=off ${environment} "${GO}" build -tags="${tags}" -ldflags="${BASE_LDFLAGS}${ldflags}" -o "${tmp}/" "${pkgs[@]}")
  fi
  local i
  for i in "${!names[@]}"; do
    mv -f "${tmp}/${names[i]}" "${BIN}/${names[i]}"
    echo "${stamps[i]}" >"${BIN}/.stamps/${names[i]}"
  done
  rmdir "${tmp}"
  echo "build-tools: built ${names[*]} in $(fmt_secs $((SECONDS - start)))"
}

main() {
  if [[ "${1:-}" == "--list" ]]; then list_names; return 0; fi
  local names=("$@")
  if [[ ${#names[@]} -eq 0 ]]; then mapfile -t names < <(list_names | grep -vxF -f <(printf '%s\n' "${ON_REQUEST[@]}")); fi
  local n t
  for n in "${names[@]}"; do
    lookup "$n" >/dev/null || { echo "build-tools: unknown tool '$n' (known: $(list_names | tr '\n' ' '))" >&2; return 2; }
  done

  mkdir -p "${BIN}/.stamps"
  # One builder at a time per bin/: the worktrees of this repository share it, and two cold
  # builds of kube-apiserver on two cores only slow each other down.
  exec 9>"${BIN}/.stamps/.lock"
  if command -v flock >/dev/null; then
    flock -n 9 || { echo "build-tools: waiting for another build-tools.sh using ${BIN}..."; flock 9; }
  fi

  # Group the requested tools by module, flags and tags, in the order they were asked for. A
  # tool whose binary name is not its package's last element builds on its own.
  local start=${SECONDS} module pkg ldflags tags environment key keys=() members=() i found
  for n in "${names[@]}"; do
    t="$(lookup "$n")"
    IFS='|' read -r _ module pkg ldflags tags environment <<<"$t"
    key="${module}|${ldflags}|${tags}|${environment}"
    [[ "${pkg##*/}" == "$n" ]] || key="${key}|alone:$n"
    found=""
    for i in "${!keys[@]}"; do
      if [[ "${keys[i]}" == "${key}" ]]; then members[i]+=" $n"; found=1; break; fi
    done
    [[ -n "${found}" ]] || { keys+=("${key}"); members+=("$n"); }
  done
  for i in "${!keys[@]}"; do
    IFS='|' read -r module ldflags tags environment _ <<<"${keys[i]}"
    # shellcheck disable=SC2086 # members are tool names, one word each
    build_group "${module}" "${ldflags}" "${tags}" "${environment}" ${members[i]}
  done
  echo "build-tools: done in $(fmt_secs $((SECONDS - start)))"
}

main "$@"
