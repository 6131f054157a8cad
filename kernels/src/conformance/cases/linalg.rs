//! Cases for GEMM, conv2d, im2col and col2im.
//!
//! GEMM: every transpose combination in both layouts, alpha/beta (beta = 0 leaves C
//! unread: the harness poisons it), batches with a broadcast (stride 0) dimension,
//! bias, leading dimensions and batch strides that leave gaps in C, f64, f16, bf16 and
//! input rounding, at sizes 1, primes and non-multiples of every tile, plus exact tile
//! multiples (the unguarded paths) and a long reduction that splits (split-K) on GPU
//! caps. Conv: stride > 1, padding, non-square windows and images, 1×1 kernels,
//! batch > 1, bias on and off, all three passes.

use crate::spec::*;
use kernelc_ir::ScalarType::{self, *};

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    match kind {
        OpKind::Gemm => gemm_cases(),
        OpKind::Conv2d => conv_cases(),
        OpKind::Im2col => im2col_cases(),
        OpKind::Col2im => col2im_cases(),
        _ => vec![kind.example()],
    }
}

fn g(dtype: ScalarType, m: usize, n: usize, k: usize) -> GemmSpec {
    GemmSpec::new(dtype, m, n, k)
}

fn gemm_cases() -> Vec<OpSpec> {
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
    let mut s = g(F32, 16, 24, 32);
    s.input_rounding = Some(F16);
    v.push(s);
    let mut s = g(F32, 13, 8, 20);
    s.input_rounding = Some(Bf16);
    s.trans_a = true;
    s.trans_b = true;
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
    v.into_iter().map(OpSpec::Gemm).collect()
}

fn win(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Window2d {
    Window2d {
        kernel,
        stride,
        padding,
    }
}

/// `(dtype, batch, in_channels, out_channels, [height, width], window, bias)`.
type ConvCase = (ScalarType, usize, usize, usize, [usize; 2], Window2d, bool);

fn conv_cases() -> Vec<OpSpec> {
    let sq = Window2d::square;
    let forward: [ConvCase; 7] = [
        (F32, 1, 2, 3, [5, 5], sq(3, 1, 1), true),
        (F32, 2, 3, 5, [7, 9], win([3, 2], [2, 1], [1, 0]), true),
        // 1×1, stride 1, no padding: the image is a plain matrix (30 pixels: scalar
        // loads; 16 pixels: vector loads).
        (F32, 2, 4, 6, [6, 5], sq(1, 1, 0), false),
        (F32, 2, 5, 7, [4, 4], sq(1, 1, 0), true),
        (F64, 1, 3, 2, [5, 5], sq(1, 2, 1), true),
        (F16, 1, 3, 4, [6, 6], sq(3, 2, 1), true),
        (Bf16, 2, 2, 3, [8, 5], win([2, 3], [1, 2], [0, 1]), false),
    ];
    let backward_data: [ConvCase; 6] = [
        // Stride 1: implicit GEMM through the transposed window.
        (F32, 2, 3, 4, [6, 7], sq(3, 1, 1), false),
        (F32, 1, 2, 2, [5, 7], sq(5, 1, 2), false),
        (F32, 2, 4, 5, [4, 4], sq(1, 1, 0), false),
        // Stride > 1: a GEMM into a column buffer, then col2im.
        (F32, 2, 2, 3, [7, 6], win([3, 2], [2, 1], [1, 0]), false),
        (F64, 1, 3, 2, [5, 5], sq(1, 2, 0), false),
        (F16, 1, 2, 3, [6, 6], sq(3, 2, 1), false),
    ];
    let backward_filter: [ConvCase; 6] = [
        (F32, 2, 3, 4, [6, 7], sq(3, 1, 1), false),
        (F32, 3, 2, 3, [7, 6], win([3, 2], [2, 1], [1, 0]), false),
        (F32, 2, 4, 5, [4, 4], sq(1, 1, 0), false),
        (F64, 1, 3, 2, [5, 5], sq(1, 1, 0), false),
        // 512 output positions per filter element: split-K on GPU caps.
        (F32, 2, 2, 3, [16, 16], sq(3, 1, 1), false),
        (Bf16, 2, 2, 2, [6, 6], sq(3, 2, 1), false),
    ];
    let mut v = Vec::new();
    for (pass, list) in [
        (ConvPass::Forward, &forward[..]),
        (ConvPass::BackwardData, &backward_data[..]),
        (ConvPass::BackwardFilter, &backward_filter[..]),
    ] {
        for &(dtype, batch, in_channels, out_channels, [height, width], window, bias) in list {
            v.push(OpSpec::Conv2d(Conv2dSpec {
                dtype,
                pass,
                batch,
                in_channels,
                out_channels,
                height,
                width,
                window,
                bias,
            }));
        }
    }
    v
}

/// `(dtype, batch, channels, [height, width], window)`.
type PatchCase = (ScalarType, usize, usize, [usize; 2], Window2d);

fn patch_cases() -> [PatchCase; 5] {
    let sq = Window2d::square;
    [
        (F32, 1, 2, [4, 4], sq(3, 1, 1)),
        (F16, 2, 3, [7, 5], win([3, 2], [2, 1], [1, 0])),
        (F32, 1, 1, [1, 1], sq(1, 1, 0)),
        (F64, 2, 2, [6, 6], sq(1, 2, 1)),
        // Stride larger than the window: pixels no window reads.
        (Bf16, 1, 2, [5, 4], sq(2, 3, 0)),
    ]
}

fn im2col_cases() -> Vec<OpSpec> {
    patch_cases()
        .into_iter()
        .map(|(dtype, batch, channels, [height, width], window)| {
            OpSpec::Im2col(Im2colSpec {
                dtype,
                batch,
                channels,
                height,
                width,
                window,
            })
        })
        .collect()
}

fn col2im_cases() -> Vec<OpSpec> {
    let mut v: Vec<OpSpec> = patch_cases()
        .into_iter()
        .enumerate()
        .map(|(i, (dtype, batch, channels, [height, width], window))| {
            OpSpec::Col2im(Col2imSpec {
                dtype,
                batch,
                channels,
                height,
                width,
                window,
                accumulate: i % 2 == 1,
            })
        })
        .collect();
    v.push(OpSpec::Col2im(Col2imSpec {
        dtype: F32,
        batch: 2,
        channels: 2,
        height: 6,
        width: 6,
        window: Window2d::square(3, 2, 2),
        accumulate: false,
    }));
    v
}
