#!/usr/bin/env bash
# Builds (release) and packs for the GPU machine what device-run.sh's `adapters` and
# `sanitize` stages need: the three seed-trait adapter tests, the adapter benchmark
# and the root conformance test (for compute-sanitizer), plus the shared libraries
# those binaries link beyond the base system (.device/data/lib).
set -euo pipefail
cd "$(dirname "$0")/../.."
features=oxicuda,oxicuda-0-5,rumus,rustd
pick() { # cargo's JSON messages on stdin -> the executables of the named targets
  NAMES="$*" python3 -c 'import json,os,sys
names=os.environ["NAMES"].split()
for l in sys.stdin:
    m=json.loads(l)
    if m.get("executable") and m.get("target",{}).get("name") in names: print(m["executable"])'
}
tests=$(cargo test --release --no-run --message-format=json -p kernelc-runtime --features $features \
  --test adapter_oxicuda --test adapter_rumus --test adapter_rustd 2>/dev/null | pick adapter_oxicuda adapter_rumus adapter_rustd)
bench=$(cargo bench --no-run --message-format=json --bench adapters --features $features 2>/dev/null | pick adapters)
conformance=$(cargo test --release --no-run --message-format=json --test conformance -p kernelc 2>/dev/null | pick conformance)
# Shared libraries of these binaries beyond glibc, libstdc++, zlib, zstd and libffi
# (the linker drops rustd_runtime's SDL2/xcb/dbus when nothing of them is called;
# anything left would be missing on the GPU machine).
libs=$(mktemp -d)/lib
mkdir -p "$libs"
for b in $tests $bench; do
  ldd "$b" | awk '/=> \// {print $3}' \
    | { grep -vE '/lib(c|m|gcc_s|stdc\+\+|z|zstd|ffi|dl|pthread|rt)\.so' || true; } \
    | xargs -r -I{} cp -L {} "$libs/"
done
../shared/tools/device-pack $tests $bench $conformance --data "$libs"
