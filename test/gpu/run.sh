#!/usr/bin/env bash
# The gpu-agent's check on a real NVIDIA GPU, prepared to run in well under five minutes:
#
#   1. discovery through the real NVML, printed as JSON (what the agent would publish);
#   2. MPS isolation: the agent's MPS supervision starts nvidia-cuda-mps-control, then a CUDA
#      client limited to N MiB (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) must fail to allocate N+512
#      MiB while one allocating within its limit succeeds (and, as a control, the same N+512 MiB
#      succeeds without a limit).
#
# Usage: test/gpu/run.sh [BINDIR]
#   BINDIR holds prebuilt fairway and cudaalloc (test/gpu/build.sh; default _output/gpu-check
#   next to the repository, or the folder this script sits in). Without them, and with Go on
#   the machine, they are built first (that can take minutes).
#
# Exit status: 0 every check ran and passed; 1 a check ran and failed; 2 nothing failed but
# something could not run (each such check is printed as "SKIPPED: <what was missing>").
set -uo pipefail

if [[ -z "${FAIRWAY_GPU_CHECK_INNER:-}" ]] && command -v timeout >/dev/null; then
  # One watchdog for the whole check.
  FAIRWAY_GPU_CHECK_INNER=1 exec timeout --foreground -k 5 290 "$0" "$@"
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." 2>/dev/null && pwd || echo "$here")
bin=${1:-}
if [[ -z "$bin" ]]; then
  if [[ -x "$here/fairway" ]]; then bin=$here; else bin=$root/_output/gpu-check; fi
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fairway-gpu-check.XXXXXX")
LIMIT_GIB=2         # the MPS client's limit, as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=2G"
N=$((LIMIT_GIB * 1024)) # the same in MiB
OVER=$((N + 512))   # must fail under the limit
WITHIN=$((N / 2))   # must succeed under the limit

failed=0
skipped=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
skip() { echo "SKIPPED: $*"; skipped=1; }
finish() {
  echo
  if ((failed)); then echo "RESULT: FAILED (details above; files in $work)"; exit 1; fi
  if ((skipped)); then echo "RESULT: INCOMPLETE: some checks could not run (SKIPPED above); nothing failed"; exit 2; fi
  echo "RESULT: PASSED"; exit 0
}

echo "== fairway gpu-agent real-GPU check ($(date -u +%FT%TZ), $(uname -n))"

# 0. Binaries.
if [[ ! -x "$bin/fairway" || ! -x "$bin/cudaalloc" ]]; then
  if command -v go >/dev/null && [[ -f "$root/go.mod" ]]; then
    echo "-- no prebuilt binaries in $bin; building with $(go version | cut -d' ' -f3)"
    bin=$work/bin
    if ! (cd "$root" && CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" go build -o "$bin/fairway" ./cmd/fairway &&
          CGO_ENABLED=1 go build -o "$bin/cudaalloc" ./test/gpu/cudaalloc); then
      fail "building the check's binaries"
      finish
    fi
  else
    skip "everything: no fairway/cudaalloc in $bin and no Go toolchain to build them (run test/gpu/build.sh elsewhere and pass its folder)"
    finish
  fi
fi
echo "-- binaries: $bin"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L 2>&1 | sed 's/^/   nvidia-smi: /'
else
  echo "   (no nvidia-smi)"
fi

# 1. Discovery on the real device.
echo "-- 1. discovery through NVML"
if timeout 60 "$bin/fairway" agent discover --nvml=real --node-name "$(uname -n)" >"$work/discovery.json" 2>"$work/discovery.err"; then
  cat "$work/discovery.json"
  gpus=$(grep -c '"uuid": "GPU-' "$work/discovery.json" || true)
  if ((gpus == 0)); then
    fail "discovery found no GPU"
  elif grep -q '"healthy": false' "$work/discovery.json"; then
    fail "discovery reports an unhealthy GPU"
  elif ! grep -q '"memoryMiB": [1-9]' "$work/discovery.json"; then
    fail "discovery reports no GPU memory"
  else
    pass "discovery: $gpus GPU(s) with UUID, memory and health"
  fi
else
  err=$(tail -5 "$work/discovery.err")
  if grep -q 'LIBRARY_NOT_FOUND\|DRIVER_NOT_LOADED' "$work/discovery.err"; then
    skip "discovery: no usable NVIDIA driver here: $err"
  else
    fail "discovery: $err"
  fi
fi

# 2. MPS isolation.
echo "-- 2. MPS memory isolation (limit ${N} MiB: ${WITHIN} MiB must fit, ${OVER} MiB must not)"
mps_check() {
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    skip "MPS isolation: nvidia-cuda-mps-control not found in PATH (soft mode only on this machine)"
    return
  fi
  local probe
  if ! probe=$(timeout 60 "$bin/cudaalloc" -probe 2>&1); then
    skip "MPS isolation: the CUDA driver is not usable: $probe"
    return
  fi
  local pipe=$work/mps/pipe log=$work/mps/log
  "$bin/fairway" agent mps --mps-pipe-directory "$pipe" --mps-log-directory "$log" >"$work/mps.out" 2>&1 &
  local mps_pid=$!
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -e "$pipe/control" ]] && break
    kill -0 "$mps_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -e "$pipe/control" ]]; then
    fail "MPS control daemon did not start: $(tail -5 "$work/mps.out")"
    kill "$mps_pid" 2>/dev/null
    return
  fi
  pass "MPS control daemon started by the agent (pipe $pipe)"

  client() { # client LIMITED(yes|"") MIB -> exit status of cudaalloc
    local limited=$1 mib=$2
    local -a env=(CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$log")
    if [[ -n "$limited" ]]; then
      env+=(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=${LIMIT_GIB}G" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50)
    fi
    env "${env[@]}" timeout 60 "$bin/cudaalloc" -mib "$mib" 2>&1 | sed 's/^/   /'
    return "${PIPESTATUS[0]}"
  }
  client "" "$OVER"; local rc=$?
  if ((rc != 0)); then
    fail "control: an MPS client without a limit could not allocate ${OVER} MiB (status $rc); the limit check below would prove nothing"
  else
    pass "control: without a limit an MPS client allocates ${OVER} MiB"
    client yes "$WITHIN"; rc=$?
    if ((rc == 0)); then pass "a client limited to ${N} MiB allocates ${WITHIN} MiB"; else fail "a client limited to ${N} MiB could not allocate ${WITHIN} MiB (status $rc)"; fi
    client yes "$OVER"; rc=$?
    case $rc in
      3) pass "a client limited to ${N} MiB cannot allocate ${OVER} MiB (CUDA_ERROR_OUT_OF_MEMORY)" ;;
      0) fail "a client limited to ${N} MiB allocated ${OVER} MiB: the MPS memory limit is NOT enforced" ;;
      *) fail "a client limited to ${N} MiB failed to allocate ${OVER} MiB, but not with out-of-memory (status $rc)" ;;
    esac
  fi
  kill -TERM "$mps_pid" 2>/dev/null
  for ((i = 0; i < 150; i++)); do kill -0 "$mps_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$mps_pid" 2>/dev/null; then
    fail "the agent's MPS supervision did not stop in 15s"
    kill -KILL "$mps_pid" 2>/dev/null
  else
    pass "MPS control daemon stopped (quit) with the agent"
  fi
  if ((failed)) && [[ -f "$log/control.log" ]]; then
    echo "   last lines of the MPS control log:"; tail -10 "$log/control.log" | sed 's/^/   /'
  fi
}
mps_check
finish
