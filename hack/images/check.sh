#!/usr/bin/env bash
# check.sh fails, saying what is missing, unless a Docker engine answers and the images the
# real-node tier runs exist: `make e2e-nodes` never skips.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_docker
missing=()
for img in "${NODE_IMAGE}" "${NODE_CDI_IMAGE}" "${FAIRWAY_IMAGE}" "${ARGOEXEC_IMAGE}" "${KFP_IMAGE}" "${RAY_IMAGE}"; do
  image_exists "${img}" || missing+=("${img}")
done
if ((${#missing[@]})); then
  echo "e2e-nodes: missing image(s) ${missing[*]}: run 'make images' first" >&2
  exit 1
fi
