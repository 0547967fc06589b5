#!/usr/bin/env bash
# Builds what test/gpu/run.sh needs into a folder (default _output/gpu-check) on a machine with
# Go and gcc, so the GPU machine needs neither: the fairway binary (the gpu-agent, go-nvml),
# cudaalloc (CUDA driver API through dlopen) and libfairway-share.so (gpu-agent/shim, gcc alone).
# All link glibc dynamically (dlopen of the driver's libraries rules out a static glibc); the
# glibc each needs is printed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/_output/gpu-check}
mkdir -p "$out"
cd "$root"
export CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -Wno-deprecated-declarations}"
go build -o "$out/fairway" ./cmd/fairway
go build -o "$out/cudaalloc" ./test/gpu/cudaalloc
gcc -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -o "$out/libfairway-share.so" gpu-agent/shim/lib/share.c -ldl -lpthread
cp test/gpu/run.sh "$out/run.sh"
echo "built into $out:"
for b in fairway cudaalloc libfairway-share.so; do
  need=$(objdump -T "$out/$b" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 || true)
  echo "  $b (needs ${need:-an unknown glibc} or newer)"
done
echo "on the GPU machine: test/gpu/run.sh $out"
