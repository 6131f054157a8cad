# Nsight Compute on the heuristics' channels-last 16x64x56² convolution: the multiply
# and the image's permute.
. .device/setup.sh >/dev/null 2>&1
which ncu || ls /usr/local/cuda*/bin/ncu
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
KERNELC_CACHE=off timeout 200 $NCU --kernel-name main --launch-skip 5 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis kernelc bench --device cuda --no-roofline --specs bench/gpu/specs-conv1.json --runs 3 > $OUT/ncu.txt 2>&1
echo "ncu: $?"; grep -vE "^\s*$" $OUT/ncu.txt | cut -c1-150 | tail -80
KERNELC_CACHE=off timeout 100 $NCU --kernel-name main --launch-skip 3 --launch-count 2 --section SpeedOfLight kernelc bench --device cuda --no-roofline --specs bench/gpu/specs-conv1.json --runs 2 > $OUT/ncu-permute.txt 2>&1
grep -E "Duration|Throughput|Grid Size|Block Size" $OUT/ncu-permute.txt | head -12
