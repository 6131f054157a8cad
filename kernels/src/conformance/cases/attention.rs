//! Cases for attention and pooling.
//!
//! Attention: sequences of 1, 5, 7, 33, 70 and 100 (tiles are at most 64 keys, 32 for
//! head_dim 64 on the GPU caps, so 70 and 100 leave ragged last blocks; a 33-row query
//! tile is padded to 36 for register blocking), head_dim 8, 13, 16 and 64, causal with
//! `seq_q < seq_k` and `seq_q > seq_k` (rows that see no key), masks of full and
//! broadcast shapes, grouped KV heads, both layouts, every float dtype.
//!
//! Pooling: strides 1/2/3, padding, non-square windows and images, ragged sizes, max
//! and average, with and without indices and `accumulate`; backward max both through
//! the window gather and window-less; adaptive down- and upsampling.

use crate::spec::*;
use kernelc_ir::ScalarType::{self, *};

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    match kind {
        OpKind::Attention => attention(),
        OpKind::Pool2d => pool2d(),
        OpKind::Pool2dBackward => pool2d_backward(),
        OpKind::AdaptivePool2d => adaptive_pool2d(),
        _ => vec![kind.example()],
    }
}

/// One attention case: `[batch, heads, kv_heads]`, `[seq_q, seq_k, head_dim]`.
fn attn(
    dtype: ScalarType,
    layout: AttentionLayout,
    bhk: [usize; 3],
    sizes: [usize; 3],
    causal: bool,
    mask: Option<Vec<usize>>,
) -> OpSpec {
    let [batch, heads, kv_heads] = bhk;
    let [seq_q, seq_k, head_dim] = sizes;
    OpSpec::Attention(AttentionSpec {
        dtype,
        layout,
        batch,
        heads,
        kv_heads,
        seq_q,
        seq_k,
        head_dim,
        scale: 1.0 / (head_dim as f64).sqrt(),
        causal,
        mask,
    })
}

fn attention() -> Vec<OpSpec> {
    use AttentionLayout::{Bhsd, Bshd};
    vec![
        OpKind::Attention.example(),
        // One query, one key.
        attn(F32, Bhsd, [1, 1, 1], [1, 1, 8], false, None),
        // GQA (2 query heads per kv head), causal with seq_q < seq_k, full mask.
        attn(
            F32,
            Bhsd,
            [2, 4, 2],
            [7, 33, 13],
            true,
            Some(vec![2, 4, 7, 33]),
        ),
        // seq_q > seq_k causal: the first 26 rows see no key and output zeros;
        // a per-batch key-padding mask.
        attn(
            F64,
            Bshd,
            [2, 2, 2],
            [33, 7, 8],
            true,
            Some(vec![2, 1, 1, 7]),
        ),
        // head_dim 64 in f16, a per-head key mask.
        attn(
            F16,
            Bhsd,
            [1, 2, 1],
            [33, 33, 64],
            false,
            Some(vec![2, 1, 33]),
        ),
        // head_dim 64, 100 keys: ragged against the 32-key tile the GPU caps pick and the
        // 64-key tile of the CPU caps; causal with seq_q < seq_k, a full mask.
        attn(
            F32,
            Bshd,
            [1, 2, 2],
            [33, 100, 64],
            true,
            Some(vec![1, 2, 33, 100]),
        ),
        // 70 keys (ragged against a 64-key tile), bshd, causal, no mask.
        attn(Bf16, Bshd, [1, 3, 1], [7, 70, 16], true, None),
        // 70 queries over 5 keys, key mask broadcast over everything else.
        attn(F32, Bshd, [1, 2, 1], [70, 5, 13], false, Some(vec![5])),
    ]
}

