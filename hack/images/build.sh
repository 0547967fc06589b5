#!/usr/bin/env bash
# build.sh is `make images`: the Debian base, the real-node image (with the pause and workload
# images preloaded) and the fairway image, each skipped when up to date. See docs/real-nodes.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/lib.sh"
require_docker
start=${SECONDS}
"${HERE}/base.sh"
"${HERE}/node.sh"
"${HERE}/fairway.sh"
"${HERE}/standins.sh"
log "done in $(fmt_secs $((SECONDS - start)))"
docker image ls --format '  {{.Repository}}:{{.Tag}}\t{{.Size}}' | grep -E 'fairway' >&2 || true
