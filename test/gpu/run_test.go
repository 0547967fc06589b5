package gpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Fakes for run.sh: they behave like the real binaries as far as the script can tell.
const (
	fakeFairway = `#!/bin/sh
case "$1 $2" in
"agent discover")
  if [ -n "$FAKE_NO_DRIVER" ]; then
    echo "error: initialising NVML: nvmlInit: ERROR_LIBRARY_NOT_FOUND: libnvidia-ml.so.1 is not loadable here" >&2
    exit 1
  fi
  printf '{\n  "inventory": {\n    "gpus": [\n      {\n        "index": 0,\n        "uuid": "GPU-0000",\n        "memoryMiB": 144384,\n        "healthy": true\n      }\n    ]\n  }\n}\n'
  ;;
"agent mps")
  # The daemon keeps its server-side limit where the fake cudaalloc finds it.
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
    --mps-pipe-directory) pipe=$2 ;;
    --memory-limit-mib) limit=$2 ;;
    esac
    shift 2
  done
  mkdir -p "$pipe"
  echo "$limit" >"$pipe/limit"
  touch "$pipe/control"
  trap 'rm -f "$pipe/control"; exit 0' TERM
  while :; do sleep 0.05; done
  ;;
"agent mps-exec")
  # No mount namespace here: the tenant's /dev/shm is FAKE_SHM, which the fakes use instead.
  shift 2
  FAKE_SHM=$2
  export FAKE_SHM
  shift 3
  exec "$@"
  ;;
"agent swap-check")
  # The agent side of the swap check: out, then the owner's work (the fake owner's touch), in.
  if [ -n "$FAKE_NO_CHECKPOINT" ]; then
    echo "error: the CUDA checkpoint API is not available: libcuda.so.1 has no cuCheckpointProcess* entry points (driver older than r550)" >&2
    exit 1
  fi
  while read -r cmd; do
    case "$cmd" in
    out)
      echo "swap-check: out 812"
      while [ ! -e "$TMPDIR/swap-owner-touched" ]; do sleep 0.02; done
      echo "swap-check: work $(date +%s%6N) (150ms of CPU in 100ms)"
      ;;
    in)
      [ -e "$TMPDIR/loan-running" ] && { echo "restore while the loan runs" >&2; exit 1; }
      rm -f "$TMPDIR/swap-owner-touched"
      touch "$TMPDIR/swap-restored"
      echo "swap-check: in 640 $(date +%s%6N)"
      ;;
    quit) exit 0 ;;
    esac
  done
  ;;
"agent memory-limit")
  # The driver's per-cgroup limit: none (as before r615), or taken (FAKE_KERNEL_LIMIT) and kept
  # where the fake cudaalloc of a process in that cgroup finds it, or refused
  # (FAKE_KERNEL_LIMIT_FAILS).
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
    --cgroup) cg=$2; shift ;;
    --limit-mib) limit=$2; shift ;;
    --device) shift ;;
    esac
    shift
  done
  if [ -n "$FAKE_KERNEL_LIMIT_FAILS" ]; then
    echo "error: setting the GPU memory limit of $cg on GPU GPU-0000 to 2147483648 bytes: nvmlDeviceSetMemoryLimits_v1 on GPU 0: ERROR_NO_PERMISSION" >&2
    exit 1
  fi
  if [ -z "$FAKE_KERNEL_LIMIT" ]; then
    echo "memory-limit: library: GPU GPU-0000: the NVIDIA driver has no per-cgroup GPU memory limit (nvmlDeviceSetMemoryLimits_v1, r615 and later): ERROR_FUNCTION_NOT_FOUND"
    exit 0
  fi
  echo "$limit" >"$cg/fake.limit"
  echo "memory-limit: kernel: GPU GPU-0000: hard limit $limit MiB on $cg (backend misc; reads back hard $limit MiB, soft 0 MiB, used 0 MiB)"
  ;;
"agent watch")
  # The owner's processes are the GPU's at start; it wakes when the fake owner works (or at
  # once with FAKE_WATCH_WAKES_EARLY, as an agent that takes a loan's work for the owner's).
  echo "watch: owner pids [4242] on GPU 0; polling every 500ms, threshold 5%"
  [ -n "$FAKE_WATCH_WAKES_EARLY" ] && sleep 0.1
  while [ -z "$FAKE_WATCH_WAKES_EARLY" ] && [ ! -e "$TMPDIR/owner-working" ]; do sleep 0.02; done
  t=$(date +%s%6N)
  echo "watch: active reason=GPUUtilization observed_us=$t detected_us=$t message=\"GPU utilization 60% above 5%\""
  ;;
esac
`
	// The fake CUDA client enforces its MPS server's limit (the fake daemon's --memory-limit-mib)
	// unless FAKE_NOT_ENFORCED is set; with -work under a tenant's /dev/shm it leaves a segment
	// there (and in the other tenant's with FAKE_SHM_LEAKS). With -work it reports a throughput of 100 passes/s, 50 while a
	// loan runs next to it and in the first window after it wakes beside one (100 never comes
	// back with FAKE_OWNER_SLOW); the loan (-leave) runs
	// until SIGTERM.
	fakeCudaalloc = `#!/bin/sh
if [ "$1" = "-probe" ]; then
  [ -n "$FAKE_NO_DRIVER" ] && { echo "cudaalloc: cannot load libcuda.so.1: not found"; exit 5; }
  exit 0
fi
# The share library, when preloaded with its config: its limit, and its MPS pipe directory put
# back (a missing control pipe: no device). FAKE_SHIM_BROKEN: loaded but doing nothing.
shim_limit=
case "$LD_PRELOAD" in
*libfairway-share.so*)
  if [ -r "$FAIRWAY_SHARE_CONFIG" ] && [ -z "$FAKE_SHIM_BROKEN" ]; then
    shim_limit=$(( $(sed -n 's/^memory_limit_bytes=//p' "$FAIRWAY_SHARE_CONFIG") >> 20 ))
    CUDA_MPS_PIPE_DIRECTORY=$(sed -n 's/^mps_pipe_directory=//p' "$FAIRWAY_SHARE_CONFIG")
    [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || { echo "cudaalloc: cuInit: CUDA_ERROR_NO_DEVICE"; exit 4; }
  fi
  ;;
esac
report() { echo "cudaalloc: device 0 reports $1 MiB free of $1 MiB"; }
rates() { # rates N: N windows of 50 ms
  i=0
  while [ $i -lt $1 ]; do
    r=100
    if [ -e "$TMPDIR/loan-running" ] || [ -n "$FAKE_OWNER_SLOW" ]; then r=50; fi
    # The first window began beside the loan if the loan ran when the owner woke, however fast
    # the script stops it (its TERM can come before this loop looks).
    if [ $i -eq 0 ] && [ -e "$TMPDIR/owner-woke-beside-loan" ]; then r=50; fi
    s=$(date +%s%6N); sleep 0.05; e=$(date +%s%6N)
    echo "cudaalloc: rate $s $e 5 $r.0"
    i=$((i + 1))
  done
}
case "$*" in
*-pattern*)
  # The swap check's owner: its pattern survives every cycle, unless FAKE_SWAP_CORRUPT.
  trap 'touch "$TMPDIR/swap-owner-touched"' USR1
  echo "cudaalloc: holding $2 MiB"
  echo "cudaalloc: pattern written, 92341796864 bytes, copies took 3600000 us"
  c=1
  while [ $c -le 5 ]; do
    echo "cudaalloc: idle; SIGUSR1 starts the work"
    while [ ! -e "$TMPDIR/swap-restored" ]; do sleep 0.02; done
    rm -f "$TMPDIR/swap-restored"
    [ -n "$FAKE_SWAP_CORRUPT" ] && { echo "cudaalloc: MISMATCH in cycle $c at byte 4096 of 92341796864"; exit 7; }
    echo "cudaalloc: verified 92341796864 bytes, cycle $c, touched 1 done 2"
    c=$((c + 1))
  done
  exit 0
  ;;
*-leave*)
  echo "cudaalloc: holding 140000 MiB"
  touch "$TMPDIR/loan-running"
  trap 'rm -f "$TMPDIR/loan-running"; exit 143' TERM
  i=0
  while [ $i -lt 600 ]; do echo "cudaalloc: rate 1 2 5 100.0"; sleep 0.05; i=$((i + 1)); done
  ;;
*-idle*)
  trap '[ -e "$TMPDIR/loan-running" ] && touch "$TMPDIR/owner-woke-beside-loan"; touch "$TMPDIR/owner-working"' USR1
  echo "cudaalloc: holding $2 MiB"
  echo "cudaalloc: idle; SIGUSR1 starts the work"
  i=0
  while [ ! -e "$TMPDIR/owner-working" ]; do sleep 0.02; i=$((i + 1)); [ $i -gt 1500 ] && exit 6; done
  echo "cudaalloc: work started $(date +%s%6N)"
  rates 20
  echo "cudaalloc: work done: 20 windows, median 100.0 passes/s"
  exit 0
  ;;
*-work*)
  report "${shim_limit:-144384}"
  echo "cudaalloc: holding $2 MiB"
  # The share library's state in the tenant's /dev/shm: what the fake nvidia-smi reports.
  [ -n "$shim_limit" ] && [ -n "$FAKE_SHM" ] && echo "$2" >"$FAKE_SHM/.fairway-share.state"
  [ -n "$FAKE_SHM" ] && touch "$FAKE_SHM/cuda.shm.$$"
  [ -n "$FAKE_SHM_LEAKS" ] && [ -n "$FAKE_SHM" ] && touch "$FAKE_SHM/../../b/shm/cuda.shm.$$"
  echo "cudaalloc: work started $(date +%s%6N)"
  [ -n "$shim_limit" ] && sleep 2 # a tenant's holder: long enough for the script to look at it
  rates 3
  echo "cudaalloc: work done: 3 windows, median 100.0 passes/s"
  [ -n "$FAKE_SHM" ] && rm -f "$FAKE_SHM/.fairway-share.state"
  exit 0
  ;;
esac
mib=$2
# The driver's per-cgroup limit, for a process that runs in a cgroup with one (its pid written to
# the cgroup's cgroup.procs): whatever it loads, past the limit is out of memory.
if [ -n "$FAIRWAY_GPU_CHECK_TENANT_CGROUP" ] && [ -r "$FAIRWAY_GPU_CHECK_TENANT_CGROUP/fake.limit" ] &&
  [ -s "$FAIRWAY_GPU_CHECK_TENANT_CGROUP/cgroup.procs" ] && [ "$mib" -gt "$(cat "$FAIRWAY_GPU_CHECK_TENANT_CGROUP/fake.limit")" ]; then
  echo "cudaalloc: allocating $mib MiB: CUDA_ERROR_OUT_OF_MEMORY"; exit 3
fi
limit=$(cat "$CUDA_MPS_PIPE_DIRECTORY/limit" 2>/dev/null)
# A tenant's process (under mps-exec) without its MPS server: on a node that withholds the GPU
# from the pod it gets none, unless FAKE_BYPASS_ESCAPES (as today's mps mode: a plain context).
if [ -n "$FAKE_SHM" ] && [ -z "$limit" ] && [ -z "$FAKE_BYPASS_ESCAPES" ]; then
  echo "cudaalloc: cuInit: CUDA_ERROR_NO_DEVICE"; exit 4
fi
report "${shim_limit:-144384}"
if [ -n "$shim_limit" ] && [ "$mib" -gt "$shim_limit" ]; then
  echo "cudaalloc: allocating $mib MiB: CUDA_ERROR_OUT_OF_MEMORY"; exit 3
fi
if [ -n "$limit" ] && [ -z "$FAKE_NOT_ENFORCED" ] && [ "$mib" -gt "$limit" ]; then
  echo "cudaalloc: allocating $mib MiB: CUDA_ERROR_OUT_OF_MEMORY"; exit 3
fi
echo "cudaalloc: allocated $mib MiB"
`
)

