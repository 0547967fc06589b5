#!/usr/bin/env bash
# The gpu-agent's check on a real NVIDIA GPU, prepared to run in well under five minutes:
#
#   1. discovery through the real NVML, printed as JSON (what the agent would publish);
#   2. MPS isolation of two tenants on GPU 0, as the agent's mps mode runs them: each its own
#      control daemon (the agent's code), pipe directory (root's, sticky) and /dev/shm, the memory
#      limit N MiB set on the server side, the share library (libfairway-share.so, loaded with
#      LD_PRELOAD here where a pod has it in /etc/ld.so.preload), and an unprivileged user of
#      its own. A tenant allocates within N and fails past it, with and without the library;
#      every escape a pod can try must fail and is printed as "escape blocked" (an escape that
#      works fails the check): no MPS (its pipe directory pointed elsewhere), the other tenant's
#      pipe directory, a higher CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, CUDA_VISIBLE_DEVICES games,
#      removing its control pipe, commands written to it (raising the limits, restarting its
#      server), and no MPS without the library (what a static binary does; it is printed which
#      memory limit the GPU enforces: "kernel" where the driver has the per-cgroup limit, r615
#      and later, which the agent's code then sets on a cgroup of the tenant's own, as on a
#      pod's; "library only" where it has none, and then the attempt succeeds and fails the
#      check). FAIRWAY_GPU_CHECK_CGROUP_ROOT is the cgroup v2 mount (/sys/fs/cgroup). The tenant's
#      cuMemGetInfo and nvidia-smi show N MiB as the total and its own use as used; the other
#      tenant allocates on the same GPU afterwards, and, while one works, the other's /dev/shm
#      shows none of its shared memory. Needs root (mount namespaces) and setpriv.
#   3. Idle lending: an owner (a notebook) holds GPU memory and idles; the agent's own idleness
#      code watches it (`fairway agent watch`); a loan takes the rest of the memory and works,
#      which must not wake the owner; the owner starts working, the agent sees it, the loan is
#      stopped (SIGTERM, SIGKILL after a grace period), and the owner's time back to full speed
#      (90% of its throughput alone, measured first) is printed as
#      "lending: detect=X ms stop=Y ms owner-full-speed=Z ms".
#   4. Swap: an owner fills 60% of the GPU with a known pattern and idles; the agent's calls
#      (`fairway agent swap-check`: cuCheckpointProcessLock and Checkpoint) move its memory to
#      host RAM; a loan takes 90% of the GPU and works; the owner touches the GPU (its call
#      blocks), the agent's sign of work (the owner's CPU) sees it, the loan is stopped, the owner
#      restored and unlocked, and it reads its pattern back byte for byte. Five cycles, each
#      printed as "swap: out=X ms in=Y ms bytes=Z verified", then the host-device bound.
#
# Usage: test/gpu/run.sh [BINDIR]
#   BINDIR holds prebuilt fairway, cudaalloc and libfairway-share.so (test/gpu/build.sh; default _output/gpu-check
#   next to the repository, or the folder this script sits in). Without them, and with Go on
#   the machine, they are built first (that can take minutes).
#
# FAIRWAY_GPU_CHECK_SECTIONS (default "mps,lending,swap") picks sections 2, 3 and 4 to run, to rerun one
# alone; a section left out counts as not run (exit status 2 at best). Discovery always runs.
#
# Exit status: 0 every check ran and passed; 1 a check ran and failed; 2 nothing failed but
# something could not run (each such check is printed as "SKIPPED: <what was missing>").
set -uo pipefail

if [[ -z "${FAIRWAY_GPU_CHECK_INNER:-}" ]] && command -v timeout >/dev/null; then
  # One watchdog for the whole check.
  FAIRWAY_GPU_CHECK_INNER=1 exec timeout --foreground -k 5 320 "$0" "$@"
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." 2>/dev/null && pwd || echo "$here")
bin=${1:-}
if [[ -z "$bin" ]]; then
  if [[ -x "$here/fairway" ]]; then bin=$here; else bin=$root/_output/gpu-check; fi
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fairway-gpu-check.XXXXXX")
LIMIT_GIB=2         # each MPS tenant's server-side limit (set_default_device_pinned_mem_limit)
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
          CGO_ENABLED=1 go build -o "$bin/cudaalloc" ./test/gpu/cudaalloc &&
          gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$bin/libfairway-share.so" gpu-agent/shim/lib/share.c -ldl -lpthread); then
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

