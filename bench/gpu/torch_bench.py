#!/usr/bin/env python3
"""The torch baseline for `kernelc bench`: the same cases (bench/gpu/specs.json), the
same inputs' shapes and dtypes, the same timing method: the median wall time of
`--runs` calls after one warm-up call, each call followed by torch.cuda.synchronize()
(kernelc synchronises after every timed call too). Writes JSON like `kernelc bench --json`.

With --chain N, each case is instead a dependent chain x <- op(x, ...) of N calls and
one synchronisation at the end, timed per op (median chain / N), as `kernelc bench
--chain N` times it: the eager per-op cost.

usage: torch_bench.py SPECS.json OUT.json [--runs N] [--chain N]
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


def make(spec):
    """Inputs on the GPU and a closure running the op, for each spec kind we bench."""
    dt = DTYPES[spec["dtype"]]
    dev = "cuda"
    rand = lambda *shape: torch.rand(*shape, dtype=dt, device=dev) - 0.5
    op = spec["op"]
    if op == "binary":
        a, b = rand(*spec["lhs"]), rand(*spec["rhs"])
        fn = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "div": torch.div}[spec["func"]]
        return lambda: fn(a, b)
    if op == "unary":
        x = rand(*spec["shape"])
        fn = {"exp": torch.exp, "relu": torch.relu, "tanh": torch.tanh, "gelu_erf": F.gelu,
              "neg": torch.neg, "abs": torch.abs, "sqrt": torch.sqrt, "round": torch.round}[spec["func"]]
        return lambda: fn(x)
    if op == "softmax":
        x = rand(*spec["shape"])
        return lambda: torch.softmax(x, dim=spec["axis"])
    if op == "layer_norm":
        x = rand(*spec["shape"])
        n = spec["shape"][-1]
        w, b = rand(n), rand(n)
        return lambda: F.layer_norm(x, (n,), w, b, spec["eps"])
    if op == "gemm":
        a, b = rand(spec["m"], spec["k"]), rand(spec["k"], spec["n"])
        return lambda: torch.matmul(a, b)
    if op == "attention":
        b, h, s, d = spec["batch"], spec["heads"], spec["seq_q"], spec["head_dim"]
        q, k, v = rand(b, h, s, d), rand(b, h, spec["seq_k"], d), rand(b, h, spec["seq_k"], d)
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=spec["causal"], scale=spec["scale"])
    if op == "conv2d":
        w = spec["window"]
        x = rand(spec["batch"], spec["in_channels"], spec["height"], spec["width"])
        weight = rand(spec["out_channels"], spec["in_channels"], *w["kernel"])
        return lambda: F.conv2d(x, weight, stride=w["stride"], padding=w["padding"])
    raise ValueError(f"no torch baseline for op {op}")


def make_chain(spec):
    """The first input and a step x -> op(x, other inputs), for chainable kinds."""
    dt = DTYPES[spec["dtype"]]
    rand = lambda *shape: torch.rand(*shape, dtype=dt, device="cuda") - 0.5
    if spec["op"] == "binary":
        a, b = rand(*spec["lhs"]), rand(*spec["rhs"])
        fn = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "div": torch.div}[spec["func"]]
        return a, lambda x: fn(x, b)
    if spec["op"] == "unary":
        fn = {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "exp": torch.exp}[spec["func"]]
        return rand(*spec["shape"]), fn
    raise ValueError(f"no chain baseline for op {spec['op']}")


def time_chain(spec, runs, length):
    x0, step = make_chain(spec)

    def chain():
        t = time.perf_counter()
        x = x0
        for _ in range(length):
            x = step(x)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    chain()
    samples = sorted(chain() for _ in range(runs))
    return samples[len(samples) // 2] / length


def time_case(fn, runs):
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t)
    samples.sort()
    return samples[len(samples) // 2]


def main():
    args = sys.argv[1:]
    runs = 20
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i : i + 2]
    chain = None
    if "--chain" in args:
        i = args.index("--chain")
        chain = int(args[i + 1])
        del args[i : i + 2]
    specs_path, out_path = args
    # TF32 would make torch's f32 GEMM/conv inexact (and not comparable): IEEE f32,
    # except for the cases of kernelc's TF32 mode (`"input_rounding": "tf32"`), which
    # run against cuBLAS with TF32 on.
    torch.backends.cudnn.allow_tf32 = False
    cases = json.load(open(specs_path))
    results = {"device": torch.cuda.get_device_name(), "target": f"torch {torch.__version__}", "cases": [], "failures": []}
    for case in cases:
        torch.backends.cuda.matmul.allow_tf32 = case["spec"].get("input_rounding") == "tf32"
        try:
            if chain:
                seconds = time_chain(case["spec"], runs, chain)
            else:
                seconds = time_case(make(case["spec"]), runs)
        except Exception as e:  # a case torch cannot run is reported, not fatal
            results["failures"].append(f"{case['name']}: {e}")
            continue
        entry = {"name": case["name"], "seconds": seconds,
                 "gb_per_s": case.get("bytes", 0) / seconds / 1e9 if "bytes" in case else None,
                 "tflop_per_s": case.get("flops", 0) / seconds / 1e12 if "flops" in case else None}
        results["cases"].append(entry)
        print(f"{case['name']}: {seconds * 1e3:.3f} ms", flush=True)
        torch.cuda.empty_cache()
    json.dump(results, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
