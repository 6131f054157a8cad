# Issue #19 final run of the channels-last convolution session: the conv stage against
# cuDNN (tuned on a fresh cache, default budget; pass 2 reads the choices), memcheck
# over the conv and permute cases, then the whole CUDA conformance table.
. .device/setup.sh >/dev/null 2>&1; B=/tmp/kc/bin; C=$(ls $B/conformance-*|head -1)
nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT timeout 200 bash bench/gpu/device-run.sh conv 2>&1 | tail -3
tail -4 $OUT/report-conv-1.md; tail -4 $OUT/report-conv-2.md
grep -E "tuned now|^\s+\*|not timed" $OUT/kernelc-conv-1.txt 2>/dev/null | head -30
KERNELC_KINDS=conv2d,permute KERNELC_REQUIRE_CUDA=1 CI=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $C --test-threads=1 --exact cuda_device 2>&1 | tail -2
KERNELC_REQUIRE_CUDA=1 CI=1 timeout 330 $C --test-threads=4 cuda_device 2>&1 | grep -E "^test |test result|FAIL|panicked" | head -20
