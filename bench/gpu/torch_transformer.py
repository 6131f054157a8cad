#!/usr/bin/env python3
"""The transformer block of kernelc-bb's `models::transformer_block` in torch, f32,
eager and torch.compile, on the GPU: the baseline of `bb/benches/transformer.rs`.

    python3 bench/gpu/torch_transformer.py [batch seq dim heads]

Same ops in the same order as the ONNX graph: layer norm, Q/K/V projections (no
bias), heads split, scores / sqrt(dh) + causal mask, softmax, context, merge, output
projection + bias, residual; layer norm, 4x MLP with the erf GELU, residual.
Prints the median of timed runs (CUDA events), milliseconds."""
import math
import sys

import torch
import torch.nn.functional as F


def block(x, p, heads, mask):
    b, s, d = x.shape
    dh = d // heads
    n1 = F.layer_norm(x, (d,), p["g1"], p["be1"], 1e-5)
    q = (n1 @ p["wq"]).view(b, s, heads, dh).transpose(1, 2)
    k = (n1 @ p["wk"]).view(b, s, heads, dh).permute(0, 2, 3, 1)
    v = (n1 @ p["wv"]).view(b, s, heads, dh).transpose(1, 2)
    scores = (q @ k) / math.sqrt(dh) + mask
    ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
    h = x + (ctx @ p["wo"] + p["bo"])
    n2 = F.layer_norm(h, (d,), p["g2"], p["be2"], 1e-5)
    f = F.gelu(n2 @ p["w1"] + p["b1"])
    return h + (f @ p["w2"] + p["b2"])


def timed(f, runs=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    b, s, d, heads = (int(a) for a in sys.argv[1:5]) if len(sys.argv) >= 5 else (8, 512, 768, 12)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    r = lambda *shape, scale=0.3: (torch.rand(*shape, generator=g) * 2 - 1).mul(scale).to(dev)
    p = {
        "g1": r(d, scale=1.0), "be1": r(d, scale=0.1),
        "wq": r(d, d), "wk": r(d, d), "wv": r(d, d), "wo": r(d, d), "bo": r(d, scale=0.1),
        "g2": r(d, scale=1.0), "be2": r(d, scale=0.1),
        "w1": r(d, 4 * d), "b1": r(4 * d, scale=0.1), "w2": r(4 * d, d, scale=0.2), "b2": r(d, scale=0.1),
    }
    mask = torch.full((s, s), float("-inf"), device=dev).triu(1)
    x = r(b, s, d, scale=1.0)
    with torch.no_grad():
        eager = timed(lambda: block(x, p, heads, mask))
        compiled = torch.compile(block)
        compiled(x, p, heads, mask)
        comp = timed(lambda: compiled(x, p, heads, mask))
    name = torch.cuda.get_device_name()
    print(f"| torch {torch.__version__} on {name} | {b}x{s}x{d}, {heads} heads | eager {eager:.3f} ms | torch.compile {comp:.3f} ms |")


if __name__ == "__main__":
    main()