# 2. Two tenants on one GPU, as the agent's mps mode runs them (docs/isolation.md): each its own
# MPS control daemon, pipe directory and /dev/shm (the daemon in a mount namespace of its own),
# only GPU 0 visible, the memory limit set on the server side, and the share library
# (libfairway-share.so) in its processes. Each tenant runs as an unprivileged user of its own,
# as a pod under Pod Security `restricted` does, and tries every escape a pod can; each must fail.
echo "-- 2. MPS: two tenants on GPU 0 (server-side limit ${N} MiB each: ${WITHIN} MiB must fit, ${OVER} MiB must not)"
TENANT_UID_a=${FAIRWAY_GPU_CHECK_UID_A:-61001}
TENANT_UID_b=${FAIRWAY_GPU_CHECK_UID_B:-61002}
mps_check() {
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    skip "MPS isolation: nvidia-cuda-mps-control not found in PATH (soft mode only on this machine)"
    return
  fi
  if (( ${FAIRWAY_GPU_CHECK_EUID:-$EUID} != 0 )); then
    skip "MPS isolation: needs root (each tenant's daemon runs in a mount namespace of its own with its /dev/shm)"
    return
  fi
  if ! command -v setpriv >/dev/null; then
    skip "MPS isolation: needs setpriv (util-linux) to run each tenant as an unprivileged user"
    return
  fi
  local probe
  if ! probe=$(timeout 60 "$bin/cudaalloc" -probe 2>&1); then
    skip "MPS isolation: the CUDA driver is not usable: $probe"
    return
  fi
  local gpu
  gpu=$(sed -n 's/.*"uuid": "\(GPU-[^"]*\)".*/\1/p' "$work/discovery.json" 2>/dev/null | head -1)
  gpu=${gpu:-0}
  # What a tenant runs must be reachable by its user: a copy outside the (maybe private) build
  # folder, in a work folder others may cross but not list.
  chmod 711 "$work"
  local tbin=$work/tenant-bin shim=""
  mkdir -p "$tbin" && cp "$bin/cudaalloc" "$tbin/" && chmod 755 "$tbin" "$tbin/cudaalloc"
  if [[ -f "$bin/libfairway-share.so" ]]; then
    cp "$bin/libfairway-share.so" "$tbin/" && chmod 644 "$tbin/libfairway-share.so"
    shim=$tbin/libfairway-share.so
  else
    skip "the share library: no libfairway-share.so in $bin (test/gpu/build.sh builds it); the tenants run without it and its checks do not run"
  fi
  local -A pids=()
  local t i uid
  for t in a b; do
    uid=TENANT_UID_$t
    uid=${!uid}
    # As the agent's CSI driver lays them out (gpu-agent/mpsvolume): the pipe directory root's
    # and sticky, so the pod's processes and its server may create entries but none may remove
    # or replace the daemon's control pipe; the log and shared-memory directories the pod
    # user's alone.
    mkdir -p "$work/$t/pipe" "$work/$t/shm" "$work/$t/log" "$work/$t/empty"
    chmod 711 "$work/$t"
    chmod 1777 "$work/$t/pipe"
    chown "$uid:$uid" "$work/$t/shm" "$work/$t/log" "$work/$t/empty" && chmod 700 "$work/$t/shm" "$work/$t/log" "$work/$t/empty"
    # The share's config, as the device plugin mounts it (gpu-agent/shim: share.conf).
    printf 'memory_limit_bytes=%d\nmps_pipe_directory=%s\nvisible_devices=%s\n' $((N << 20)) "$work/$t/pipe" "$gpu" >"$work/$t/share.conf"
    chmod 644 "$work/$t/share.conf"
    "$bin/fairway" agent mps --mps-pipe-directory "$work/$t/pipe" --mps-log-directory "$work/$t/log" \
      --shared-memory-directory "$work/$t/shm" --device "$gpu" --memory-limit-mib "$N" >"$work/mps-$t.out" 2>&1 &
    pids[$t]=$!
  done
  for t in a b; do
    for ((i = 0; i < 200; i++)); do
      [[ -e "$work/$t/pipe/control" ]] && break
      kill -0 "${pids[$t]}" 2>/dev/null || break
      sleep 0.1
    done
    if [[ ! -e "$work/$t/pipe/control" ]]; then
      fail "tenant $t's MPS control daemon did not start: $(tail -5 "$work/mps-$t.out")"
      kill "${pids[a]}" "${pids[b]}" 2>/dev/null
      return
    fi
  done
  pass "each tenant's MPS control daemon started by the agent's code (own pipe directory and /dev/shm, GPU $gpu, limit ${N} MiB)"

  # tenant T [VAR=VALUE...] -- CMD...: CMD as tenant T's pod runs it: its user, its /dev/shm,
  # its pipe directory and the share library; the VAR=VALUEs are the tenant's own environment,
  # set after (and so over) the pod's. Tenant a runs in the cgroup limit_cg when it is set (as
  # a pod's processes run in the pod's cgroup), moved there by root before anything else runs.
  local limit_cg=""
  tenant() {
    local t=$1 uid=TENANT_UID_$1; shift
    local -a envs=() in_cgroup=()
    while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    if [[ $t == a && -n "$limit_cg" ]]; then
      in_cgroup=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$limit_cg")
      envs=(FAIRWAY_GPU_CHECK_TENANT_CGROUP="$limit_cg" "${envs[@]}")
    fi
    env CUDA_MPS_PIPE_DIRECTORY="$work/$t/pipe" ${shim:+LD_PRELOAD="$shim" FAIRWAY_SHARE_CONFIG="$work/$t/share.conf"} "${envs[@]}" \
      "${in_cgroup[@]}" timeout 60 "$bin/fairway" agent mps-exec --shared-memory-directory "$work/$t/shm" -- \
      setpriv --reuid="${!uid}" --regid="${!uid}" --clear-groups -- "$@"
  }
  # kernel_limit: which memory limit GPU $gpu enforces on a share's pod. Where the driver has
  # the per-cgroup limit, it is set (N MiB, by the agent's code) on a new cgroup, limit_cg, in
  # which tenant a then runs; a driver that has it but refuses it fails the check (the agent
  # would refuse the share's container).
  kernel_limit() {
    local cgroot=${FAIRWAY_GPU_CHECK_CGROUP_ROOT:-/sys/fs/cgroup} cg out rc
    limit_cg=""
    if [[ ! -f "$cgroot/cgroup.controllers" ]]; then
      echo "   memory limit enforcement on GPU $gpu: library only (no cgroup v2 at $cgroot, which the driver's per-cgroup limit needs)"
      return
    fi
    # Under the kernel's dmem controller a cgroup takes a limit only where its parent enabled
    # the controller for its children (the kubelet's pod cgroups need the same down kubepods).
    if grep -qw dmem "$cgroot/cgroup.controllers" && ! grep -qw dmem "$cgroot/cgroup.subtree_control" 2>/dev/null; then
      if echo +dmem >"$cgroot/cgroup.subtree_control" 2>/dev/null; then
        echo "   enabled the dmem controller for the children of $cgroot"
      fi
    fi
    cg=$cgroot/fairway-gpu-check-$$
    if ! mkdir "$cg" 2>/dev/null; then
      fail "memory limit enforcement on GPU $gpu: cannot make the cgroup $cg"
      return
    fi
    out=$("$bin/fairway" agent memory-limit --nvml=real --device "$gpu" --cgroup "$cg" --limit-mib "$N" 2>&1); rc=$?
    echo "$out" | sed 's/^/   /'
    case "$rc:$out" in
      "0:memory-limit: kernel"*)
        limit_cg=$cg
        pass "memory limit enforcement on GPU $gpu: kernel (the driver's per-cgroup limit, ${N} MiB on tenant a's cgroup, set by the agent's code as on a pod's)" ;;
      "0:memory-limit: library"*)
        rmdir "$cg"
        echo "   memory limit enforcement on GPU $gpu: library only (the driver has no per-cgroup limit; NVIDIA r615 and later have it): nothing but the library stops the next attempt" ;;
      *)
        rmdir "$cg"
        fail "memory limit enforcement on GPU $gpu: the driver's per-cgroup limit could not be set (the agent would refuse a share's container): $(echo "$out" | tail -2)" ;;
    esac
  }
  # alloc T MIB [VAR=VALUE...] -> exit status of cudaalloc in tenant T, output indented
  alloc() {
    local t=$1 mib=$2; shift 2
    tenant "$t" "$@" -- "$tbin/cudaalloc" -mib "$mib" 2>&1 | sed 's/^/   /'
    return "${PIPESTATUS[0]}"
  }
  # escape WHAT [VAR=VALUE...]: tenant a tries to allocate OVER MiB that way; it must fail.
  escape() {
    local what=$1 rc; shift
    alloc a "$OVER" "$@"; rc=$?
    case $rc in
      0) fail "escape NOT blocked: $what: tenant a allocated ${OVER} MiB past its ${N} MiB share" ;;
      3) pass "escape blocked: $what: tenant a cannot allocate ${OVER} MiB past its ${N} MiB share (CUDA_ERROR_OUT_OF_MEMORY)" ;;
      *) pass "escape blocked: $what: tenant a gets no GPU to allocate on (status $rc)" ;;
    esac
  }
  local rc gpumib out
  # The GPU has room for more than the share (NVML's total, from discovery): a refusal below is
  # the limit's, not the GPU's.
  gpumib=$(sed -n 's/.*"memoryMiB": \([0-9]*\).*/\1/p' "$work/discovery.json" 2>/dev/null | head -1)
  if (( ${gpumib:-0} <= OVER )); then
    fail "GPU 0 has ${gpumib:-no} MiB (NVML), not more than ${OVER} MiB: the limit checks below would prove nothing"
  else
    alloc a "$WITHIN"; rc=$?
    if ((rc == 0)); then pass "tenant a's client allocates ${WITHIN} MiB within its ${N} MiB limit"; else fail "tenant a's client could not allocate ${WITHIN} MiB (status $rc)"; fi
    alloc a "$OVER" LD_PRELOAD=; rc=$?
    case $rc in
      3) pass "tenant a's client without the share library cannot allocate ${OVER} MiB past its server's ${N} MiB limit (CUDA_ERROR_OUT_OF_MEMORY): the server-side limit holds by itself" ;;
      0) fail "tenant a's client allocated ${OVER} MiB past its server's ${N} MiB limit: the server-side limit is NOT enforced" ;;
      *) fail "tenant a's client without the share library failed to allocate ${OVER} MiB, but not with out-of-memory (status $rc)" ;;
    esac

    # Escapes, tried as tenant a's pod can.
    escape "no MPS (CUDA_MPS_PIPE_DIRECTORY at an empty directory)" CUDA_MPS_PIPE_DIRECTORY="$work/a/empty"
    escape "another pipe directory (tenant b's)" CUDA_MPS_PIPE_DIRECTORY="$work/b/pipe"
    escape "a higher CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (0=64G)" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=64G
    escape "CUDA_VISIBLE_DEVICES=1" CUDA_VISIBLE_DEVICES=1
    escape "CUDA_VISIBLE_DEVICES=0,1" CUDA_VISIBLE_DEVICES=0,1
    # Writing to the control pipe: replace it (then a daemon of the tenant's own could serve
    # the directory), and send the daemon commands that would raise the limit of the next
    # server and of the running one, and shut that one down so that a new one starts.
    tenant a -- rm -f "$work/a/pipe/control" 2>&1 | sed 's/^/   /'
    if [[ ! -e "$work/a/pipe/control" ]]; then
      fail "escape NOT blocked: tenant a removed its control pipe (it could serve the pipe directory with a daemon of its own)"
    else
      pass "escape blocked: tenant a cannot remove or replace its control pipe"
    fi
    out=$(printf 'set_default_device_pinned_mem_limit %s 64G\nset_default_device_pinned_mem_limit 0 64G\n' "$gpu" |
      tenant a -- nvidia-cuda-mps-control 2>&1)
    echo "$out" | sed 's/^/   control (as tenant a): /'
    local servers s
    servers=$(echo get_server_list | tenant a -- nvidia-cuda-mps-control 2>/dev/null | grep -E '^[0-9]+$')
    for s in $servers; do
      printf 'set_device_pinned_mem_limit %s %s 64G\nshutdown_server %s -f\n' "$s" "$gpu" "$s" |
        tenant a -- nvidia-cuda-mps-control 2>&1 | sed 's/^/   control (as tenant a): /'
    done
    escape "commands written to the control pipe (set_default_device_pinned_mem_limit 64G, set_device_pinned_mem_limit 64G, shutdown_server)"
    escape "the same, without the share library" LD_PRELOAD=
    # What no library can stop: a process that does not load it (a static binary, a loader
    # that ignores /etc/ld.so.preload) and does not use MPS opens a plain context on the GPU.
    # Only the driver's per-cgroup limit (r615 and later) holds there: where the driver has it,
    # tenant a runs this attempt in a cgroup of its own with its limit, set by the agent's code
    # as the share device plugin sets it on a pod's cgroup; where it has none, nothing stops
    # the attempt and it fails the check.
    kernel_limit
    escape "no MPS and no share library (as a static binary would)" LD_PRELOAD= CUDA_MPS_PIPE_DIRECTORY="$work/a/empty"
    if [[ -n "$limit_cg" ]]; then
      rmdir "$limit_cg" 2>/dev/null || echo "   (tenant a's cgroup $limit_cg is left: $(cat "$limit_cg/cgroup.procs" 2>/dev/null | tr '\n' ' '))"
      limit_cg=""
    fi

    # What the tenant sees: the share as its GPU, its own use as used.
    if [[ -n "$shim" ]]; then
      tenant a -- "$tbin/cudaalloc" -mib "$WITHIN" -work 4s >"$work/a-hold.out" 2>&1 &
      local holder=$! seen=""
      for ((i = 0; i < 100; i++)); do
        grep -q '^cudaalloc: work started' "$work/a-hold.out" && break
        kill -0 "$holder" 2>/dev/null || break
        sleep 0.1
      done
      seen=$(sed -n 's/^cudaalloc: device 0 reports \([0-9]*\) MiB free of \([0-9]*\) MiB$/\2/p' "$work/a-hold.out")
      if [[ "$seen" == "$N" ]]; then
        pass "tenant a's cuMemGetInfo (cudaMemGetInfo) shows its ${N} MiB share as the total"
      else
        fail "tenant a's cuMemGetInfo shows ${seen:-nothing} MiB as the total, not its ${N} MiB share: $(head -3 "$work/a-hold.out")"
      fi
      if command -v nvidia-smi >/dev/null; then
        local smi smi_b
        smi=$(tenant a -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits 2>&1 | head -1 | tr -d ' ')
        smi_b=$(tenant b -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits 2>&1 | head -1 | tr -d ' ')
        if [[ "$smi" == "$N,$WITHIN" ]]; then
          pass "tenant a's nvidia-smi shows its share: ${N} MiB total, ${WITHIN} MiB used (its own)"
        else
          fail "tenant a's nvidia-smi shows total,used = ${smi:-nothing} MiB, not ${N},${WITHIN}"
        fi
        if [[ "$smi_b" == "$N,0" ]]; then
          pass "tenant b's nvidia-smi shows its share and none of tenant a's use: ${N} MiB total, 0 used"
        else
          fail "tenant b's nvidia-smi shows total,used = ${smi_b:-nothing} MiB, not ${N},0"
        fi
      else
        skip "nvidia-smi as a tenant: no nvidia-smi here"
      fi
      wait "$holder"
    fi

    # The co-tenant is unaffected by all of the above.
    alloc b "$WITHIN"; rc=$?
    if ((rc == 0)); then pass "tenant b's client allocates ${WITHIN} MiB on the same GPU after tenant a's attempts"; else fail "tenant b's client could not allocate ${WITHIN} MiB (status $rc)"; fi
    # Shared memory: while tenant a's client works, b's /dev/shm holds nothing of a's.
    tenant a -- "$tbin/cudaalloc" -mib "$WITHIN" -work 3s >"$work/a-work.out" 2>&1 &
    local worker=$! seen_a="" seen_b=""
    for ((i = 0; i < 30; i++)); do
      seen_a=$(ls -A "$work/a/shm" 2>/dev/null | grep -v '^\.fairway-share\.state$' | tr '\n' ' ')
      [[ -n "$seen_a" ]] && break
      sleep 0.1
    done
    seen_b=$(tenant b -- ls -A /dev/shm 2>&1 | tr '\n' ' ')
    wait "$worker"
    local leaked=""
    for f in $seen_a; do [[ " $seen_b " == *" $f "* ]] && leaked+="$f "; done
    if [[ -n "$leaked" ]]; then
      fail "tenant b's /dev/shm shows tenant a's shared memory: $leaked"
    elif [[ -z "$seen_a" ]]; then
      pass "tenant b's /dev/shm holds nothing of tenant a's (note: a's server left nothing in a's /dev/shm while it worked)"
    else
      pass "tenant b's /dev/shm holds nothing of tenant a's (a's: $seen_a; b's: ${seen_b:-empty})"
    fi
  fi
  local stopped=1
  for t in a b; do
    kill -TERM "${pids[$t]}" 2>/dev/null
    for ((i = 0; i < 150; i++)); do kill -0 "${pids[$t]}" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "${pids[$t]}" 2>/dev/null; then
      fail "tenant $t's MPS supervision did not stop in 15s"
      kill -KILL "${pids[$t]}" 2>/dev/null
      stopped=0
    fi
  done
  ((stopped)) && pass "both MPS control daemons stopped (quit) with the agent"
  if ((failed)); then
    for t in a b; do
      [[ -f "$work/$t/log/control.log" ]] && { echo "   last lines of tenant $t's MPS control log:"; tail -10 "$work/$t/log/control.log" | sed 's/^/   /'; }
    done
  fi
}
selected() { [[ ",${FAIRWAY_GPU_CHECK_SECTIONS:-mps,lending,swap}," == *",$1,"* ]]; }
if selected mps; then mps_check; else skip "MPS isolation: not selected (FAIRWAY_GPU_CHECK_SECTIONS)"; fi

