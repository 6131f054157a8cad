#!/usr/bin/env python3
"""Merges `kernelc bench --json` results with the torch baseline of the same run into
one markdown table of ratios (kernelc's rate as a fraction of torch's).

usage: report.py TORCH.json KERNELC.json [KERNELC2.json ...]
"""
import json
import sys


def rate(case, other, memory_bound):
    """The case's rate in a unit both runs report (GB/s first for a memory-bound case,
    else FLOP/s first), else runs/s."""
    units = [("tflop_per_s", "TFLOP/s"), ("gb_per_s", "GB/s")]
    if memory_bound:
        units.reverse()
    for key, unit in units:
        if case.get(key) is not None and (other is None or other.get(key) is not None):
            return case[key], unit
    return 1.0 / case["seconds"], "runs/s"


def share(case):
    roof = case.get("roofline")
    return f"{roof['share']:.0%} ({roof['bound']})" if roof else "-"


def main():
    torch_run = json.load(open(sys.argv[1]))
    base = {c["name"]: c for c in torch_run["cases"]}
    for path in sys.argv[2:]:
        ours = json.load(open(path))
        print(f"\n### kernelc on {ours['device']} [{ours['target']}] vs {torch_run['target']} on {torch_run['device']}\n")
        roof = ours.get("roofline")
        if roof:
            print(f"measured roofline: memory {roof['memory_gb_per_s']:.1f} GB/s (copy {roof['copy_gb_per_s']:.1f}, add {roof['add_gb_per_s']:.1f}, catalogue add {roof.get('catalogue_add_gb_per_s', 0):.1f}), f32 FMA {roof['fma_gflop_per_s']:.1f} GFLOP/s\n")
        print("| case | kernelc | torch | kernelc / torch | kernelc of roofline |")
        print("| --- | --- | --- | --- | --- |")
        for c in ours["cases"]:
            b = base.get(c["name"])
            memory_bound = (c.get("roofline") or {}).get("bound") == "memory"
            r, unit = rate(c, b, memory_bound)
            if b is None:
                print(f"| {c['name']} | {r:.2f} {unit} | - | - | {share(c)} |")
                continue
            rb, _ = rate(b, c, memory_bound)
            print(f"| {c['name']} | {r:.2f} {unit} ({c['seconds']*1e3:.3f} ms) | {rb:.2f} {unit} ({b['seconds']*1e3:.3f} ms) | {r / rb:.0%} | {share(c)} |")
        comp = ours.get("compile_seconds") or []
        if comp:
            med = comp[len(comp) // 2]
            print(f"\ncold compile over {len(comp)} catalogue kernels: median {med*1e3:.2f} ms, p90 {comp[int(len(comp)*0.9)]*1e3:.2f} ms")
        for f in ours.get("failures", []):
            print(f"- kernelc failure: {f}")
    for f in torch_run.get("failures", []):
        print(f"- torch failure: {f}")


if __name__ == "__main__":
    main()
