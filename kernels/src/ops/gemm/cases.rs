//! Conformance cases of GEMM: every transpose combination in both layouts,
//! alpha/beta (beta = 0 leaves C unread: the harness poisons it), batches with a
//! broadcast (stride 0) dimension, bias, leading dimensions and batch strides that
//! leave gaps in C, f64, f16, bf16 and input rounding, at sizes 1, primes and
//! non-multiples of every tile, plus exact tile multiples (the unguarded paths) and a
//! long reduction that splits (split-K) on GPU caps.

use super::spec::*;
use crate::ops::Activation;
use kernelc_ir::ScalarType::{self, *};

fn g(dtype: ScalarType, m: usize, n: usize, k: usize) -> GemmSpec {
    GemmSpec::new(dtype, m, n, k)
}

pub(super) fn gemm_cases() -> Vec<GemmSpec> {
    let mut v = vec![g(F32, 1, 1, 1), g(F32, 130, 70, 40)];
    // Every transpose combination, row- and column-major, with alpha and beta.
    for (i, (ta, tb)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let mut s = if i % 2 == 0 {
                g(F32, 7, 13, 5)
            } else {
                g(F32, 65, 33, 17)
            };
            s.layout = layout;
            s.trans_a = ta;
            s.trans_b = tb;
            s.alpha = [1.0, 0.5, -1.25, 2.0][i];
            s.beta = [0.0, 1.5, 0.0, -0.75][i];
            s.bias = i == 1 || layout == Layout::ColMajor && i == 2;
            v.push(s);
        }
    }
    // Leading dimensions above the minimum: gaps in C are zeroed (beta = 0) or keep
    // the prior C (beta != 0).
    let mut s = g(F32, 7, 13, 5);
    (s.lda, s.ldb, s.ldc) = (Some(8), Some(16), Some(17));
    v.push(s);
    let mut s = g(F32, 9, 6, 11);
    s.layout = Layout::ColMajor;
    s.trans_a = true;
    (s.lda, s.ldb, s.ldc) = (Some(12), Some(13), Some(10));
    s.beta = 1.0;
    s.bias = true;
    v.push(s);
    // Batches: a broadcast (stride 0) dimension of A, packed B, strided C with gaps.
    let mut s = g(F32, 7, 5, 3);
    s.batch = vec![2, 3];
    s.stride_a = Some(vec![0, 21]);
    s.stride_c = Some(vec![3 * 40, 40]);
    s.beta = 0.5;
    v.push(s);
    // Interleaved C (a permuted result, attention's `[b, h, s, d] → [b, s, h, d]`):
    // each head's rows between the other heads', `ldc = h·n`.
    let mut s = g(F32, 5, 4, 6);
    s.batch = vec![2, 3];
    s.ldc = Some(3 * 4);
    s.stride_c = Some(vec![5 * 3 * 4, 4]);
    s.bias = true;
    v.push(s);
    let mut s = g(F32, 6, 10, 4);
    s.batch = vec![3];
    s.trans_b = true;
    s.stride_b = Some(vec![0]);
    s.bias = true;
    v.push(s);
    // Other dtypes.
    let mut s = g(F64, 33, 17, 9);
    s.trans_b = true;
    s.beta = 2.0;
    v.push(s);
    let mut s = g(F16, 19, 23, 11);
    s.bias = true;
    s.beta = 1.0;
    v.push(s);
    let mut s = g(Bf16, 20, 24, 12);
    s.trans_a = true;
    s.layout = Layout::ColMajor;
    v.push(s);
    // Matrix fragments (tensor cores on CUDA caps): ragged in every dimension across
    // several 64 × 64 tiles and 32-deep slabs, every transpose, a batch, bias,
    // activation, beta, and gaps in C.
    let mut s = g(Bf16, 70, 136, 45);
    s.trans_b = true;
    s.bias = true;
    s.activation = Some(Activation::Relu);
    v.push(s);
    let mut s = g(F16, 129, 67, 70);
    s.trans_a = true;
    s.beta = -0.5;
    s.alpha = 0.75;
    v.push(s);
    let mut s = g(Bf16, 33, 40, 17);
    s.trans_a = true;
    s.trans_b = true;
    s.layout = Layout::ColMajor;
    s.batch = vec![3];
    s.stride_b = Some(vec![0]);
    s.bias = true;
    v.push(s);
    let mut s = g(F16, 17, 9, 64);
    s.ldc = Some(12);
    s.beta = 1.0;
    v.push(s);
    // Strides, offsets and extents that allow 4-wide staging loads on both axes.
    let mut s = g(Bf16, 68, 72, 40);
    s.batch = vec![2];
    s.beta = 0.5;
    v.push(s);
    let mut s = g(F16, 36, 44, 24);
    s.trans_a = true;
    s.trans_b = true;
    s.bias = true;
    v.push(s);
    let mut s = g(F32, 16, 24, 32);
    s.input_rounding = Some(InputRounding::F16);
    v.push(s);
    let mut s = g(F32, 13, 8, 20);
    s.input_rounding = Some(InputRounding::Bf16);
    s.trans_a = true;
    s.trans_b = true;
    v.push(s);
    // TF32 mode: ragged, transposed, batched, column-major with a bias.
    let mut s = g(F32, 37, 29, 45);
    s.input_rounding = Some(InputRounding::Tf32);
    v.push(s);
    let mut s = g(F32, 64, 40, 36);
    s.input_rounding = Some(InputRounding::Tf32);
    s.trans_b = true;
    s.batch = vec![2];
    s.beta = 0.5;
    v.push(s);
    let mut s = g(F32, 20, 33, 17);
    s.input_rounding = Some(InputRounding::Tf32);
    s.trans_a = true;
    s.layout = Layout::ColMajor;
    s.bias = true;
    v.push(s);
    // Exact tile multiples (no guards), vector-aligned.
    let mut s = g(F32, 64, 64, 32);
    s.beta = 1.0;
    v.push(s);
    // Vectors stored as matrices (GEMV-like): one row of C, one column of C.
    let mut s = g(F32, 1, 37, 19);
    s.trans_a = true;
    v.push(s);
    let mut s = g(F32, 23, 1, 9);
    s.trans_b = true;
    s.layout = Layout::ColMajor;
    s.beta = 1.0;
    v.push(s);
    // A long reduction with few output tiles: split-K on GPU caps.
    let mut s = g(F32, 5, 3, 300);
    s.beta = -1.0;
    s.bias = true;
    v.push(s);
    // A matrix smaller than one micro-tile, with a bias: constant columns past n.
    let mut s = g(F32, 1, 1, 1);
    s.bias = true;
    v.push(s);
    // Zero-sized: k = 0 is the epilogue alone (β·C + bias, or zeros); m = 0 and an
    // empty batch compute nothing.
    let mut s = g(F32, 5, 7, 0);
    s.beta = 0.5;
    s.bias = true;
    v.push(s);
    let mut s = g(F64, 4, 3, 0);
    s.layout = Layout::ColMajor;
    s.trans_a = true;
    s.batch = vec![2];
    v.push(s);
    let mut s = g(F32, 6, 9, 0);
    (s.lda, s.ldb, s.ldc) = (Some(3), Some(12), Some(11));
    s.beta = 1.0;
    v.push(s);
    // Activations in the epilogue, after bias and beta·C: each function, every dtype,
    // both layouts, a batch, split-K, a k = 0 epilogue and an f32 GEMM whose inputs
    // round to bf16.
    let activations = [
        Activation::GeluErf,
        Activation::GeluTanh,
        Activation::Relu,
        Activation::LeakyRelu { slope: 0.125 },
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Silu,
    ];
    for (i, act) in activations.into_iter().enumerate() {
        let mut s = match i {
            0 => g(F32, 33, 65, 19),
            1 => g(F16, 19, 23, 11),
            2 => g(Bf16, 20, 24, 12),
            3 => g(F64, 9, 17, 13),
            4 => g(F32, 5, 3, 300),
            5 => g(F32, 5, 7, 0),
            _ => g(F32, 16, 24, 32),
        };
        s.activation = Some(act);
        s.bias = i != 2;
        s.beta = [0.0, 1.0, 0.0, 0.5, -1.0, 0.5, 0.0][i];
        s.layout = if i % 2 == 1 {
            Layout::ColMajor
        } else {
            Layout::RowMajor
        };
        if i == 3 {
            s.batch = vec![2];
            s.trans_a = true;
        }
        if i == 6 {
            s.input_rounding = Some(InputRounding::Bf16);
        }
        v.push(s);
    }
    v.push(g(F32, 0, 4, 3));
    let mut s = g(F32, 3, 3, 3);
    s.batch = vec![0, 2];
    v.push(s);
    v
}