# 3. Idle lending.
OWNER_MIB=2048      # what the idle owner holds (and works on once awake)
LOAN_LEAVE_MIB=1024 # the loan takes all the free memory but this margin
LOAN_GRACE_S=5      # SIGTERM, then SIGKILL after this (the scheduler's --loan-return-grace-period)
OWNER_WORK_S=8      # how long the owner works once awake: full speed must come within it
BASELINE_S=3        # the owner's throughput alone, first
LOAN_SOAK_S=${FAIRWAY_GPU_CHECK_LOAN_SOAK_S:-2} # the loan works this long before the owner wakes
echo "-- 3. idle lending (owner holds ${OWNER_MIB} MiB and idles, a loan takes the rest and works, the owner wakes)"
now_us() { date +%s%6N; }
show_trace() { # what NVML answered the agent's watch (its --trace), for a failed lending check
  echo "   the watch's NVML answers (owner pids: $(sed -n 's/^watch: owner pids \(\[[^]]*\]\).*/\1/p' "$work/watch.out")):"
  grep '^trace: ' "$work/watch.err" | tail -40 | sed 's/^/   /'
}
wait_line() { # wait_line FILE PATTERN SECONDS PID -> 0 once FILE has a line matching PATTERN
  local file=$1 pattern=$2 deadline=$((SECONDS + $3)) pid=$4
  while ((SECONDS < deadline)); do
    grep -q -- "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { grep -q -- "$pattern" "$file" 2>/dev/null; return; }
    sleep 0.02
  done
  return 1
}
lending_check() {
  local probe
  # CUDA device 0 must be NVML's GPU 0, the one the agent watches (CUDA orders fastest first).
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
  if ! probe=$(timeout 60 "$bin/cudaalloc" -probe 2>&1); then
    skip "idle lending: the CUDA driver is not usable: $probe"
    return
  fi
  # The owner alone: its full speed.
  if ! timeout 60 "$bin/cudaalloc" -mib "$OWNER_MIB" -work "${BASELINE_S}s" >"$work/baseline.out" 2>&1; then
    fail "idle lending: the owner's solo run failed: $(tail -3 "$work/baseline.out")"
    return
  fi
  local baseline
  baseline=$(sed -n 's/^cudaalloc: work done: .*median \([0-9.]*\) passes\/s$/\1/p' "$work/baseline.out")
  if [[ -z "$baseline" ]] || ! awk -v b="$baseline" 'BEGIN { exit !(b > 0) }'; then
    fail "idle lending: no throughput from the owner's solo run: $(tail -3 "$work/baseline.out")"
    return
  fi
  grep -h 'PTX kernel did not load' "$work/baseline.out" | sed 's/^/   /'
  echo "   owner alone: ${baseline} passes/s over ${OWNER_MIB} MiB"

  local owner= loan= watcher= killer=
  "$bin/cudaalloc" -mib "$OWNER_MIB" -idle -idle-for 120s -work "${OWNER_WORK_S}s" >"$work/owner.out" 2>&1 &
  owner=$!
  cleanup_lending() {
    local p
    for p in "${owner:-}" "${loan:-}" "${watcher:-}" "${killer:-}"; do [[ -n "$p" ]] && kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    trap - EXIT
  }
  # Whatever happens, no process of this check may stay behind holding GPU memory.
  trap cleanup_lending EXIT
  if ! wait_line "$work/owner.out" '^cudaalloc: idle' 60 "$owner"; then
    fail "idle lending: the owner did not come up idle: $(tail -3 "$work/owner.out")"
    cleanup_lending; return
  fi
  "$bin/fairway" agent watch --nvml=real --gpu 0 --timeout 90s --trace >"$work/watch.out" 2>"$work/watch.err" &
  watcher=$!
  if ! wait_line "$work/watch.out" '^watch: owner pids' 30 "$watcher"; then
    if grep -q 'NVML lists no process' "$work/watch.err"; then
      skip "idle lending: NVML lists no GPU process here (a container without the host's PID namespace?); the agent cannot attribute work: $(tail -1 "$work/watch.err")"
    else
      fail "idle lending: the agent's watch did not start: $(tail -3 "$work/watch.err")"
    fi
    cleanup_lending; return
  fi
  sed 's/^/   /' "$work/watch.out"
  "$bin/cudaalloc" -leave "$LOAN_LEAVE_MIB" -work 120s >"$work/loan.out" 2>&1 &
  loan=$!
  if ! wait_line "$work/loan.out" '^cudaalloc: rate ' 60 "$loan"; then
    fail "idle lending: the loan did not start working: $(tail -3 "$work/loan.out")"
    cleanup_lending; return
  fi
  grep -h '^cudaalloc: holding' "$work/loan.out" | sed 's/^cudaalloc: holding/   loan holds/'
  sleep "$LOAN_SOAK_S" # the loan works hard; the agent must keep the owner idle through several polls
  if ! kill -0 "$watcher" 2>/dev/null; then
    if grep -q '^watch: active' "$work/watch.out"; then
      fail "idle lending: the owner was taken for active while only the loan worked: $(grep '^watch: active' "$work/watch.out")"
      show_trace
    else
      fail "idle lending: the agent's watch ended early: $(tail -3 "$work/watch.err")"
    fi
    cleanup_lending; return
  fi
  pass "idle lending: the loan's work and memory do not wake the idle owner"

  kill -USR1 "$owner"
  wait "$watcher"; local wrc=$?
  watcher=
  # Stop the loan as the kubelet would: SIGTERM, SIGKILL after the grace period.
  (sleep "$LOAN_GRACE_S"; kill -KILL "$loan" 2>/dev/null) &
  killer=$!
  kill -TERM "$loan" 2>/dev/null
  wait "$loan"; local lrc=$?
  local stopped_us; stopped_us=$(now_us)
  kill "$killer" 2>/dev/null; wait "$killer" 2>/dev/null; killer=
  loan=
  if ((wrc != 0)); then
    fail "idle lending: the agent did not see the owner's work: $(grep -v '^trace: ' "$work/watch.err" | tail -3)"
    show_trace
    cleanup_lending; return
  fi
  sed 's/^/   /' "$work/watch.out" | tail -1
  wait "$owner"; local orc=$?
  owner=
  if ((orc != 0)) || ! grep -q '^cudaalloc: work started' "$work/owner.out"; then
    fail "idle lending: the owner's work failed (status $orc): $(tail -3 "$work/owner.out")"
    return
  fi
  # detect: from the owner's first kernel to the agent's decision (the poll that saw it);
  # stop: from there to the loan's exit; owner-full-speed: from the owner's first kernel to the
  # start of the first two windows in a row at 90% of its solo throughput.
  local result
  result=$(awk -v b="$baseline" -v stopped="$stopped_us" -v lrc="$lrc" \
      -v detected_file="$work/watch.out" '
    BEGIN {
      while ((getline line < detected_file) > 0)
        if (line ~ /^watch: active/) { n = split(line, f, /[ =]/); for (i = 1; i < n; i++) if (f[i] == "detected_us") det = f[i + 1]; else if (f[i] == "reason") reason = f[i + 1] }
    }
    /^cudaalloc: work started/ { started = $4 }
    /^cudaalloc: rate / { ws[++w] = $3; r[w] = $6 }
    END {
      if (started == "" || det == "") { print "ERROR missing times"; exit }
      full = -1; slow = -1
      for (i = 1; i <= w; i++) {
        if (slow < 0 || r[i] < slow) slow = r[i]
        if (i < w && r[i] >= 0.9 * b && r[i + 1] >= 0.9 * b) { full = ws[i] - started; break }
      }
      printf "%d %d %d %s %d %s\n", (det - started) / 1000, (stopped - det) / 1000, full < 0 ? -1 : full / 1000, reason, slow < 0 ? -1 : 100 * slow / b, lrc == 137 ? "SIGKILL" : "SIGTERM"
    }' "$work/owner.out")
  local detect stop full reason slowest how
  read -r detect stop full reason slowest how <<<"$result"
  if [[ "$detect" == ERROR ]]; then
    fail "idle lending: could not read the timings (owner: $(tail -2 "$work/owner.out"))"
    return
  fi
  echo "   the agent saw ${reason}; the loan stopped on ${how} (grace ${LOAN_GRACE_S}s); the owner's slowest window ran at ${slowest}% of its solo speed"
  if ((full < 0)); then
    echo "lending: detect=${detect} ms stop=${stop} ms owner-full-speed=never"
    fail "idle lending: the owner did not get back to 90% of its solo throughput within ${OWNER_WORK_S}s"
    return
  fi
  echo "lending: detect=${detect} ms stop=${stop} ms owner-full-speed=${full} ms"
  pass "idle lending: the agent saw the owner's work, the loan was stopped and the owner ran at full speed ${full} ms after it woke"
}
if selected lending; then lending_check; else skip "idle lending: not selected (FAIRWAY_GPU_CHECK_SECTIONS)"; fi

# 4. Swap: the owner's memory moves to host RAM while a loan has the whole GPU, and comes back.
SWAP_CYCLES=${FAIRWAY_GPU_CHECK_SWAP_CYCLES:-5}
SWAP_LOAN_S=${FAIRWAY_GPU_CHECK_SWAP_LOAN_S:-1} # how long the loan works on the whole GPU each cycle
swap_check() {
  local probe gpumib owner_mib loan_leave
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
  if ! probe=$(timeout 60 "$bin/cudaalloc" -probe 2>&1); then
    skip "swap: the CUDA driver is not usable: $probe"
    return
  fi
  gpumib=$(sed -n 's/.*"memoryMiB": \([0-9]*\).*/\1/p' "$work/discovery.json" 2>/dev/null | head -1)
  if (( ${gpumib:-0} <= 0 )); then
    skip "swap: the GPU's memory is unknown (no discovery)"
    return
  fi
  owner_mib=$((gpumib * 60 / 100))  # the owner: 60% of the GPU, a known pattern
  loan_leave=$((gpumib * 10 / 100)) # the loan: all but 10% of the GPU, i.e. 90% of it
  echo "-- 4. swap (owner fills ${owner_mib} MiB, 60% of GPU 0, with a pattern and idles; swapped out; a loan takes 90% and works; the owner touches the GPU; the loan is stopped, the owner restored and its pattern checked; ${SWAP_CYCLES} cycles)"
  local owner= loan= swapper= killer= fifo=$work/swap.in
  mkfifo "$fifo"
  cleanup_swap() {
    local p
    for p in "${owner:-}" "${loan:-}" "${swapper:-}" "${killer:-}"; do [[ -n "$p" ]] && kill -KILL "$p" 2>/dev/null; done
    exec 7>&-
    wait 2>/dev/null
    trap - EXIT PIPE
  }
  trap cleanup_swap EXIT
  # A write to the agent's pipe after it died must fail the check with what it said, not kill
  # the script (SIGPIPE) with nothing said.
  trap '' PIPE
  "$bin/cudaalloc" -mib "$owner_mib" -idle -idle-for 120s -work 1s -pattern "$SWAP_CYCLES" >"$work/swap-owner.out" 2>&1 &
  owner=$!
  if ! wait_line "$work/swap-owner.out" '^cudaalloc: idle' 120 "$owner"; then
    fail "swap: the owner did not come up idle with its pattern: $(tail -3 "$work/swap-owner.out")"
    cleanup_swap; return
  fi
  local bytes copy_us
  read -r bytes copy_us < <(sed -n 's/^cudaalloc: pattern written, \([0-9]*\) bytes, copies took \([0-9]*\) us$/\1 \2/p' "$work/swap-owner.out")
  # Appended, so that emptying it after each cycle restarts it cleanly.
  "$bin/fairway" agent swap-check --pid "$owner" <"$fifo" >>"$work/swap.out" 2>"$work/swap.err" &
  swapper=$!
  exec 7>"$fifo"
  local c out_ms in_ms outs=() ins=() verified=0
  for ((c = 1; c <= SWAP_CYCLES; c++)); do
    if ! echo out >&7; then
      # A driver without the checkpoint API: swap-check says so and exits, and may be gone
      # before the first command reaches it (a slow machine lets it read it first).
      if grep -q 'not available' "$work/swap.err"; then
        skip "swap: $(tail -1 "$work/swap.err")"
      else
        fail "swap: cycle $c: the agent's swap-check is gone: $(tail -3 "$work/swap.err")"
      fi
      cleanup_swap; return
    fi
    if ! wait_line "$work/swap.out" "^swap-check: out " 60 "$swapper"; then
      if grep -q 'not available' "$work/swap.err"; then
        skip "swap: $(tail -1 "$work/swap.err")"
      else
        fail "swap: cycle $c: the swap-out failed: $(tail -3 "$work/swap.err")"
      fi
      cleanup_swap; return
    fi
    out_ms=$(sed -n 's/^swap-check: out \([0-9]*\)$/\1/p' "$work/swap.out" | tail -1)
    "$bin/cudaalloc" -leave "$loan_leave" -work 120s >"$work/swap-loan.out" 2>&1 &
    loan=$!
    if ! wait_line "$work/swap-loan.out" '^cudaalloc: rate ' 60 "$loan"; then
      fail "swap: cycle $c: the loan did not get 90% of the GPU and work: $(tail -3 "$work/swap-loan.out")"
      cleanup_swap; return
    fi
    sleep "$SWAP_LOAN_S" # the loan works
    kill -USR1 "$owner" # the owner runs a cell: its first CUDA call blocks
    if ! wait_line "$work/swap.out" "^swap-check: work " 30 "$swapper"; then
      fail "swap: cycle $c: the agent's sign of work (the owner's CPU) did not come: $(tail -3 "$work/swap.err")"
      cleanup_swap; return
    fi
    (sleep "$LOAN_GRACE_S"; kill -KILL "$loan" 2>/dev/null) &
    killer=$!
    kill -TERM "$loan" 2>/dev/null
    wait "$loan" 2>/dev/null
    kill "$killer" 2>/dev/null; wait "$killer" 2>/dev/null; killer= loan=
    if ! echo in >&7; then
      fail "swap: cycle $c: the agent's swap-check is gone: $(tail -3 "$work/swap.err")"
      cleanup_swap; return
    fi
    if ! wait_line "$work/swap.out" "^swap-check: in " 60 "$swapper"; then
      fail "swap: cycle $c: the restore failed: $(tail -3 "$work/swap.err")"
      cleanup_swap; return
    fi
    in_ms=$(sed -n 's/^swap-check: in \([0-9]*\) .*/\1/p' "$work/swap.out" | tail -1)
    cat "$work/swap.out" >>"$work/swap.log"; : >"$work/swap.out"
    if ! wait_line "$work/swap-owner.out" "^cudaalloc: verified .* cycle $c," 120 "$owner"; then
      fail "swap: cycle $c: the owner's pattern did not check out: $(tail -1 "$work/swap-owner.out")"
      cleanup_swap; return
    fi
    verified=$((verified + 1))
    outs+=("$out_ms"); ins+=("$in_ms")
    echo "swap: out=${out_ms} ms in=${in_ms} ms bytes=${bytes} verified"
  done
  echo quit >&7
  cleanup_swap
  # The bound: the same bytes at the rate the owner's own host-to-device copies reached.
  local bound_ms max_in=0 i
  bound_ms=$(( (copy_us + 999) / 1000 ))
  for i in "${ins[@]}"; do ((i > max_in)) && max_in=$i; done
  echo "   host-device bound: ${bytes} bytes in ${bound_ms} ms at the owner's pageable copy rate; slowest swap-in ${max_in} ms, ratio $(awk -v a="$max_in" -v b="$bound_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
  pass "swap: ${verified} cycles, the owner's ${bytes} bytes verified byte for byte after each"
}
if selected swap; then swap_check; else skip "swap: not selected (FAIRWAY_GPU_CHECK_SECTIONS)"; fi
finish