/// A window of `[height, width]` kernel, stride and padding.
fn win(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Window2d {
    Window2d {
        kernel,
        stride,
        padding,
    }
}

/// One pooling case: `[batch, channels, height, width]`.
fn pool(
    kind: PoolKind,
    dtype: ScalarType,
    nchw: [usize; 4],
    window: Window2d,
    count_include_pad: bool,
    indices: Option<ScalarType>,
) -> OpSpec {
    let [batch, channels, height, width] = nchw;
    OpSpec::Pool2d(Pool2dSpec {
        kind,
        dtype,
        batch,
        channels,
        height,
        width,
        window,
        count_include_pad,
        indices,
    })
}

fn pool2d() -> Vec<OpSpec> {
    use PoolKind::{Avg, Max};
    vec![
        OpKind::Pool2d.example(),
        // 3×3, stride 1, padding 1 (overlapping windows, border windows clipped).
        pool(
            Max,
            F32,
            [1, 3, 7, 5],
            win([3, 3], [1, 1], [1, 1]),
            false,
            Some(I32),
        ),
        // Non-square kernel and stride, padding on one axis only.
        pool(
            Avg,
            F64,
            [2, 2, 9, 11],
            win([3, 2], [2, 3], [1, 0]),
            false,
            None,
        ),
        // Stride 3 with padding, counting the padding.
        pool(
            Avg,
            F16,
            [1, 1, 13, 13],
            win([3, 3], [3, 3], [1, 1]),
            true,
            None,
        ),
        // Non-square everything, f32-held indices.
        pool(
            Max,
            Bf16,
            [1, 2, 10, 7],
            win([2, 3], [3, 2], [1, 1]),
            false,
            Some(F32),
        ),
        // A 1×1 image.
        pool(
            Max,
            F32,
            [1, 1, 1, 1],
            win([1, 1], [1, 1], [0, 0]),
            false,
            Some(U32),
        ),
        // One window covering the whole image.
        pool(
            Avg,
            F32,
            [3, 1, 5, 6],
            win([5, 6], [1, 1], [0, 0]),
            false,
            None,
        ),
    ]
}

/// One pooling-backward case: `[batch, channels, height, width]`; the output size
/// comes from the window, or is given when there is none.
fn pool_bwd(
    kind: PoolKind,
    dtype: ScalarType,
    nchw: [usize; 4],
    window: Result<Window2d, [usize; 2]>,
    count_include_pad: bool,
    index_dtype: Option<ScalarType>,
    accumulate: bool,
) -> OpSpec {
    let [batch, channels, height, width] = nchw;
    let [out_height, out_width] = match window {
        Ok(w) => w.out_size([height, width]).unwrap_or([1, 1]),
        Err(out) => out,
    };
    OpSpec::Pool2dBackward(Pool2dBackwardSpec {
        kind,
        dtype,
        batch,
        channels,
        height,
        width,
        out_height,
        out_width,
        window: window.ok(),
        count_include_pad,
        index_dtype,
        accumulate,
    })
}

fn pool2d_backward() -> Vec<OpSpec> {
    use PoolKind::{Avg, Max};
    vec![
        OpKind::Pool2dBackward.example(),
        // Max through the window gather: 3×3 stride 2 padding 1, accumulate.
        pool_bwd(
            Max,
            F32,
            [1, 2, 9, 7],
            Ok(win([3, 3], [2, 2], [1, 1])),
            false,
            Some(I32),
            true,
        ),
        // Overlapping stride-1 windows: one pixel is the argmax of several outputs.
        pool_bwd(
            Max,
            F64,
            [2, 1, 6, 5],
            Ok(win([2, 2], [1, 1], [0, 0])),
            false,
            Some(U32),
            false,
        ),
        // Average, stride 1 padding 1, border counts exclude the padding.
        pool_bwd(
            Avg,
            F64,
            [1, 3, 7, 5],
            Ok(win([3, 3], [1, 1], [1, 1])),
            false,
            None,
            false,
        ),
        // Average, non-square, counting the padding, accumulate.
        pool_bwd(
            Avg,
            F16,
            [2, 1, 8, 9],
            Ok(win([2, 3], [2, 1], [1, 1])),
            true,
            None,
            true,
        ),
        // Average, stride 3: the last row and column are in no window.
        pool_bwd(
            Avg,
            Bf16,
            [1, 2, 10, 11],
            Ok(win([3, 3], [3, 3], [0, 0])),
            false,
            None,
            false,
        ),
        // Max without a window: arbitrary f32-held indices, accumulate.
        pool_bwd(Max, F32, [2, 3, 5, 6], Err([3, 2]), false, Some(F32), true),
        // Max without a window, i32 indices (negative ones are skipped).
        pool_bwd(Max, F64, [1, 2, 3, 7], Err([2, 4]), false, Some(I32), false),
    ]
}

/// One adaptive-pooling case: `[batch, channels]`, input and output `[h, w]`.
fn adaptive(
    kind: PoolKind,
    pass: PoolPass,
    dtype: ScalarType,
    nc: [usize; 2],
    in_size: [usize; 2],
    out_size: [usize; 2],
) -> OpSpec {
    OpSpec::AdaptivePool2d(AdaptivePool2dSpec {
        kind,
        pass,
        dtype,
        batch: nc[0],
        channels: nc[1],
        in_size,
        out_size,
    })
}

fn adaptive_pool2d() -> Vec<OpSpec> {
    use PoolKind::{Avg, Max};
    use PoolPass::{Backward, Forward};
    vec![
        OpKind::AdaptivePool2d.example(),
        adaptive(Max, Forward, F64, [2, 3], [13, 4], [4, 3]),
        // Upsampling: windows overlap.
        adaptive(Avg, Forward, F16, [1, 2], [3, 5], [5, 7]),
        adaptive(Max, Forward, Bf16, [1, 1], [1, 1], [1, 1]),
        adaptive(Avg, Backward, F32, [2, 2], [7, 5], [3, 2]),
        // Upsampling backward: a pixel lies in several windows.
        adaptive(Avg, Backward, Bf16, [1, 3], [3, 4], [5, 7]),
        adaptive(Avg, Backward, F64, [1, 1], [11, 1], [1, 1]),
    ]
}
