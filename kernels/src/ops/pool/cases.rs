//! Conformance cases of the pooling family: strides 1/2/3, padding, non-square windows
//! and images, ragged sizes, max and average, with and without indices and
//! `accumulate`; backward max both through the window gather and window-less;
//! adaptive down- and upsampling.

use super::spec::*;
use crate::conformance::inputs::{draw, Domain};
use crate::op::Op;
use crate::spec::Nchw;
use crate::spec::Window2d;
use kernelc_ir::ScalarType::{self, *};

/// One pooling case: `[batch, channels, height, width]`.
fn pool(
    kind: PoolKind,
    dtype: ScalarType,
    nchw: [usize; 4],
    window: Window2d,
    count_include_pad: bool,
    indices: Option<ScalarType>,
) -> Pool2dSpec {
    Pool2dSpec {
        kind,
        dtype,
        image: Nchw::new(nchw),
        window,
        count_include_pad,
        indices,
    }
}

pub(super) fn pool2d() -> Vec<Pool2dSpec> {
    use PoolKind::{Avg, Max};
    vec![
        Pool2dSpec::example(),
        // 3×3, stride 1, padding 1 (overlapping windows, border windows clipped).
        pool(
            Max,
            F32,
            [1, 3, 7, 5],
            Window2d::new([3, 3], [1, 1], [1, 1]),
            false,
            Some(I32),
        ),
        // Non-square kernel and stride, padding on one axis only.
        pool(
            Avg,
            F64,
            [2, 2, 9, 11],
            Window2d::new([3, 2], [2, 3], [1, 0]),
            false,
            None,
        ),
        // Stride 3 with padding, counting the padding.
        pool(
            Avg,
            F16,
            [1, 1, 13, 13],
            Window2d::new([3, 3], [3, 3], [1, 1]),
            true,
            None,
        ),
        // Non-square everything, f32-held indices.
        pool(
            Max,
            Bf16,
            [1, 2, 10, 7],
            Window2d::new([2, 3], [3, 2], [1, 1]),
            false,
            Some(F32),
        ),
        // A 1×1 image.
        pool(
            Max,
            F32,
            [1, 1, 1, 1],
            Window2d::new([1, 1], [1, 1], [0, 0]),
            false,
            Some(U32),
        ),
        // One window covering the whole image.
        pool(
            Avg,
            F32,
            [3, 1, 5, 6],
            Window2d::new([5, 6], [1, 1], [0, 0]),
            false,
            None,
        ),
        // i64 indices (PyTorch's `max_pool2d_with_indices`).
        pool(
            Max,
            F32,
            [2, 2, 6, 7],
            Window2d::new([2, 2], [2, 2], [0, 1]),
            false,
            Some(I64),
        ),
        // No channels: nothing.
        pool(
            Max,
            F32,
            [2, 0, 6, 7],
            Window2d::new([2, 2], [2, 2], [0, 0]),
            false,
            Some(I32),
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
) -> Pool2dBackwardSpec {
    let image = Nchw::new(nchw);
    let [out_height, out_width] = match window {
        Ok(w) => w.out_size(image.plane()).unwrap_or([1, 1]),
        Err(out) => out,
    };
    Pool2dBackwardSpec {
        kind,
        dtype,
        image,
        out_height,
        out_width,
        window: window.ok(),
        count_include_pad,
        index_dtype,
        accumulate,
    }
}

pub(super) fn pool2d_backward() -> Vec<Pool2dBackwardSpec> {
    use PoolKind::{Avg, Max};
    vec![
        Pool2dBackwardSpec::example(),
        // Max through the window gather: 3×3 stride 2 padding 1, accumulate.
        pool_bwd(
            Max,
            F32,
            [1, 2, 9, 7],
            Ok(Window2d::new([3, 3], [2, 2], [1, 1])),
            false,
            Some(I32),
            true,
        ),
        // Overlapping stride-1 windows: one pixel is the argmax of several outputs.
        pool_bwd(
            Max,
            F64,
            [2, 1, 6, 5],
            Ok(Window2d::new([2, 2], [1, 1], [0, 0])),
            false,
            Some(U32),
            false,
        ),
        // Average, stride 1 padding 1, border counts exclude the padding.
        pool_bwd(
            Avg,
            F64,
            [1, 3, 7, 5],
            Ok(Window2d::new([3, 3], [1, 1], [1, 1])),
            false,
            None,
            false,
        ),
        // Average, non-square, counting the padding, accumulate.
        pool_bwd(
            Avg,
            F16,
            [2, 1, 8, 9],
            Ok(Window2d::new([2, 3], [2, 1], [1, 1])),
            true,
            None,
            true,
        ),
        // Average, stride 3: the last row and column are in no window.
        pool_bwd(
            Avg,
            Bf16,
            [1, 2, 10, 11],
            Ok(Window2d::new([3, 3], [3, 3], [0, 0])),
            false,
            None,
            false,
        ),
        // Max without a window: arbitrary f32-held indices, accumulate.
        pool_bwd(Max, F32, [2, 3, 5, 6], Err([3, 2]), false, Some(F32), true),
        // Max without a window, i32 indices (negative ones are skipped).
        pool_bwd(Max, F64, [1, 2, 3, 7], Err([2, 4]), false, Some(I32), false),
        // i64 indices, through the window gather and without a window.
        pool_bwd(
            Max,
            F32,
            [1, 2, 8, 6],
            Ok(Window2d::new([2, 2], [2, 2], [0, 0])),
            false,
            Some(I64),
            false,
        ),
        pool_bwd(Max, F32, [2, 1, 4, 5], Err([2, 3]), false, Some(I64), true),
        // No batch: nothing.
        pool_bwd(
            Avg,
            F32,
            [0, 2, 6, 6],
            Ok(Window2d::new([2, 2], [2, 2], [0, 0])),
            false,
            None,
            false,
        ),
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
) -> AdaptivePool2dSpec {
    AdaptivePool2dSpec {
        kind,
        pass,
        dtype,
        batch: nc[0],
        channels: nc[1],
        in_size,
        out_size,
    }
}

pub(super) fn adaptive_pool2d() -> Vec<AdaptivePool2dSpec> {
    use PoolKind::{Avg, Max};
    use PoolPass::{Backward, Forward};
    vec![
        AdaptivePool2dSpec::example(),
        adaptive(Max, Forward, F64, [2, 3], [13, 4], [4, 3]),
        // Upsampling: windows overlap.
        adaptive(Avg, Forward, F16, [1, 2], [3, 5], [5, 7]),
        adaptive(Max, Forward, Bf16, [1, 1], [1, 1], [1, 1]),
        adaptive(Avg, Backward, F32, [2, 2], [7, 5], [3, 2]),
        // Upsampling backward: a pixel lies in several windows.
        adaptive(Avg, Backward, Bf16, [1, 3], [3, 4], [5, 7]),
        adaptive(Avg, Backward, F64, [1, 1], [11, 1], [1, 1]),
        adaptive(Max, Forward, F32, [0, 2], [5, 5], [2, 2]),
    ]
}

/// Indices of max-pool backward. With a window they are what the forward writes: each
/// output's index is a random in-image element of its own window (`iy·W + ix`).
/// Without one any value is routed by the reference: some reach past both ends of the
/// plane (skipped), and f32 ones are fractional (truncated toward zero).
pub(super) fn pool_indices(s: &Pool2dBackwardSpec, k: usize, seed: u64) -> Option<Vec<f64>> {
    let sig = s.inputs().into_iter().nth(k)?;
    if sig.name != "indices" || s.kind != PoolKind::Max {
        return None;
    }
    let Some(w) = s.window else {
        let len = (s.image.height * s.image.width) as i64;
        let d = match sig.dtype {
            ScalarType::F32 => Domain::Real(-2.0, len as f64 + 2.0),
            ScalarType::U32 => Domain::Int(0, len + 1),
            _ => Domain::Int(-2, len + 1),
        };
        return Some((0..sig.numel()).map(|i| draw(d, seed, k, i)).collect());
    };
    // The in-image range of output `o`'s window along dimension `d`.
    let range = |d: usize, o: usize, size: usize| {
        let start = o * w.stride[d];
        let lo = start.max(w.padding[d]) - w.padding[d];
        let hi = (start + w.kernel[d]).min(size + w.padding[d]) - w.padding[d];
        (lo, hi.max(lo + 1))
    };
    let planes = s.image.batch * s.image.channels;
    let mut out = Vec::with_capacity(planes * s.out_height * s.out_width);
    for i in 0..planes * s.out_height * s.out_width {
        let (oy, ox) = ((i / s.out_width) % s.out_height, i % s.out_width);
        let (y0, y1) = range(0, oy, s.image.height);
        let (x0, x1) = range(1, ox, s.image.width);
        let taps = (y1 - y0) * (x1 - x0);
        let r = draw(Domain::Int(0, taps as i64 - 1), seed, k, i) as usize;
        out.push(((y0 + r / (x1 - x0)) * s.image.width + x0 + r % (x1 - x0)) as f64);
    }
    Some(out)
}
