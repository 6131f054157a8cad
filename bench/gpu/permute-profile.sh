# Nsight Compute on the channels-last convolution's image permute (bf16 [16][64][3136] -> [16][3136][64]).
. .device/setup.sh >/dev/null 2>&1
NCU=/usr/local/cuda/bin/ncu
KERNELC_CACHE=off timeout 100 $NCU --kernel-name main --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats kernelc bench --device cuda --no-roofline --specs bench/gpu/specs-conv1.json --runs 2 > $OUT/ncu-permute.txt 2>&1
grep -E "Duration|Throughput|Grid Size|Block Size|Registers Per|Occupancy|Warp Cycles|Eligible|Issued Warp|No Eligible|Hit Rate|Mem Busy|Block Limit" $OUT/ncu-permute.txt | head -40
