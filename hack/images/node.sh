#!/usr/bin/env bash
# node.sh builds the real-node image (NODE_IMAGE) and the two images preloaded into its
# containerd: a pause image (a static C program built here with gcc) and a workload image of
# Debian's busybox-static. The kubelet is KUBELET (default <repo>/bin/kubelet, which
# `hack/build-tools.sh kubelet` makes). Then the CDI node image (NODE_CDI_IMAGE): the same node
# with containerd 2.x from CONTAINERD_BIN (default <repo>/bin: containerd,
# containerd-shim-runc-v2 and ctr, which `hack/build-tools.sh containerd containerd-shim-runc-v2
# ctr` makes). Each image is skipped when it exists and its inputs did not change (FORCE=1
# rebuilds).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE="${ROOT}/hack/images"
KUBELET="${KUBELET:-${ROOT}/bin/kubelet}"
CONTAINERD_BIN="${CONTAINERD_BIN:-${ROOT}/bin}"
PACKAGES_IMAGE="${PACKAGES_IMAGE:-fairway.local/node-packages:${SUITE}}"

require_docker
command -v gcc >/dev/null || { echo "images: gcc is missing (the pause image is built from hack/images/pause/pause.c)" >&2; exit 1; }
image_exists "${BASE_IMAGE}" || { echo "images: ${BASE_IMAGE} is missing: run hack/images/base.sh" >&2; exit 1; }

# label_of prints an image's fairway.inputs label ("" when the image is missing).
label_of() { docker image inspect -f '{{index .Config.Labels "fairway.inputs"}}' "$1" 2>/dev/null || true; }
fresh() { [[ -z "${FORCE:-}" && "$(label_of "$1")" == "$2" ]]; }

ctx="${OUT}/node-context"
mkdir -p "${ctx}/images"

# 1. The packages: the slow, network-bound layer, kept as its own image so a new kubelet or
# entrypoint rebuilds in seconds.
start=${SECONDS}
inputs="$(cat "${HERE}/node/Dockerfile.packages" <(docker image inspect -f '{{.Id}}' "${BASE_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${PACKAGES_IMAGE}" "${inputs}"; then
  log "${PACKAGES_IMAGE} is up to date"
else
  log "building ${PACKAGES_IMAGE} (apt-get install from the base's Debian mirror)..."
  quiet docker build -q --network host --build-arg "BASE=${BASE_IMAGE}" --label "fairway.inputs=${inputs}" \
    -f "${HERE}/node/Dockerfile.packages" -t "${PACKAGES_IMAGE}" "${HERE}/node" >/dev/null
  log "built ${PACKAGES_IMAGE} in $(fmt_secs $((SECONDS - start))): $(docker run --rm "${PACKAGES_IMAGE}" cat /etc/fairway-node-packages | tr '\n' ',')"
fi

# 2. The preloaded images, as `docker save` archives that `ctr images import` reads.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
inputs="$(sha256sum "${HERE}/pause/pause.c" | cut -c1-16)"
if ! fresh "${PAUSE_IMAGE}" "${inputs}" || [[ ! -f "${ctx}/images/pause.tar" ]]; then
  mkdir -p "${tmp}/pause"
  gcc -static -O2 -s -o "${tmp}/pause/pause" "${HERE}/pause/pause.c"
  tar -C "${tmp}/pause" --numeric-owner -c . |
    docker import --change 'ENTRYPOINT ["/pause"]' --change "LABEL fairway.inputs=${inputs}" - "${PAUSE_IMAGE}" >/dev/null
  docker save -o "${ctx}/images/pause.tar" "${PAUSE_IMAGE}"
  log "built ${PAUSE_IMAGE}"
fi
inputs="$(docker run --rm "${PACKAGES_IMAGE}" dpkg-query -W -f='${Version}' busybox-static)"
if ! fresh "${BUSYBOX_IMAGE}" "${inputs}" || [[ ! -f "${ctx}/images/busybox.tar" ]]; then
  fs="${tmp}/busybox"
  mkdir -p "${fs}/bin" "${fs}/tmp" "${fs}/etc" "${fs}/data"
  chmod 1777 "${fs}/tmp"
  docker run --rm "${PACKAGES_IMAGE}" cat /bin/busybox >"${fs}/bin/busybox"
  chmod 755 "${fs}/bin/busybox"
  for applet in $("${fs}/bin/busybox" --list); do
    [[ "${applet}" == busybox ]] || ln -s busybox "${fs}/bin/${applet}"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"${fs}/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"${fs}/etc/group"
  tar -C "${fs}" --numeric-owner -c . |
    docker import --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' --change "LABEL fairway.inputs=${inputs}" \
      - "${BUSYBOX_IMAGE}" >/dev/null
  docker save -o "${ctx}/images/busybox.tar" "${BUSYBOX_IMAGE}"
  log "built ${BUSYBOX_IMAGE} (busybox-static ${inputs})"
fi

# 3. The node image itself.
[[ -x "${KUBELET}" ]] || { echo "images: no kubelet at ${KUBELET}: run hack/build-tools.sh kubelet" >&2; exit 1; }
start=${SECONDS}
cp "${KUBELET}" "${ctx}/kubelet"
cp "${HERE}/node/containerd.toml" "${HERE}/node/entrypoint.sh" "${ctx}/"
inputs="$(cd "${ctx}" && find . -type f -print0 | sort -z | xargs -0 sha256sum |
  cat - "${HERE}/node/Dockerfile" <(docker image inspect -f '{{.Id}}' "${PACKAGES_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${NODE_IMAGE}" "${inputs}"; then
  log "${NODE_IMAGE} is up to date"
else
  quiet docker build -q --build-arg "PACKAGES=${PACKAGES_IMAGE}" --label "fairway.inputs=${inputs}" \
    -f "${HERE}/node/Dockerfile" -t "${NODE_IMAGE}" "${ctx}" >/dev/null
  log "built ${NODE_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${NODE_IMAGE}" | numfmt --to=iec); kubelet $("${KUBELET}" --version | cut -d' ' -f2))"
fi

# 4. The CDI node image: containerd 2.x over Debian's 1.6 (docs/real-nodes.md, CDI).
ctx="${OUT}/node-cdi-context"
rm -rf "${ctx}" && mkdir -p "${ctx}"
for b in containerd containerd-shim-runc-v2 ctr; do
  [[ -x "${CONTAINERD_BIN}/${b}" ]] || { echo "images: no ${b} in ${CONTAINERD_BIN}: run hack/build-tools.sh containerd containerd-shim-runc-v2 ctr" >&2; exit 1; }
  cp "${CONTAINERD_BIN}/${b}" "${ctx}/"
done
cp "${HERE}/node/containerd2.toml" "${ctx}/"
start=${SECONDS}
inputs="$(cd "${ctx}" && find . -type f -print0 | sort -z | xargs -0 sha256sum |
  cat - "${HERE}/node/Dockerfile.containerd2" <(docker image inspect -f '{{.Id}}' "${NODE_IMAGE}") | sha256sum | cut -c1-16)"
if fresh "${NODE_CDI_IMAGE}" "${inputs}"; then
  log "${NODE_CDI_IMAGE} is up to date"
else
  quiet docker build -q --build-arg "NODE=${NODE_IMAGE}" --label "fairway.inputs=${inputs}" \
    -f "${HERE}/node/Dockerfile.containerd2" -t "${NODE_CDI_IMAGE}" "${ctx}" >/dev/null
  log "built ${NODE_CDI_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${NODE_CDI_IMAGE}" | numfmt --to=iec); $("${ctx}/containerd" --version | cut -d' ' -f2-3))"
fi
