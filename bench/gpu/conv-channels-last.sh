# Issue #19, channels-last convolutions on the GPU machine: the conv and permute
# conformance cases on CUDA (heuristics, every schedule, large tiles), memcheck over
# them, the conv stage against cuDNN (tuned on a fresh cache, default budget), and the
# profile of the permute kernels.
. .device/setup.sh >/dev/null 2>&1; B=/tmp/kc/bin; C=$(ls $B/conformance-*|head -1)
nvidia-smi --query-gpu=name --format=csv,noheader
KERNELC_KINDS=conv2d,permute KERNELC_REQUIRE_CUDA=1 CI=1 timeout 200 $C --test-threads=4 cuda_device 2>&1 | grep -E "^test |test result|FAIL|panicked" | head -20
OUT=$OUT timeout 300 bash bench/gpu/device-run.sh conv 2>&1 | tail -4
tail -4 $OUT/report-conv-1.md; tail -4 $OUT/report-conv-2.md
grep -E "tuned now|^\s+\*" $OUT/kernelc-conv-1.txt
KERNELC_KINDS=conv2d,permute KERNELC_REQUIRE_CUDA=1 CI=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $C --test-threads=1 --exact cuda_device 2>&1 | tail -3
KERNELC_CACHE=off timeout 100 /usr/local/cuda/bin/ncu --kernel-name main --launch-skip 3 --launch-count 3 --section SpeedOfLight kernelc bench --device cuda --no-roofline --specs bench/gpu/specs-conv1.json --runs 2 > $OUT/ncu.txt 2>&1
grep -E "Duration|Compute \(SM\)|DRAM Through" $OUT/ncu.txt
