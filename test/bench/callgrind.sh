#!/usr/bin/env bash
# Instruction counts of one benchmark's timed work under callgrind: a figure that a loaded,
# shared machine does not move (wall time and even CPU time do). docs/performance.md has how the
# figures there were taken.
#
#   test/bench/callgrind.sh PACKAGE BENCHMARK [FUNCTION]
#
# PACKAGE is a Go package (./scheduler/engine), BENCHMARK a -test.bench pattern matching one
# benchmark (sub-benchmark included: '^BenchmarkAllocateAction_LargeCluster$/^decision$'), and
# FUNCTION the callgrind --toggle-collect pattern: only instructions executed inside it count
# (default: the engine's Schedule, inclusive). The benchmark runs once (-test.benchtime=1x):
# runBench calls Schedule twice (its untimed first cycle, then the timed one), runScratch once.
# The Go runtime runs on one thread, without garbage collection and without asynchronous
# preemption (its signals disturb valgrind).
set -euo pipefail

pkg=${1:?usage: $0 PACKAGE BENCHMARK [FUNCTION]}
bench=${2:?usage: $0 PACKAGE BENCHMARK [FUNCTION]}
fn=${3:-'*engine.(*Engine).Schedule'}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
cd "$(dirname "$0")/../.."

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/bench.test" "$pkg"
# valgrind 3.19 does not know RDTSCP, which the Go runtime executes when one of its locks is
# contended (runtime.cputicks, from sysmon): a run died of SIGILL there now and then, the longer
# the run the likelier. cpu.rdtscp=off makes the runtime read the clock with RDTSC instead.
GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
	--callgrind-out-file="$dir/callgrind.out" --toggle-collect="$fn" \
	"$dir/bench.test" -test.run '^$' -test.bench "$bench" -test.benchtime 1x >"$dir/bench.log" 2>"$dir/valgrind.log" || {
	cat "$dir/bench.log" "$dir/valgrind.log" >&2
	exit 1
}
grep -E '^(Benchmark|ok|FAIL)' "$dir/bench.log" || true
ir=$(awk '/Collected :/ {print $NF; exit}' "$dir/valgrind.log")
echo "callgrind: $bench in $fn: $ir instructions"
