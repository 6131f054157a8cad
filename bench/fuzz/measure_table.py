#!/usr/bin/env python3
"""Turns the op fuzzer's MEASURE lines (KERNELC_FUZZ_MEASURE=1; kernels::fuzz::driver::measure)
into the markdown table of docs/semantics.md: per table row (op, all dtypes together) and
executor, the worst error in units of the row's bound (a value <= 1 meets the table), with
the cases run; runs that errored and NaN/inf mismatches are flagged.

    python3 bench/fuzz/measure_table.py measure-*.txt > table.md
"""
import collections
import re
import sys

SHORT = [
    (r"\[ptx\]", "cuda"),
    (r"llvmpipe.*\[(\S+)\]", r"lavapipe \1"),
    (r"NVIDIA.*Vulkan.*\[(\S+)\]", r"nvidia-vk \1"),
    (r"^cpu .*", "cpu"),
    (r"^interp/(\S+)", r"interp \1"),
]


def short(executor):
    for pattern, name in SHORT:
        if re.search(pattern, executor):
            return re.sub(r".*" + pattern + r".*", name, executor) if "\\1" in name else name
    return executor


def main(paths):
    worst = collections.defaultdict(float)
    cases = collections.defaultdict(int)
    flags = collections.defaultdict(int)
    executors = []
    for path in paths:
        for line in open(path, encoding="utf-8"):
            if not line.startswith("MEASURE"):
                continue
            _, executor, row, units, n, failed, nonfinite = line.rstrip("\n").split("\t")
            op = row.rsplit(" ", 1)[0]
            ex = short(executor)
            if ex not in executors:
                executors.append(ex)
            key = (op, ex)
            worst[key] = max(worst[key], float(units))
            cases[key] += int(n)
            flags[key] += int(failed) + int(nonfinite)
    ops = sorted({op for op, _ in worst})
    print("| row | " + " | ".join(executors) + " |")
    print("| --- |" + " --- |" * len(executors))
    for op in ops:
        cells = []
        for ex in executors:
            key = (op, ex)
            if key not in cases:
                cells.append("—")
                continue
            cell = f"{worst[key]:.2f} ({cases[key]})"
            if flags[key]:
                cell += f" ⚠{flags[key]}"
            cells.append(cell)
        print(f"| {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
