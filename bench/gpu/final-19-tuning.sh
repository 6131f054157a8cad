# The conv stage again after the tuner's review mends (fresh cache, default budget):
# tuning cost per class and the choices, against cuDNN in the same run.
. .device/setup.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT timeout 200 bash bench/gpu/device-run.sh conv 2>&1 | tail -2
tail -4 $OUT/report-conv-1.md; tail -4 $OUT/report-conv-2.md
grep -E "tuned now|^\s+\*|stored" $OUT/kernelc-conv-1.txt $OUT/kernelc-conv-2.txt 2>/dev/null | head
