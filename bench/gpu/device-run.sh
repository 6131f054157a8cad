#!/usr/bin/env bash
# The GPU machine's run: conformance, sanitizers and benchmarks of kernelc against
# torch on the same GPU, in one command. Built and packed here by bench/gpu/pack.sh;
# run there from the repository root:
#
#   . .device/setup.sh && bash bench/gpu/device-run.sh [conformance] [memory] [large] [random] [fuzz] [programs] [sweep] [no-panic] [adapters] [sanitize] [bench] [mma] [tune] [tf32] [conv] [attention] [chain] [wgpu-bench]
#
# (no stage named: all six). FUZZ_CASES sets the op fuzzer's cases per executor. Results go to $OUT (the device tool brings them back);
# the last lines printed are the summary.
set -uo pipefail
OUT=${OUT:-/tmp/kernelc-out}
mkdir -p "$OUT"
stages=${*:-conformance memory fuzz sanitize bench wgpu-bench}
bin=/tmp/kc/bin
conformance=$(ls $bin/conformance-* 2>/dev/null | head -1)
cuda_tests=$(ls $bin/cuda-* 2>/dev/null | head -1)
wgpu_tests=$(ls $bin/wgpu-* 2>/dev/null | head -1)
fuzz_tests=$(ls $bin/fuzz_ops-* 2>/dev/null | head -1)
per_call_tests=$(ls $bin/per_call-* 2>/dev/null | head -1)
memory_tests=$(ls $bin/memory-* 2>/dev/null | head -1)
summary=()
note() { summary+=("$1"); echo "== $1"; }

# torch on bench/gpu/specs-$1.json, then `kernelc bench --tune` twice on a fresh disk
# cache (the second pass reads the choices), each pass's report against torch.
tuned_against_torch() {
  local name=$1
  python3 bench/gpu/torch_bench.py "bench/gpu/specs-$name.json" "$OUT/torch-$name.json" > "$OUT/torch-$name.txt" 2>&1
  note "torch $name baseline: exit $?"
  rm -rf "/tmp/kc-$name"
  for pass in 1 2; do
    KERNELC_CACHE_DIR="/tmp/kc-$name" timeout 200 kernelc bench --device cuda --tune --no-roofline \
      --specs "bench/gpu/specs-$name.json" --json "$OUT/kernelc-$name-$pass.json" > "$OUT/kernelc-$name-$pass.txt" 2>&1
    note "kernelc bench --tune $name, pass $pass: exit $?"
    python3 bench/gpu/report.py "$OUT/torch-$name.json" "$OUT/kernelc-$name-$pass.json" > "$OUT/report-$name-$pass.md"
  done
}

