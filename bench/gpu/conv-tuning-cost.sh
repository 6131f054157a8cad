# The conv stage with the default tuning budget, then the third class alone on a
# fresh cache with each kernel's compile traced (where its tuning time goes).
. .device/setup.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT timeout 300 bash bench/gpu/device-run.sh conv 2>&1 | tail -4
tail -5 $OUT/report-conv-1.md; tail -5 $OUT/report-conv-2.md
rm -rf /tmp/kc-c3; RUST_LOG=kernelc_runtime=debug KERNELC_CACHE_DIR=/tmp/kc-c3 timeout 100 kernelc bench --device cuda --tune --no-roofline --specs bench/gpu/specs-conv3.json > $OUT/c3.txt 2>&1
grep -E "kernel ready|tuned|tuning|µs" $OUT/c3.txt | sed -E 's/\x1b\[[0-9;]*m//g' | cut -c1-220 | head -40
