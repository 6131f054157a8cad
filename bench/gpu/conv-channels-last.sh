. .device/setup.sh >/dev/null 2>&1; B=/tmp/kc/bin; C=$(ls $B/conformance-*|head -1)
nvidia-smi --query-gpu=name --format=csv,noheader
KERNELC_KINDS=conv2d KERNELC_REQUIRE_CUDA=1 CI=1 timeout 200 $C --test-threads=4 cuda_device 2>&1 | grep -E "^test |test result|FAIL|panicked" | head -20
OUT=$OUT timeout 300 bash bench/gpu/device-run.sh conv 2>&1 | tail -8
cat $OUT/report-conv-2.md | tail -8
grep -iE "channels-last|packed|mma|simt" $OUT/kernelc-conv-1.txt | head -40
KERNELC_KINDS=conv2d KERNELC_REQUIRE_CUDA=1 CI=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $C --test-threads=1 --exact cuda_device 2>&1 | tail -4
KERNELC_TUNING_BUDGET=30000 KERNELC_CACHE_DIR=/tmp/kc-all timeout 120 kernelc bench --device cuda --tune --no-roofline --specs bench/gpu/specs-conv.json > $OUT/all.txt 2>&1; echo "all: $?"; grep -vE "^\s*$" $OUT/all.txt | head -60
