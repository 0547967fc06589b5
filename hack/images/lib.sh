# lib.sh: shared helpers of hack/images/*.sh (sourced, not run).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${IMAGES_OUT:-${ROOT}/_output/images}"
SUITE="${DEBIAN_SUITE:-bookworm}"
# Image names: local only (nothing is ever pushed), so the "fairway.local" registry part only keeps
# them from looking like images a registry could serve.
BASE_IMAGE="${BASE_IMAGE:-fairway.local/debian-base:${SUITE}}"
NODE_IMAGE="${NODE_IMAGE:-fairway.local/node:dev}"
# The node image with containerd 2.x, which applies CDI devices (test/nodes CDIImage).
NODE_CDI_IMAGE="${NODE_CDI_IMAGE:-fairway.local/node-containerd2:dev}"
FAIRWAY_IMAGE="${FAIRWAY_IMAGE:-ghcr.io/fairway-sched/fairway:dev}"
PAUSE_IMAGE="${PAUSE_IMAGE:-fairway.local/pause:3.10}"
BUSYBOX_IMAGE="${BUSYBOX_IMAGE:-fairway.local/busybox:1}"
# The tools' own pods (hack/images/standins.sh); test/e2enodes names the same images.
ARGOEXEC_IMAGE="${ARGOEXEC_IMAGE:-fairway.local/argoexec:dev}"
KFP_IMAGE="${KFP_IMAGE:-fairway.local/kfp-standin:dev}"
RAY_IMAGE="${RAY_IMAGE:-fairway.local/ray-standin:dev}"
ARGO_MODULE=github.com/argoproj/argo-workflows/v3

log() { echo "images: $*" >&2; }
fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

require_docker() {
  if ! command -v docker >/dev/null; then
    echo "images: docker is not installed: the images and the real-node tier need a Docker engine" >&2
    exit 1
  fi
  local out
  if ! out="$(docker info 2>&1)"; then
    echo "images: 'docker info' failed: the images and the real-node tier need a running Docker engine:" >&2
    echo "${out}" | tail -5 >&2
    exit 1
  fi
}

# quiet runs a command without the legacy builder's deprecation notice (where buildx is missing).
quiet() { "$@" 2> >(grep -v -e 'legacy builder is deprecated' -e 'Install the buildx' -e 'docs.docker.com/go/buildx' -e '^ *$' >&2); }

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# debian_mirror prints the Debian mirror this machine's own apt sources use for SUITE, so that no
# host name is written into the repository and a machine behind its own mirror uses that one.
# DEBIAN_MIRROR overrides it.
debian_mirror() {
  if [[ -n "${DEBIAN_MIRROR:-}" ]]; then echo "${DEBIAN_MIRROR}"; return; fi
  local f uri=""
  # deb822 sources first (Debian 12's default), then one-line sources.list entries.
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    uri="$(awk -v suite="${SUITE}" '
      /^URIs:/ {u=$2} /^Suites:/ {for (i = 2; i <= NF; i++) if ($i == suite) s=1}
      /^$/ {if (s && u != "") {print u; exit} u=""; s=0}
      END {if (s && u != "") print u}' "$f" | head -1)"
    [[ -n "${uri}" ]] && break
  done
  if [[ -z "${uri}" ]]; then
    uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk -v suite="${SUITE}" '$1 == "deb" && $0 !~ /\[/ && $3 == suite {print $2; exit}
                               $1 == "deb" && $0 ~ /\]/ {for (i = 2; i <= NF; i++) if ($i ~ /\]$/) {if ($(i+2) == suite) {print $(i+1); exit}}}')"
  fi
  if [[ -z "${uri}" ]]; then
    echo "images: no apt source for '${SUITE}' in /etc/apt/sources.list{,.d}: set DEBIAN_MIRROR" >&2
    exit 1
  fi
  echo "${uri}"
}