// Fakes of the tenant side: setpriv runs the command as the tenant (its user only in name: the
// test may not be root), refusing to remove a root-owned file from a sticky directory unless
// FAKE_CONTROL_REMOVABLE, and listing the tenant's /dev/shm (FAKE_SHM) for ls. The MPS control
// client takes a tenant's limit commands only with FAKE_CONTROL_WRITABLE (then its pipe
// directory's limit becomes 64 GiB). nvidia-smi shows the share library's view when it is
// preloaded (unless FAKE_SMI_WHOLE): the share's total and what the tenant's holder holds.
const (
	fakeSetpriv = `#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
case "$1" in
ls) exec ls -A "$FAKE_SHM" ;;
rm)
  if [ -z "$FAKE_CONTROL_REMOVABLE" ]; then echo "rm: cannot remove '$3': Operation not permitted"; exit 1; fi
  exec "$@"
  ;;
esac
exec "$@"
`
	fakeMPSControl = `#!/bin/sh
while read -r cmd args; do
  case "$cmd" in
  get_server_list) echo 4242 ;;
  set_default_device_pinned_mem_limit|set_device_pinned_mem_limit)
    if [ -n "$FAKE_CONTROL_WRITABLE" ]; then echo 65536 >"$CUDA_MPS_PIPE_DIRECTORY/limit"; else echo "$cmd: permission denied"; fi ;;
  *) echo "$cmd: permission denied" ;;
  esac
done
exit 0
`
	fakeNvidiaSMI = `#!/bin/sh
[ "$1" = -L ] && { echo "GPU 0: NVIDIA H200 (UUID: GPU-0000)"; exit 0; }
case "$LD_PRELOAD" in
*libfairway-share.so*)
  if [ -z "$FAKE_SMI_WHOLE" ] && [ -r "$FAIRWAY_SHARE_CONFIG" ]; then
    used=$(cat "$FAKE_SHM/.fairway-share.state" 2>/dev/null || echo 0)
    echo "$(( $(sed -n 's/^memory_limit_bytes=//p' "$FAIRWAY_SHARE_CONFIG") >> 20 )), $used"
    exit 0
  fi
  ;;
esac
echo "144384, 0"
`
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestRunScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		binaries bool
		noShim   bool
		mps      bool
		env      []string
		wantExit int
		want     []string
		wantNot  []string
	}{
		"everything passes": {
			binaries: true, mps: true, wantExit: 0,
			want: []string{"PASS: discovery: 1 GPU(s)", "PASS: tenant a's client allocates 1024 MiB within its 2048 MiB limit",
				"PASS: tenant a's client without the share library cannot allocate 2560 MiB past its server's 2048 MiB limit (CUDA_ERROR_OUT_OF_MEMORY)",
				"PASS: escape blocked: no MPS (CUDA_MPS_PIPE_DIRECTORY at an empty directory): tenant a cannot allocate 2560 MiB past its 2048 MiB share",
				"PASS: escape blocked: another pipe directory (tenant b's): tenant a cannot allocate 2560 MiB",
				"PASS: escape blocked: a higher CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (0=64G): tenant a cannot allocate 2560 MiB",
				"PASS: escape blocked: CUDA_VISIBLE_DEVICES=1: ", "PASS: escape blocked: CUDA_VISIBLE_DEVICES=0,1: ",
				"PASS: escape blocked: tenant a cannot remove or replace its control pipe",
				"control (as tenant a): set_default_device_pinned_mem_limit: permission denied",
				"PASS: escape blocked: commands written to the control pipe (set_default_device_pinned_mem_limit 64G, set_device_pinned_mem_limit 64G, shutdown_server): tenant a cannot allocate 2560 MiB",
				"PASS: escape blocked: the same, without the share library: tenant a cannot allocate 2560 MiB",
				"PASS: escape blocked: no MPS and no share library (as a static binary would): tenant a gets no GPU to allocate on (status 4)",
				"PASS: tenant a's cuMemGetInfo (cudaMemGetInfo) shows its 2048 MiB share as the total",
				"PASS: tenant a's nvidia-smi shows its share: 2048 MiB total, 1024 MiB used (its own)",
				"PASS: tenant b's nvidia-smi shows its share and none of tenant a's use: 2048 MiB total, 0 used",
				"PASS: tenant b's client allocates 1024 MiB on the same GPU after tenant a's attempts", "PASS: tenant b's /dev/shm holds nothing of tenant a's (a's: cuda.shm.",
				"PASS: both MPS control daemons stopped",
				"owner alone: 100.0 passes/s", "PASS: idle lending: the loan's work and memory do not wake the idle owner",
				"the agent saw GPUUtilization; the loan stopped on SIGTERM", "the owner's slowest window ran at 50% of its solo speed", "lending: detect=", " stop=", " owner-full-speed=",
				"PASS: idle lending: the agent saw the owner's work",
				"swap: out=812 ms in=640 ms bytes=92341796864 verified", "host-device bound: 92341796864 bytes in 3600 ms", "ratio 0.18",
				"PASS: swap: 5 cycles, the owner's 92341796864 bytes verified byte for byte after each", "RESULT: PASSED"},
			wantNot: []string{"FAIL", "SKIPPED", "NOT blocked"},
		},
		"a swapped owner's memory that comes back changed fails": {
			binaries: true, mps: true, env: []string{"FAKE_SWAP_CORRUPT=1"}, wantExit: 1,
			want: []string{"FAIL: swap: cycle 1: the owner's pattern did not check out: cudaalloc: MISMATCH in cycle 1 at byte 4096", "RESULT: FAILED"},
		},
		"a driver without the checkpoint API is skipped, not passed": {
			binaries: true, mps: true, env: []string{"FAKE_NO_CHECKPOINT=1"}, wantExit: 2,
			want: []string{"SKIPPED: swap: error: the CUDA checkpoint API is not available", "RESULT: INCOMPLETE"},
		},
		"a loan that wakes the owner fails": {
			binaries: true, mps: true, env: []string{"FAKE_WATCH_WAKES_EARLY=1", "FAIRWAY_GPU_CHECK_SECTIONS=lending"}, wantExit: 1,
			want: []string{"FAIL: idle lending: the owner was taken for active while only the loan worked", "RESULT: FAILED"},
		},
		"an owner never back at full speed fails": {
			binaries: true, mps: true, env: []string{"FAKE_OWNER_SLOW=1", "FAIRWAY_GPU_CHECK_SECTIONS=lending"}, wantExit: 1,
			want: []string{"owner-full-speed=never", "FAIL: idle lending: the owner did not get back to 90% of its solo throughput", "RESULT: FAILED"},
		},
		// Today's mps mode on a real GPU: the pod has the device node, so a process that neither
		// uses MPS nor loads the share library opens a plain context.
		"an escape by bypassing MPS and the library fails": {
			binaries: true, mps: true, env: []string{"FAKE_BYPASS_ESCAPES=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"PASS: escape blocked: no MPS (CUDA_MPS_PIPE_DIRECTORY at an empty directory)",
				"memory limit enforcement on GPU GPU-0000: library only (the driver has no per-cgroup limit",
				"FAIL: escape NOT blocked: no MPS and no share library (as a static binary would): tenant a allocated 2560 MiB past its 2048 MiB share", "RESULT: FAILED"},
		},
		// A driver with the per-cgroup limit (r615 and later): the process that bypasses MPS and
		// the library runs in a cgroup with its limit, and cannot allocate past it.
		"the driver's per-cgroup limit blocks bypassing MPS and the library": {
			binaries: true, mps: true, env: []string{"FAKE_BYPASS_ESCAPES=1", "FAKE_KERNEL_LIMIT=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 2,
			want: []string{"memory-limit: kernel: GPU GPU-0000: hard limit 2048 MiB on ",
				"PASS: memory limit enforcement on GPU GPU-0000: kernel (the driver's per-cgroup limit, 2048 MiB on tenant a's cgroup",
				"PASS: escape blocked: no MPS and no share library (as a static binary would): tenant a cannot allocate 2560 MiB past its 2048 MiB share (CUDA_ERROR_OUT_OF_MEMORY)",
				"RESULT: INCOMPLETE"},
			wantNot: []string{"FAIL", "library only"},
		},
		"a per-cgroup limit the driver refuses fails": {
			binaries: true, mps: true, env: []string{"FAKE_KERNEL_LIMIT_FAILS=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: memory limit enforcement on GPU GPU-0000: the driver's per-cgroup limit could not be set (the agent would refuse a share's container): error: setting the GPU memory limit of",
				"ERROR_NO_PERMISSION", "RESULT: FAILED"},
		},
		"a control pipe that takes a tenant's limits fails": {
			binaries: true, mps: true, env: []string{"FAKE_CONTROL_WRITABLE=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: escape NOT blocked: the same, without the share library: tenant a allocated 2560 MiB past its 2048 MiB share", "RESULT: FAILED"},
		},
		"a control pipe the tenant can remove fails": {
			binaries: true, mps: true, env: []string{"FAKE_CONTROL_REMOVABLE=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: escape NOT blocked: tenant a removed its control pipe", "RESULT: FAILED"},
		},
		"nvidia-smi showing the whole GPU fails": {
			binaries: true, mps: true, env: []string{"FAKE_SMI_WHOLE=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: tenant a's nvidia-smi shows total,used = 144384,0 MiB, not 2048,1024", "FAIL: tenant b's nvidia-smi shows total,used = 144384,0 MiB, not 2048,0", "RESULT: FAILED"},
		},
		"a share library that limits nothing fails": {
			binaries: true, mps: true, env: []string{"FAKE_SHIM_BROKEN=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: tenant a's cuMemGetInfo shows 144384 MiB as the total, not its 2048 MiB share", "RESULT: FAILED"},
		},
		"no share library is skipped, not passed": {
			binaries: true, mps: true, noShim: true, env: []string{"FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 2,
			want: []string{"SKIPPED: the share library: no libfairway-share.so", "PASS: escape blocked: a higher CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "RESULT: INCOMPLETE"},
		},
		"a section left out is not a pass": {
			binaries: true, mps: true, env: []string{"FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 2,
			want: []string{"PASS: escape blocked: no MPS and no share library", "SKIPPED: idle lending: not selected (FAIRWAY_GPU_CHECK_SECTIONS)", "RESULT: INCOMPLETE"},
		},
		"limit not enforced fails": {
			binaries: true, mps: true, env: []string{"FAKE_NOT_ENFORCED=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: tenant a's client allocated 2560 MiB past its server's 2048 MiB limit: the server-side limit is NOT enforced",
				"FAIL: escape NOT blocked: the same, without the share library", "RESULT: FAILED"},
		},
		"shared memory seen by the other tenant fails": {
			binaries: true, mps: true, env: []string{"FAKE_SHM_LEAKS=1", "FAIRWAY_GPU_CHECK_SECTIONS=mps"}, wantExit: 1,
			want: []string{"FAIL: tenant b's /dev/shm shows tenant a's shared memory: cuda.shm.", "RESULT: FAILED"},
		},
		"not root is skipped, not passed": {
			binaries: true, mps: true, env: []string{"FAIRWAY_GPU_CHECK_EUID=1000"}, wantExit: 2,
			want: []string{"SKIPPED: MPS isolation: needs root", "RESULT: INCOMPLETE"},
		},
		"no driver and no MPS is skipped, not passed": {
			binaries: true, env: []string{"FAKE_NO_DRIVER=1"}, wantExit: 2,
			want: []string{"SKIPPED: discovery: no usable NVIDIA driver here", "SKIPPED: MPS isolation: nvidia-cuda-mps-control not found",
				"SKIPPED: idle lending: the CUDA driver is not usable", "SKIPPED: swap: the CUDA driver is not usable", "RESULT: INCOMPLETE"},
		},
		"no binaries and no Go": {
			wantExit: 2,
			want:     []string{"SKIPPED: everything: no fairway/cudaalloc", "RESULT: INCOMPLETE"},
		},
	}
	// The cases run side by side, five at a time (most of a case is the script's sleeps, and
	// -parallel would cap them at the CPU count); each has a folder of its own.
	type result struct {
		out  []byte
		exit int
	}
	results := map[string]chan result{}
	slots := make(chan struct{}, 5)
	for name, tc := range cases {
		dir := t.TempDir()
		bin, path := filepath.Join(dir, "bin"), filepath.Join(dir, "path")
		for _, d := range []string{bin, path} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if tc.binaries {
			write(t, filepath.Join(bin, "fairway"), fakeFairway)
			write(t, filepath.Join(bin, "cudaalloc"), fakeCudaalloc)
			if !tc.noShim {
				// A real, empty shared object (the loader preloads it): the fakes model what
				// the library does from its name in LD_PRELOAD.
				if out, err := exec.Command("gcc", "-shared", "-x", "c", "/dev/null", "-o", filepath.Join(bin, "libfairway-share.so")).CombinedOutput(); err != nil {
					t.Fatalf("gcc: %v\n%s", err, out)
				}
			}
		}
		if tc.mps {
			write(t, filepath.Join(path, "nvidia-cuda-mps-control"), fakeMPSControl)
			write(t, filepath.Join(path, "setpriv"), fakeSetpriv)
			write(t, filepath.Join(path, "nvidia-smi"), fakeNvidiaSMI)
		}
		// A cgroup v2 root of the test's own (the fakes model the driver's limit in it).
		cgroot := filepath.Join(dir, "cgroup")
		if err := os.Mkdir(cgroot, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(cgroot, "cgroup.controllers"), "cpuset cpu io memory pids\n")
		cmd := exec.Command("bash", script, bin)
		// No Go, no NVIDIA tools: only the fakes and the base system.
		cmd.Env = append([]string{"PATH=" + path + ":/usr/bin:/bin", "TMPDIR=" + dir, "FAIRWAY_GPU_CHECK_LOAN_SOAK_S=0.3", "FAIRWAY_GPU_CHECK_SWAP_LOAN_S=0.1", "FAIRWAY_GPU_CHECK_EUID=0",
			"FAIRWAY_GPU_CHECK_CGROUP_ROOT=" + cgroot}, tc.env...)
		done := make(chan result, 1)
		results[name] = done
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			out, _ := cmd.CombinedOutput()
			done <- result{out: out, exit: cmd.ProcessState.ExitCode()}
		}()
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := <-results[name]
			if r.exit != tc.wantExit {
				t.Errorf("exit %d, want %d; output:\n%s", r.exit, tc.wantExit, r.out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(r.out), w) {
					t.Errorf("output lacks %q:\n%s", w, r.out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(string(r.out), w) {
					t.Errorf("output has %q:\n%s", w, r.out)
				}
			}
		})
	}
}
