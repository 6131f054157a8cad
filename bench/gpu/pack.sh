#!/usr/bin/env bash
# Builds (release, static LLVM) what bench/gpu/device-run.sh needs on the GPU machine
# and packs it into .device/ with ../shared/tools/device-pack: the kernelc CLI, the
# root conformance and op-fuzzer test binaries and the runtime's CUDA, wgpu, per-call
# memory-model, raw-kernel, host-slice, native-module, zero-size, strided-view and
# large-tensor tests, and its library tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin kernelc
tests=$(cargo test --release --no-run --message-format=json --test conformance --test fuzz_ops -p kernelc 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("executable") and m.get("target",{}).get("name") in ("conformance", "fuzz_ops"): print(m["executable"])')
runtime_names="cuda wgpu per_call memory raw host modules empty strided large"
runtime_tests=$(cargo test --release --no-run --message-format=json --lib $(printf -- '--test %s ' $runtime_names) -p kernelc-runtime 2>/dev/null \
  | NAMES="$runtime_names kernelc_runtime" python3 -c 'import json,os,sys
names=os.environ["NAMES"].split()
for l in sys.stdin:
    m=json.loads(l)
    if m.get("executable") and m.get("target",{}).get("name") in names: print(m["executable"])')
../shared/tools/device-pack target/release/kernelc $tests $runtime_tests
