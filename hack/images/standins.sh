#!/usr/bin/env bash
# standins.sh builds the images of the tools' own pods that the real-node tier runs, where no
# registry serves the real ones (docs/real-nodes.md):
#   ARGOEXEC_IMAGE  Argo's executor (argoexec init/wait/emissary), built from the Argo module the
#                   workflow-controller is built from (hack/tools/argo), static, on busybox: it is
#                   the real executor, not a stand-in;
#   KFP_IMAGE       Kubeflow Pipelines' driver and launcher (test/standins/kfp), static, on busybox;
#   RAY_IMAGE       rayproject/ray's CLI as KubeRay's pods call it (hack/images/ray).
# Each is skipped when it exists with the same inputs (FORCE=1 rebuilds).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE="${ROOT}/hack/images"
GO="${GO:-go}"

require_docker
for img in "${BASE_IMAGE}" "${BUSYBOX_IMAGE}"; do
  image_exists "${img}" || { echo "images: ${img} is missing: run hack/images/base.sh and node.sh" >&2; exit 1; }
done
label_of() { docker image inspect -f '{{index .Config.Labels "fairway.inputs"}}' "$1" 2>/dev/null || true; }
fresh() { [[ -z "${FORCE:-}" && "$(label_of "$1")" == "$2" ]]; }
tmp="$(mktemp -d)"
trap 'chmod -R u+w "${tmp}" 2>/dev/null; rm -rf "${tmp}"' EXIT

# on_busybox DST_IMAGE INPUTS ENV BINARY LINK... puts BINARY at /bin/<its name> of the busybox
# image, with LINKs to it and ENV (a Dockerfile ENV argument, or empty), as DST_IMAGE.
on_busybox() {
  local image="$1" inputs="$2" env="$3" binary="$4"
  shift 4
  local ctx="${tmp}/ctx-${image//[^a-z0-9]/-}"
  mkdir -p "${ctx}"
  cp "${binary}" "${ctx}/"
  {
    echo "FROM ${BUSYBOX_IMAGE}"
    echo "COPY $(basename "${binary}") /bin/$(basename "${binary}")"
    for l in "$@"; do echo "RUN ln -s $(basename "${binary}") /bin/${l}"; done
    [[ -z "${env}" ]] || echo "ENV ${env}"
    # Not root: KFP runs its pods with runAsNonRoot, Argo its executor as a user of its own.
    echo "USER 65532:65532"
  } >"${ctx}/Dockerfile"
  quiet docker build -q --label "fairway.inputs=${inputs}" -t "${image}" "${ctx}" >/dev/null
}

# 1. argoexec, at the version hack/tools/argo pins.
start=${SECONDS}
argo_dir="$(cd "${ROOT}/hack/tools/argo" && "${GO}" list -m -f '{{.Dir}}' "${ARGO_MODULE}")"
argo_version="$(cd "${ROOT}/hack/tools/argo" && "${GO}" list -m -f '{{.Version}}' "${ARGO_MODULE}")"
inputs="$(cat "${ROOT}/hack/tools/argo/go.mod" "${ROOT}/hack/tools/argo/go.sum" "${BASH_SOURCE[0]}" <("${GO}" version) \
  <(docker image inspect -f '{{.Id}}' "${BUSYBOX_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${ARGOEXEC_IMAGE}" "${inputs}"; then
  log "${ARGOEXEC_IMAGE} is up to date"
else
  # The module as the proxy serves it (v3.7.18) has no Linux file for workflow/executor/osspecific's
  # process-group helpers (Setpgid, Kill, Wait: "undefined: Setpgid" on Linux); its Darwin file is
  # plain POSIX, so a copy of the module gets it as the Linux one. This fails loudly, rather than
  # building something else, once a release ships its own.
  src="${tmp}/argo-workflows"
  cp -r "${argo_dir}" "${src}"
  chmod -R u+w "${src}"
  osdir="${src}/workflow/executor/osspecific"
  if [[ ! -f "${osdir}/signal_linux.go" ]]; then
    cp "${osdir}/signal_darwin.go" "${osdir}/signal_linux.go"
  else
    echo "images: ${ARGO_MODULE} ${argo_version} has its own signal_linux.go now: drop the copy in standins.sh" >&2
    exit 1
  fi
  # Built in hack/tools/argo's build list (a temporary go.mod that replaces the module by the
  # copy), so argoexec's packages are the controller's; CGO off, since argoexec copies itself into
  # every workflow pod's main container, whatever its image.
  cp "${ROOT}/hack/tools/argo/go.mod" "${ROOT}/hack/tools/argo/go.sum" "${tmp}/"
  echo "replace ${ARGO_MODULE} => ${src}" >>"${tmp}/go.mod"
  (cd "${ROOT}/hack/tools/argo" && CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -modfile="${tmp}/go.mod" \
    -ldflags "-s -w -X ${ARGO_MODULE}.version=${argo_version}" -o "${tmp}/argoexec" "${ARGO_MODULE}/cmd/argoexec")
  on_busybox "${ARGOEXEC_IMAGE}" "${inputs}" "" "${tmp}/argoexec"
  log "built ${ARGOEXEC_IMAGE} (argoexec ${argo_version}) in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${ARGOEXEC_IMAGE}" | numfmt --to=iec))"
fi

# 2. The KFP driver and launcher.
start=${SECONDS}
CGO_ENABLED=0 "${GO}" -C "${ROOT}" build -ldflags "-s -w" -o "${tmp}/kfp-standin" ./test/standins/kfp
inputs="$(cat "${tmp}/kfp-standin" <(docker image inspect -f '{{.Id}}' "${BUSYBOX_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${KFP_IMAGE}" "${inputs}"; then
  log "${KFP_IMAGE} is up to date"
else
  on_busybox "${KFP_IMAGE}" "${inputs}" "KFP_STANDIN_IMAGE=${KFP_IMAGE}" "${tmp}/kfp-standin" driver launcher-v2 launch
  log "built ${KFP_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${KFP_IMAGE}" | numfmt --to=iec))"
fi

# 3. Ray's CLI.
start=${SECONDS}
inputs="$(cat "${HERE}/ray/ray" "${HERE}/ray/Dockerfile" <(docker image inspect -f '{{.Id}}' "${BASE_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${RAY_IMAGE}" "${inputs}"; then
  log "${RAY_IMAGE} is up to date"
else
  quiet docker build -q --network host --build-arg "BASE=${BASE_IMAGE}" --label "fairway.inputs=${inputs}" \
    -t "${RAY_IMAGE}" "${HERE}/ray" >/dev/null
  log "built ${RAY_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${RAY_IMAGE}" | numfmt --to=iec))"
fi