for stage in $stages; do
  case $stage in
  conformance)
    # Every op of the catalogue on CUDA and on wgpu through NVIDIA's Vulkan driver,
    # through all four shader paths; absent devices fail the run here.
    KERNELC_REQUIRE_CUDA=1 CI=1 timeout 400 "$conformance" --test-threads=4 \
      cuda_device wgpu_ --nocapture > "$OUT/conformance.txt" 2>&1
    note "conformance (cuda + 4 wgpu paths): exit $? -- $(grep -E '^test result' "$OUT/conformance.txt" | tail -1)"
    grep -E 'passed, [0-9]+ skipped' "$OUT/conformance.txt" | sed 's/^/   /'
    if [ -n "$cuda_tests" ]; then
      timeout 120 "$cuda_tests" --test-threads=1 > "$OUT/cuda-tests.txt" 2>&1
      note "runtime cuda tests: exit $? -- $(grep -E '^test result' "$OUT/cuda-tests.txt" | tail -1)"
    fi
    if [ -n "$wgpu_tests" ]; then
      CI=1 timeout 120 "$wgpu_tests" --test-threads=1 > "$OUT/wgpu-tests.txt" 2>&1
      note "runtime wgpu tests (NVIDIA Vulkan): exit $? -- $(grep -E '^test result' "$OUT/wgpu-tests.txt" | tail -1)"
    fi
    if [ -n "$per_call_tests" ]; then
      # Per-call values compile once on cpu, NVIDIA Vulkan and CUDA.
      KERNELC_REQUIRE_CUDA=1 CI=1 timeout 200 "$per_call_tests" --test-threads=1 --nocapture > "$OUT/per-call.txt" 2>&1
      note "per-call uniforms (cpu, wgpu, cuda): exit $? -- $(grep -E '^test result' "$OUT/per-call.txt" | tail -1)"
    fi
    ;;
  memory)
    # The mutable memory model (buffers, views, ops into views at offsets, in place,
    # the pointer registry with real device pointers, every refusal) on cpu, CUDA and
    # every wgpu path through NVIDIA's Vulkan driver.
    KERNELC_REQUIRE_CUDA=1 CI=1 timeout 200 "$memory_tests" --test-threads=1 --nocapture > "$OUT/memory.txt" 2>&1
    note "memory model (cpu, cuda, 4 wgpu paths): exit $? -- $(grep -E '^test result' "$OUT/memory.txt" | tail -1)"
    for t in raw host modules empty strided; do
      bin_t=$(ls $bin/$t-* 2>/dev/null | head -1)
      [ -n "$bin_t" ] || continue
      KERNELC_REQUIRE_CUDA=1 CI=1 timeout 120 "$bin_t" --test-threads=1 > "$OUT/$t.txt" 2>&1
      note "$t tests (cpu, cuda, wgpu): exit $? -- $(grep -E '^test result' "$OUT/$t.txt" | tail -1)"
    done
    ;;
  large)
    # add and reduce sum over 3·2^30 f32 elements, softmax and layer norm over one row
    # of that many, a GEMM weight and an attention head past 2^31 elements (pieces
    # past 32-bit indices).
    large_tests=$(ls $bin/large-* 2>/dev/null | head -1)
    # One test at a time: together they would need more than the GPU's memory.
    timeout 500 "$large_tests" --test-threads=1 --nocapture > "$OUT/large.txt" 2>&1
    note "tensors past 32-bit indices (cuda): exit $? -- $(grep -E '^test result' "$OUT/large.txt" | tail -1)"
    grep -E 'NOT RUN|error|every element' "$OUT/large.txt" | sed 's/^/   /'
    ;;
  random)
    # Random kernels against the interpreter on every wgpu path through NVIDIA's
    # Vulkan driver (integer programs, narrow packed types included).
    timeout 300 kernelc fuzz --targets wgpu:wgsl,wgpu:naga,wgpu:spirv,wgpu:spirv-naga --time 240s \
      --programs --seed ${FUZZ_SEED:-$(date +%s)} > "$OUT/random.txt" 2>&1
    note "wgpu random kernels (NVIDIA Vulkan): exit $? -- $(tail -1 "$OUT/random.txt" | cut -c1-200)"
    ;;
  programs)
    # kernelc fuzz as a user runs it: the op fuzzer and the program fuzzer (random IR
    # kernels against the interpreter, bit for bit) on CUDA, then on NVIDIA's Vulkan
    # through kernelc's SPIR-V and through WGSL; tables and JSON per run.
    seed=${FUZZ_SEED:-$(date +%s)}
    timeout 240 kernelc fuzz --targets cuda --programs --cases ${PROGRAM_CASES:-400} --seed $seed \
      --json "$OUT/fuzz-cuda.json" --failures "$OUT/failures" > "$OUT/fuzz-cuda.txt" 2>&1
    note "kernelc fuzz cuda --programs (seed $seed): exit $? -- $(tail -1 "$OUT/fuzz-cuda.txt" | cut -c1-200)"
    grep -E '^\| cuda \| (floats|integers)' "$OUT/fuzz-cuda.txt" | sed 's/^/   /'
    timeout 240 kernelc fuzz --targets wgpu:spirv,wgpu:wgsl --programs --cases ${VULKAN_PROGRAM_CASES:-150} --seed $seed \
      --json "$OUT/fuzz-vulkan.json" --failures "$OUT/failures" > "$OUT/fuzz-vulkan.txt" 2>&1
    note "kernelc fuzz wgpu:spirv,wgpu:wgsl --programs (seed $seed): exit $? -- $(tail -1 "$OUT/fuzz-vulkan.txt" | cut -c1-200)"
    grep -E '^\| wgpu:(spirv|wgsl) \| (floats|integers)' "$OUT/fuzz-vulkan.txt" | sed 's/^/   /'
    ;;
  sweep)
    # The exhaustive f32 unary sweep (every bit pattern) on SWEEP_DEVICE (default
    # NVIDIA's Vulkan through kernelc's SPIR-V), SWEEP_FUNCS (default all twelve), one
    # function at a time so that a run cut short keeps the rows it finished.
    device=${SWEEP_DEVICE:-wgpu:spirv}
    start=$SECONDS
    for func in ${SWEEP_FUNCS:-sqrt rsqrt exp log sin cos tan sigmoid tanh gelu_erf gelu_tanh silu}; do
      [ $((SECONDS - start)) -lt ${SWEEP_BUDGET:-480} ] || { note "sweep: out of time before $func"; break; }
      t0=$SECONDS
      timeout 300 kernelc sweep --device $device --funcs $func > "$OUT/sweep-one.txt" 2>&1
      rc=$?
      [ -s "$OUT/sweep.txt" ] || grep -E '^(device|\| function|\| ---)' "$OUT/sweep-one.txt" > "$OUT/sweep.txt"
      grep -E "^\| $func \|" "$OUT/sweep-one.txt" >> "$OUT/sweep.txt"
      note "kernelc sweep $device $func: exit $rc, $((SECONDS - t0)) s"
    done
    rm -f "$OUT/sweep-one.txt"
    grep -E '^\| [a-z_]+ \| [0-9]' "$OUT/sweep.txt" | sed 's/^/   /'
    ;;
  no-panic)
    # Random valid kernels into every emitter on all host threads (NO_PANIC_CASES,
    # NO_PANIC_SEED): typed errors only; KERNELC_FUZZ_TRACE names an abort's input.
    KERNELC_FUZZ_TRACE=1 timeout ${NO_PANIC_TIMEOUT:-500} kernelc fuzz --no-panic random_program \
      --cases ${NO_PANIC_CASES:-100000} --seed ${NO_PANIC_SEED:-20261200} > "$OUT/no-panic.txt" 2> "$OUT/no-panic-trace.txt"
    note "kernelc fuzz --no-panic random_program: exit $? -- $(tail -1 "$OUT/no-panic.txt")"
    tail -3 "$OUT/no-panic-trace.txt" | cut -c1-200 | sed 's/^/   /'
    ;;
  fuzz)
    # The op fuzzer on CUDA and on NVIDIA's Vulkan driver (every wgpu path), one seed
    # printed per executor, then each table row's worst error over the conformance
    # table and as many fuzz cases (MEASURE lines).
    seed=${FUZZ_SEED:-$(date +%s)}
    KERNELC_REQUIRE_CUDA=1 CI=1 KERNELC_FUZZ_SEED=$seed KERNELC_FUZZ_CASES=${FUZZ_CASES:-3000} \
      timeout 300 "$fuzz_tests" --test-threads=2 cuda wgpu --nocapture > "$OUT/fuzz.txt" 2>&1
    note "op fuzzer (cuda + 4 wgpu paths, seed $seed): exit $? -- $(grep -E '^test result' "$OUT/fuzz.txt" | tail -1)"
    grep -E 'cases/executor runs|NOT RUN|found a failure' "$OUT/fuzz.txt" | cut -c1-300 | sed 's/^/   /'
    KERNELC_REQUIRE_CUDA=1 CI=1 KERNELC_FUZZ_MEASURE=1 KERNELC_FUZZ_SEED=$seed KERNELC_FUZZ_CASES=${FUZZ_CASES:-3000} \
      timeout 300 "$fuzz_tests" --test-threads=2 cuda wgpu_spirv wgpu_wgsl --nocapture > "$OUT/measure.txt" 2>&1
    note "fuzz measure (cuda, wgpu spirv, wgpu wgsl): exit $? -- $(grep -c '^MEASURE' "$OUT/measure.txt") rows"
    grep '^MEASURE' "$OUT/measure.txt" > "$OUT/measure.tsv"
    ;;
  adapters)
    # The seed-trait adapters (bench/gpu/pack-adapters.sh): every method through the
    # conformance harness on cpu, CUDA and every wgpu path (NVIDIA Vulkan), then the
    # adapter benchmark on CUDA against each crate's own CPU backend on this host.
    export LD_LIBRARY_PATH=$PWD/.device/data/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for t in adapter_oxicuda adapter_rumus adapter_rustd; do
      bin_t=$(ls $bin/$t-* 2>/dev/null | head -1)
      [ -n "$bin_t" ] || { note "$t: not packed"; continue; }
      KERNELC_REQUIRE_CUDA=1 CI=1 timeout 300 "$bin_t" --test-threads=1 --nocapture > "$OUT/$t.txt" 2>&1
      note "$t (cpu, cuda, 4 wgpu paths): exit $? -- $(grep -E '^test result' "$OUT/$t.txt" | tail -1)"
      grep -E ' cases|refused|NOT RUN|^loss' "$OUT/$t.txt" | sed 's/^/   /'
    done
    adapters_bench=$(ls $bin/adapters-* 2>/dev/null | head -1)
    if [ -n "$adapters_bench" ]; then
      KERNELC_DEVICE=cuda timeout 300 "$adapters_bench" > "$OUT/adapters-bench-cuda.txt" 2>&1
      note "adapter benchmark (cuda vs each crate's CpuBackend): exit $?"
      sed 's/^/   /' "$OUT/adapters-bench-cuda.txt"
    fi
    ;;
  sanitize)
    # Every op at the table's ragged shapes (primes, non-multiples of every tile).
    for tool in memcheck racecheck; do
      KERNELC_REQUIRE_CUDA=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 \
        "$conformance" --test-threads=1 cuda_device > "$OUT/sanitize-$tool.txt" 2>&1
      rc=$?
      note "compute-sanitizer $tool: exit $rc -- $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.txt" | tail -1)"
    done
    ;;
  bench)
    python3 bench/gpu/torch_bench.py bench/gpu/specs.json "$OUT/torch.json" > "$OUT/torch.txt" 2>&1
    note "torch baseline: exit $?"
    timeout 400 kernelc bench --device cuda --specs bench/gpu/specs.json --compile \
      --json "$OUT/kernelc-cuda.json" --plot "$OUT/roofline-cuda.svg" > "$OUT/kernelc-cuda.txt" 2>&1
    note "kernelc bench cuda: exit $?"
    python3 bench/gpu/report.py "$OUT/torch.json" "$OUT/kernelc-cuda.json" > "$OUT/report.md"
    ;;
  mma)
    # Tensor-core GEMMs (issue #19) against torch (cuBLAS, TF32 off) on the same GPU,
    # and the SASS of the bf16 tile kernel.
    python3 bench/gpu/torch_bench.py bench/gpu/specs-mma.json "$OUT/torch-mma.json" > "$OUT/torch-mma.txt" 2>&1
    note "torch mma baseline: exit $?"
    timeout 300 kernelc bench --device cuda --specs bench/gpu/specs-mma.json --compile \
      --json "$OUT/kernelc-mma.json" > "$OUT/kernelc-mma.txt" 2>&1
    note "kernelc bench mma: exit $?"
    python3 bench/gpu/report.py "$OUT/torch-mma.json" "$OUT/kernelc-mma.json" > "$OUT/report-mma.md"
    # The bf16 tile kernel's SASS: tensor-core (HMMA/HGMMA) and ldmatrix (LDSM) counts.
    spec='{"op":"gemm","dtype":"bf16","layout":"row_major","m":4096,"n":4096,"k":4096,"trans_a":false,"trans_b":false,"batch":[],"alpha":1.0,"beta":0.0,"bias":false}'
    kernelc lower "$spec" --target ptx --emit > "$OUT/gemm-bf16.txt" 2>&1
    awk '/^\.version/,/^\/\/ uniform/' "$OUT/gemm-bf16.txt" | grep -v '^// uniform' > "$OUT/gemm-bf16.ptx"
    arch=sm_90; grep -q '^\.target sm_90a' "$OUT/gemm-bf16.ptx" && arch=sm_90a
    ptxas -arch=$arch -v "$OUT/gemm-bf16.ptx" -o /tmp/gemm-bf16.cubin > "$OUT/ptxas.txt" 2>&1 \
      && cuobjdump -sass /tmp/gemm-bf16.cubin > "$OUT/gemm-bf16.sass"
    note "bf16 GEMM SASS ($arch): HMMA $(grep -c HMMA "$OUT/gemm-bf16.sass") HGMMA $(grep -c HGMMA "$OUT/gemm-bf16.sass") LDSM $(grep -c LDSM "$OUT/gemm-bf16.sass")"
    ;;
  tune)
    # Autotuning (issue #19): the tensor-core GEMMs' and the convolution's schedules
    # timed on a fresh disk cache, then a second process on the same cache (the
    # choices read from disk, nothing timed), each against torch in the same run.
    [ -f "$OUT/torch-mma.json" ] || python3 bench/gpu/torch_bench.py bench/gpu/specs-mma.json \
      "$OUT/torch-mma.json" > "$OUT/torch-mma.txt" 2>&1
    rm -rf /tmp/kc-tune
    for pass in 1 2; do
      KERNELC_CACHE_DIR=/tmp/kc-tune timeout 250 kernelc bench --device cuda --tune --no-roofline \
        --specs bench/gpu/specs-tune.json --json "$OUT/kernelc-tune-$pass.json" > "$OUT/kernelc-tune-$pass.txt" 2>&1
      note "kernelc bench --tune, pass $pass: exit $? -- $(grep -c 'tuned now' "$OUT/kernelc-tune-$pass.txt") classes tuned, $(grep -c 'stored choice' "$OUT/kernelc-tune-$pass.txt") stored choices"
      python3 bench/gpu/report.py "$OUT/torch-mma.json" "$OUT/kernelc-tune-$pass.json" > "$OUT/report-tune-$pass.md"
    done
    ;;
  tf32)
    # TF32 mode (issue #19): f32 GEMMs with inputs rounded to TF32 on tensor cores,
    # against cuBLAS with TF32 on (torch_bench.py turns it on for these specs), and
    # the SASS of the multiply (the plan's last kernel, after the two packs).
    tuned_against_torch tf32
    spec='{"op":"gemm","dtype":"f32","layout":"row_major","m":4096,"n":4096,"k":4096,"trans_a":false,"trans_b":false,"batch":[],"alpha":1.0,"beta":0.0,"bias":false,"input_rounding":"tf32"}'
    kernelc lower "$spec" --target ptx --emit > "$OUT/gemm-tf32.txt" 2>&1
    last=$(grep -n '^\.version' "$OUT/gemm-tf32.txt" | tail -1 | cut -d: -f1)
    tail -n +"$last" "$OUT/gemm-tf32.txt" | awk '/^\.version/,/^\/\/ uniform/' | grep -v '^// uniform' > "$OUT/gemm-tf32.ptx"
    ptxas -arch=sm_90a -v "$OUT/gemm-tf32.ptx" -o /tmp/gemm-tf32.cubin > "$OUT/ptxas-tf32.txt" 2>&1 \
      && cuobjdump -sass /tmp/gemm-tf32.cubin > "$OUT/gemm-tf32.sass"
    note "TF32 GEMM SASS (sm_90a): HGMMA $(grep -c HGMMA "$OUT/gemm-tf32.sass") ($(grep -o 'HGMMA[.0-9A-Z]*' "$OUT/gemm-tf32.sass" | sort -u | head -2 | tr '\n' ' '))"
    ;;
  conv)
    # bf16 convolutions (issue #19) against cuDNN.
    tuned_against_torch conv
    ;;
  attention)
    # Attention on tensor cores (issue #19) against torch's scaled_dot_product_attention.
    tuned_against_torch attention
    ;;
  chain)
    # Per-op cost of 1,000 dependent tiny ops with one synchronisation (launch
    # overhead): torch eager against kernelc on CUDA and on wgpu (NVIDIA Vulkan).
    python3 bench/gpu/torch_bench.py bench/gpu/specs-chain.json "$OUT/torch-chain.json" --chain 1000 > "$OUT/torch-chain.txt" 2>&1
    note "torch chain baseline: exit $?"
    for device in cuda wgpu:spirv wgpu:wgsl; do
      timeout 200 kernelc bench --device $device --specs bench/gpu/specs-chain.json --chain 1000 \
        --json "$OUT/kernelc-chain-${device/:/-}.json" > "$OUT/kernelc-chain-${device/:/-}.txt" 2>&1
      note "kernelc chain $device: exit $?"
    done
    python3 bench/gpu/report.py "$OUT/torch-chain.json" "$OUT"/kernelc-chain-*.json > "$OUT/report-chain.md"
    ;;
  wgpu-bench)
    python3 bench/gpu/torch_bench.py bench/gpu/specs-wgpu.json "$OUT/torch-wgpu.json" > /dev/null 2>&1
    for path in wgsl spirv; do
      timeout 200 kernelc bench --device wgpu:$path --specs bench/gpu/specs-wgpu.json \
        --json "$OUT/kernelc-wgpu-$path.json" > "$OUT/kernelc-wgpu-$path.txt" 2>&1
      note "kernelc bench wgpu:$path: exit $?"
    done
    python3 bench/gpu/report.py "$OUT/torch-wgpu.json" "$OUT"/kernelc-wgpu-*.json > "$OUT/report-wgpu.md"
    ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
echo; echo "## summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
for f in "$OUT"/report*.md; do [ -e "$f" ] && cat "$f"; done
# The device tool brings back at most 8 files: everything but the summary and the
# reports goes into one archive.
(cd "$OUT" && tar czf logs.tgz --remove-files $(ls | grep -v -e '^report' -e '^summary.txt$' -e '^logs.tgz$' -e '^measure.tsv$'))
