#!/usr/bin/env bash
# fairway.sh builds the fairway image (FAIRWAY_IMAGE) from this tree: `go build` with cgo on the
# host (the module proxy is the only network it needs, and the host's build cache makes it
# incremental), stamped with VERSION (git describe), then copied onto the Debian base.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
GO="${GO:-go}"
VERSION="${VERSION:-$(git -C "${ROOT}" describe --tags --always --dirty 2>/dev/null || echo devel)}"

require_docker
image_exists "${BASE_IMAGE}" || { echo "images: ${BASE_IMAGE} is missing: run hack/images/base.sh" >&2; exit 1; }
# A cgo binary needs the glibc it was linked against, or an older one at run time: the base's.
# awk reads all of ldd's output: with head, ldd could die of SIGPIPE, and pipefail with set -e
# ended the script there, silently, now and then.
host_glibc="$(ldd --version 2>/dev/null | awk 'NR == 1 {print $NF}')"
base_glibc="$(docker run --rm "${BASE_IMAGE}" sh -c "ldd --version | head -1" | awk '{print $NF}')"
if [[ "$(printf '%s\n%s\n' "${host_glibc}" "${base_glibc}" | sort -V | tail -1)" != "${base_glibc}" ]]; then
  echo "images: the host's glibc ${host_glibc} is newer than the base's ${base_glibc}: build on ${SUITE} (or set DEBIAN_SUITE)" >&2
  exit 1
fi

start=${SECONDS}
ctx="${OUT}/fairway-context"
mkdir -p "${ctx}"
# No -trimpath: it would change every compile cache key and rebuild all of the dependencies.
(cd "${ROOT}" && CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -Wno-deprecated-declarations}" \
  "${GO}" build -ldflags="-s -w -X main.version=${VERSION}" -o "${ctx}/fairway" ./cmd/fairway)
# The share library (gpu-agent/shim) the agent installs on the node and the share device plugin
# mounts into GPU shares' containers; built as the top-level Dockerfile builds it, with the host's
# gcc against the host's glibc (the base's, checked above). Without it the agent refuses to start
# with the chart's default agent.shares.libraryDirectory.
gcc -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -o "${ctx}/libfairway-share.so" \
  "${ROOT}/gpu-agent/shim/lib/share.c" -ldl -lpthread
log "built the fairway binary ${VERSION} and the share library in $(fmt_secs $((SECONDS - start)))"
start=${SECONDS}
quiet docker build -q --build-arg "BASE=${BASE_IMAGE}" --label "org.opencontainers.image.version=${VERSION}" \
  -f "${ROOT}/hack/images/fairway/Dockerfile" -t "${FAIRWAY_IMAGE}" "${ctx}" >/dev/null
got="$(docker run --rm "${FAIRWAY_IMAGE}" version 2>&1 | head -1)"
log "built ${FAIRWAY_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${FAIRWAY_IMAGE}" | numfmt --to=iec)); fairway version: ${got}"
