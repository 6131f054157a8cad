#!/usr/bin/env bash
# Times `kernelc build` on the 50-entry list for all four targets: a cold build, then a
# second run that must emit nothing. usage: bench/aot/time-build.sh [KERNELC]
set -euo pipefail
cd "$(dirname "$0")/../.."
kernelc="${1:-target/release/kernelc}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for run in cold warm; do
  start=$(date +%s.%N)
  said=$("$kernelc" build bench/aot/kernels.toml --out "$out" --shader-features shader-f16 | tail -1)
  end=$(date +%s.%N)
  printf '%s: %.2f s -- %s\n' "$run" "$(echo "$end - $start" | bc)" "$said"
done
"$kernelc" check "$out" | awk '{print $1}' | sort | uniq -c
