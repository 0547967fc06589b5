#!/usr/bin/env bash
# base.sh builds the Debian base image every other image starts from: a minbase debootstrap of
# SUITE from this machine's own Debian mirror, imported with `docker import`, since no image
# registry is reachable where fairway's images are built. Skipped when the image exists
# (FORCE=1 rebuilds). Needs root (debootstrap) and a Docker engine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_docker
if image_exists "${BASE_IMAGE}" && [[ -z "${FORCE:-}" ]]; then
  log "${BASE_IMAGE} exists (FORCE=1 rebuilds)"
  exit 0
fi
command -v debootstrap >/dev/null || {
  echo "images: debootstrap is missing: apt-get install debootstrap" >&2
  exit 1
}
[[ "$(id -u)" == 0 ]] || { echo "images: debootstrap needs root" >&2; exit 1; }

mirror="$(debian_mirror)"
start=${SECONDS}
rootfs="${OUT}/rootfs-base"
mkdir -p "${OUT}/debs"
rm -rf "${rootfs}"
log "debootstrap ${SUITE} (minbase) from ${mirror}..."
# The package cache outlives the rootfs, so a rebuild downloads nothing.
debootstrap --variant=minbase --cache-dir="${OUT}/debs" "${SUITE}" "${rootfs}" "${mirror}" \
  >"${OUT}/debootstrap.log" 2>&1 || {
  tail -20 "${OUT}/debootstrap.log" >&2
  exit 1
}
# What an image needs no copy of: apt lists and caches come back with `apt-get update`, and docs
# and man pages are never read in a container.
rm -rf "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/var/cache/apt/*.bin \
  "${rootfs}"/usr/share/doc/* "${rootfs}"/usr/share/man/* "${rootfs}"/usr/share/info/*
cat >"${rootfs}/etc/dpkg/dpkg.cfg.d/01-nodoc" <<'CFG'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
CFG
tar -C "${rootfs}" --numeric-owner -c . |
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "${BASE_IMAGE}" >/dev/null
rm -rf "${rootfs}"
log "built ${BASE_IMAGE} in $(fmt_secs $((SECONDS - start))) ($(docker image inspect -f '{{.Size}}' "${BASE_IMAGE}" | numfmt --to=iec))"
